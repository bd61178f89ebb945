"""The bundled gloo_4rank_sleep set (4 unpinned ranks on a 2-vCPU host, rank 2 sleeping 40 ms in
its backward hooks every step) reads "mostly data transfer", with fixing rank 2 a smaller fix
than hiding the transfer. Its counterfactual: the same job made with the sleep in every other
block of 3 steps only (tests/data/gloo_unpinned/sleep_backward_4rank_r2), so that its clean
steps, measured in the same run, say what the delayed ones would take without the sleep. From
the raw traces the delayed steps take only a few ms more than the clean ones: while rank 2
sleeps, the other three ranks have the two cores to themselves, so most of its sleep is hidden.
The answer holds against that truth: the run reads "mostly data transfer" too, and fixing rank 2
is neither the largest fix nor below what the trace shows it costs (the text calls it an upper
estimate)."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import DATA, SAMPLES, analysis_store
from kineto_truth import job_steps_ms

from commwall.analysis.db import run_id
from commwall.analysis.replay import engine as replay
from commwall.analysis.report.build import build_report

RUN = DATA / "gloo_unpinned/sleep_backward_4rank_r2"


@pytest.fixture(scope="module")
def truth():
    gt = json.loads((RUN / "ground_truth.json").read_text())
    steps = job_steps_ms(RUN)
    delayed = set(gt["delayed_steps"])
    slow = statistics.median(v for s, v in steps.items() if s in delayed)
    clean = statistics.median(v for s, v in steps.items() if s not in delayed)
    return {"gt": gt, "delayed": delayed, "slow_ms": slow, "clean_ms": clean}


def test_the_sleep_is_mostly_hidden_on_the_shared_cores(truth):
    gt = truth["gt"]
    assert gt["straggler_rank"] == 2 and gt["mode"] == "sleep" and not gt["pinned"]
    assert gt["world_size"] == 4 and gt["host_cpus"] == 2
    injected = statistics.median(x for x in gt["injected_delay_ms"] if x > 0)
    assert injected > 39
    cost = truth["slow_ms"] - truth["clean_ms"]  # what the sleep costs a delayed step
    assert cost < 0.25 * injected and cost < 0.15 * truth["clean_ms"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    runs = (RUN, SAMPLES / "gloo_4rank_sleep")
    con = analysis_store(tmp_path_factory.mktemp("cf") / "store.duckdb", runs)
    out = {r.name: build_report(con, r.name, keep_going=False) for r in runs}
    out["by_step"] = replay.whatif_by_step(con, run_id(con, RUN.name))
    con.close()
    return out


@pytest.mark.parametrize("name", [RUN.name, "gloo_4rank_sleep"])
def test_both_read_mostly_data_transfer_not_the_late_rank(reports, name):
    rep = reports[name]
    assert rep["diagnosis"]["paragraph"].startswith("Communication wall, mostly data transfer")
    whatifs = {w["key"]: w for w in rep["replay"]["whatifs"]}
    assert rep["replay"]["fixed_ranks"] == [2]
    assert whatifs["transfer_hidden"]["saving_ms"] > whatifs["straggler_fixed"]["saving_ms"]
    assert "late-rank fix is an upper estimate" in rep["diagnosis"]["paragraph"]


def test_fixing_the_late_rank_is_an_upper_estimate(reports, truth):
    """On the delayed steps the replay's saving from fixing rank 2 is at least what the clean
    steps show the sleep costs (it keeps the other ranks' compute as measured, faster while
    rank 2 slept)."""
    t = reports["by_step"]
    fixed = t[t["key"] == "straggler_fixed"].set_index("step")
    saving = statistics.median(
        (fixed.loc[s, "measured_ns"] - fixed.loc[s, "step_ns"]) / 1e6 for s in truth["delayed"]
    )
    assert saving >= truth["slow_ms"] - truth["clean_ms"]
