"""The crash cases of the model section: real DLRM with one rank's clock shifted, with jittered
all-reduce durations, and single-rank traces all give a report (never an exception), and
single-rank traces are never fitted on kernel durations. Each section is computed as the report
computes it: in a session of its run (the run's intermediate tables once)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA, DLRM

from commwall.analysis import db
from commwall.analysis.model.section import model_section
from commwall.analysis.report import run_cache
from commwall.analysis.report.session import run_session
from commwall.ingest import store


@pytest.fixture(autouse=True, scope="module")
def _no_run_cache():
    """The tests edit a run's rows in place (a clock shifted, durations jittered), which the run
    cache's fingerprint does not see: a session must compute the tables, never read them back."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(run_cache.ENV, "0")
        yield


def section(con, rid: int) -> dict:
    """The model section of run `rid`, in a session of the run (as the report builds it)."""
    with run_session(con, rid):
        return model_section(con, rid)


def _ingest(path, name, files):
    con = store.connect(path)
    store.ingest(con, name, files)
    con.close()
    con = db.open_db(path, read_only=False)
    return con, con.execute("SELECT run_id FROM runs WHERE name = ?", [name]).fetchone()[0]


@pytest.fixture(scope="module")
def dlrm(tmp_path_factory):
    return _ingest(tmp_path_factory.mktemp("m") / "d.duckdb", "dlrm", sorted(DLRM.glob("*.gz")))


def _is_report(m):
    assert isinstance(m["status"], str) and m["status"]
    assert m["status"] == "calibrated" or m["status"].startswith(
        ("not calibrated: ", "fit too uncertain: held-out median error ")
    )
    for f in (m["fit"] or {}).get("per_op", []):
        assert f["status"] and f["heldout_n"] >= 0


def test_shifted_clock_gives_a_report(dlrm):
    con, rid = dlrm
    con.execute("BEGIN")
    try:
        # rank 5's clock +3 ms: clock alignment recovers it, the fit must not fall over
        con.execute("UPDATE collectives SET ts = ts + 3000000 WHERE run_id = ? AND rank = 5", [rid])
        m = section(con, rid)
    finally:
        con.execute("ROLLBACK")
    _is_report(m)
    assert {f["op"] for f in m["fit"]["per_op"]} == {"allreduce", "alltoall"}


def test_jittered_allreduce_durations_give_a_report(dlrm):
    con, rid = dlrm
    rng = np.random.default_rng(0)
    for _ in range(12):
        con.execute("BEGIN")
        try:
            con.execute("SELECT setseed(?)", [float(rng.random())])
            con.execute(
                "UPDATE collectives SET dur = round(dur * (1 + ? * (random() - 0.5)))::BIGINT"
                " WHERE run_id = ? AND op = 'allreduce'",
                [0.02, rid],
            )
            _is_report(section(con, rid))
        finally:
            con.execute("ROLLBACK")


@pytest.mark.parametrize(
    "name", ["hta_nccl_parser_config_rank0of2", "hta_trace_diff_test_rank1of2"]
)
def test_single_rank_traces_are_not_fitted_on_kernel_durations(tmp_path, name):
    files = sorted((DATA / "kineto" / name).iterdir())
    files = [f for f in files if ".json" in f.name]
    con, rid = _ingest(tmp_path / "s.duckdb", name, files)
    m = section(con, rid)
    # one rank traced: no instance has a transfer time seen across ranks
    assert m["status"] == "not calibrated: no matched collectives"
    assert m["fit"] is None and m["predicted"] is None


def test_kernel_names_label_the_protocol(dlrm):
    # every DLRM all-reduce kernel is "ncclKernel_AllReduce_RING_LL_Sum_float(...)" and every
    # all-to-all runs "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(...)" (zgrep of worker0's trace)
    con, rid = dlrm
    per_op = {f["op"]: f for f in section(con, rid)["fit"]["per_op"]}
    assert [r["protocol"] for r in per_op["allreduce"]["regimes"]] == ["RING/LL"]
    assert [r["protocol"] for r in per_op["alltoall"]["regimes"]] == ["RING/SIMPLE"]
