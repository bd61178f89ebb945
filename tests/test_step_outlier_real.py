"""A step window that pulls the mean step above the median is named in the diagnosis, against
the windows read from the raw trace by plain Python (tests/kineto_truth.py).

HTA's negative-queue-length trace: ProfilerStep#550-554; the GPU lags the host by ~160 ms, so
the last window lasts until the GPU has finished what the host queued: 372 ms against ~216 ms
for the others, and the mean step (what the parts add up to) is 14 % above the median."""

from __future__ import annotations

import statistics

import pytest
from conftest import DATA, analysis_store
from kineto_truth import gpu_steps

from analysis import policy
from analysis.report import build_report

TRACE = DATA / "kineto/hta_negative_queue_length_rank0of16"


def test_the_step_that_pulls_the_mean_up_is_named(tmp_path):
    (path,) = TRACE.glob("*.json.gz")
    windows = {n: w["step_ns"] / 1e6 for n, w in gpu_steps(path).items()}
    worst = max(windows, key=lambda n: windows[n])
    mean, med = statistics.mean(windows.values()), statistics.median(windows.values())
    assert worst == 554 and mean > (1 + policy.MEAN_ABOVE_MEDIAN) * med
    con = analysis_store(tmp_path / "store.duckdb", (TRACE,))
    rep = build_report(con, TRACE.name, keep_going=False)
    con.close()
    assert rep["summary"]["step_ms"] == pytest.approx(mean, abs=0.01)
    assert rep["summary"]["step_ms_median"] == pytest.approx(med, abs=0.01)
    para = rep["diagnosis"]["paragraph"]
    assert f"step 554 takes {windows[554]:.1f} ms (the last profiled step" in para
    assert f"above the median ({med:.1f} ms)" in para


def test_no_outlier_sentence_when_the_steps_agree(tmp_path):
    sets = (DATA / "kineto/hta_df_index_resolver_rank1of2",)
    con = analysis_store(tmp_path / "store.duckdb", sets)
    rep = build_report(con, sets[0].name, keep_going=False)
    con.close()
    s = rep["summary"]
    assert s["step_ms"] <= (1 + policy.MEAN_ABOVE_MEDIAN) * s["step_ms_median"]
    assert "above the median" not in rep["diagnosis"]["paragraph"]
