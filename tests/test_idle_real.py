"""What the idle time waits for, on real GPU traces: the share of the idle gaps during which the
GPU already held the work that ends them (analysis/sql/idle.sql) against the same figure read
from the raw trace by plain Python (tests/kineto_truth.py), and the cause the diagnosis names.

HTA's negative-queue-length trace (rank 0 of 16, torch.compile with CUDA graphs): the host runs
~160 ms ahead of the GPU, whose idle gaps follow graph launches issued long before; an engineer
told "host-, input- or launch-bound" would tune the input pipeline for nothing. HTA's
df_index_resolver trace: the GPU waits for the host (launches arrive after the gaps begin)."""

from __future__ import annotations

import pytest
from conftest import DATA, analysis_store
from kineto_truth import idle_gaps

from commwall.analysis import policy
from commwall.analysis.report.build import build_report

STALLED = DATA / "kineto/hta_negative_queue_length_rank0of16"
STARVED = DATA / "kineto/hta_df_index_resolver_rank1of2"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    con = analysis_store(tmp_path_factory.mktemp("idle") / "store.duckdb", (STALLED, STARVED))
    yield {d.name: build_report(con, d.name, keep_going=False) for d in (STALLED, STARVED)}
    con.close()


@pytest.mark.parametrize("trace", [STALLED, STARVED], ids=["stalled", "starved"])
def test_queued_share_matches_the_raw_trace(reports, trace):
    (path,) = trace.glob("*.json.gz")
    truth = idle_gaps(path)
    s = reports[trace.name]["summary"]
    assert s["idle_queued_share"] == pytest.approx(truth["queued_ns"] / truth["gaps_ns"], abs=0.02)
    assert s["launch_lead_ms"] == pytest.approx(truth["lead_ns"] / 1e6, rel=0.02)


def test_a_gpu_idle_with_work_queued_is_not_called_host_bound(reports):
    rep = reports[STALLED.name]
    d, s = rep["diagnosis"], rep["summary"]
    # read from the raw trace: 0.87 of the idle time had its work launched, 162 ms ahead
    assert s["idle_queued_share"] > 0.8 and s["launch_lead_ms"] > 100
    assert d["cause"] == "device" and d["causes"][0] == "device"
    assert "host-, input- or launch-bound" not in d["paragraph"]
    assert "The host is not what the GPU waits for" in d["paragraph"]
    assert "the idle host time" not in d["paragraph"]


def test_a_gpu_starved_by_its_host_stays_host_bound(reports):
    rep = reports[STARVED.name]
    d, s = rep["diagnosis"], rep["summary"]
    assert s["idle_queued_share"] < policy.IDLE_QUEUED_SHARE
    assert d["cause"] == "host" and "host-, input- or launch-bound" in d["paragraph"]
    assert "The host is not what the GPU waits for" not in d["paragraph"]


def test_a_capture_of_a_few_kernels_is_no_evidence(tmp_path):
    """nsys-ai's mock export: three kernels on one GPU, each launched 0.6-18 ms before it runs
    (first-launch costs); too few launches to call the GPU stalled (IDLE_MIN_LAUNCHED)."""
    from conftest import gunzip_to

    run = tmp_path / "mock"
    run.mkdir()
    gunzip_to(DATA / "nsys/nsys_ai_2gpu/mock.sqlite.gz", run)
    con = analysis_store(tmp_path / "store.duckdb", (run,))
    rep = build_report(con, "mock", keep_going=False)
    con.close()
    assert rep["summary"]["idle_queued_share"] is None
    assert rep["diagnosis"]["cause"] != "device"
