"""The notebook facade `analysis.api.Store` / `Run` on a synthetic run whose every activity is
known (tests/synthetic_traces.py): each method returns what the simulation put there."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
import synthetic_traces as syn

from commwall.analysis.api import Store
from commwall.analysis.db import RunNotFound
from commwall.analysis.report.build import SECTIONS
from commwall.analysis.report.session import run_session
from commwall.ingest import store

# 2 hosts × 2 ranks, 3 steps of 4 collectives; rank labels shuffled against process order
SCN = syn.Scenario(
    hosts=2, ranks_per_host=2, steps=3, collectives_per_step=4, rank_of=(2, 0, 3, 1), seed=3
)


@pytest.fixture(scope="module")
def sim():
    return syn.simulate(SCN)


@pytest.fixture(scope="module")
def path(sim, tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    files = syn.write_kineto(sim, d / "traces")
    con = store.connect(d / "store.duckdb")
    store.ingest(con, "syn", files)
    con.close()
    return d / "store.duckdb"


@pytest.fixture(scope="module")
def report(path):
    """The run's report, built once for the tests that compare with it (read, never changed)."""
    with Store(path) as st:
        return st.run("syn").report()


@pytest.fixture()
def s(path):
    st = Store(path)
    yield st
    st.close()


def proc_of(sim, rank: int) -> int:
    return next(p for p in range(SCN.world) if sim.rank(p) == rank)


def test_runs_lists_the_run_with_its_files_and_ranks(s):
    runs = s.runs()
    assert runs["run"].tolist() == ["syn"]
    row = runs.iloc[0]
    assert (row["files"], row["ranks"], row["formats"]) == (SCN.world, SCN.world, "kineto")


def test_ranks_carry_host_and_whole_trace_compute(s, sim):
    ranks = s.run("syn").ranks().set_index("rank")
    assert sorted(ranks.index) == list(range(SCN.world))
    for r in ranks.index:
        p = proc_of(sim, r)
        assert ranks.loc[r, "host"] == sim.host(p)
        # compute kernels never overlap one another: τ_comp is their plain sum
        assert ranks.loc[r, "compute_ns"] == sim.compute_dur[p].sum()
        assert ranks.loc[r, "comm_ns"] == (sim.end[p] - sim.arrive[p]).sum()


def test_steps_are_one_row_per_rank_and_step(s, sim):
    steps = s.run("syn").steps()
    want = {(r, n) for r in range(SCN.world) for n in sim.truth()["steps"]}
    assert set(zip(steps["rank"], steps["step"], strict=True)) == want
    assert len(steps) == len(want)


def test_activities_filter_by_kind_and_rank(s, sim):
    comm = s.run("syn").activities(kind="comm", rank=3)
    p = proc_of(sim, 3)
    assert set(comm["kind"]) == {"comm"} and set(comm["rank"]) == {3}
    assert comm["dur"].tolist() == (sim.end[p] - sim.arrive[p]).tolist()  # in time order
    assert comm["ts"].is_monotonic_increasing
    every = s.run("syn").activities()
    assert len(every[every["kind"] == "compute"]) == SCN.world * len(sim.ops)


def test_collectives_one_call_per_rank_and_collective(s, sim):
    calls = s.run("syn").collectives()
    assert len(calls) == SCN.world * len(sim.ops)
    assert calls.groupby("rank")["op"].apply(list).map(lambda ops: ops == sim.ops).all()


def test_report_is_the_run_report(report, sim):
    rep = report
    assert rep["run"] == "syn"
    by_rank = {r["rank"]: r for r in rep["ranks"]}
    p = proc_of(sim, 1)
    assert by_rank[1]["tau_comp_ms"] == pytest.approx(sim.compute_dur[p].sum() / 1e6)


def test_a_section_alone_is_the_reports(s, report):
    """`Run.section` (what `commwall whatif`, `nccl`, `hang` print) computes one section in an
    analysis session of the tables it reads (SECTION_TABLES), or in none: the report's value
    either way; and it leaves nothing cached behind."""
    run = s.run("syn")
    rep = report
    for key in SECTIONS:
        assert run.section(key) == rep[key], key
    left = "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_session_%'"
    assert run.con.execute(left).fetchone() == (0,)
    with pytest.raises(KeyError, match="no report section"):
        run.section("diagnosis")  # derived from the others: only in the report


def test_unknown_run_names_the_runs_there_are(s):
    with pytest.raises(RunNotFound, match="syn"):
        s.run("nope")


def test_store_is_read_only_and_closes(path):
    st = Store(path)
    with pytest.raises(duckdb.Error):
        st.con.execute("DELETE FROM runs")
    st.close()
    with pytest.raises(duckdb.Error):
        st.runs()


def test_missing_store_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such database"):
        Store(tmp_path / "absent.duckdb")


def test_prepared_is_the_report_tables_and_scenario_in_one_session(s, sim, report):
    """What the dashboard computes once per run: each part equal to its accessor alone, and
    the instances the simulation made (one per collective, with every rank)."""
    run = s.run("syn")
    got = run.prepared(("rank_step_wait",), ("instances",))
    assert got.report == report  # `Run.report` alone, on a connection of its own
    for a, b in [
        (got.tables["rank_step_wait"], run.rank_step_wait()),
        (got.views["instances"], run.collective_table("instances")),
    ]:  # the same rows; a table macro's row order is not defined
        pd.testing.assert_frame_equal(_sorted(a), _sorted(b))
    assert len(got.views["instances"]) == len(sim.ops)
    assert (got.views["instances"]["n_ranks"] == SCN.world).all()
    assert len(got.tables["rank_step_wait"]) == SCN.world * SCN.steps
    # the scenario alone, in an analysis session of its own as the report's model section
    # reads it (outside any session it matches the collectives and fits the clocks again for
    # every macro it reads: the same rows, tests/test_analysis_session.py, at many times the
    # cost); that session is not prepared's, whose tables it shares nothing with
    with run_session(run.con, run.id):
        alone = run.scenario()
    assert got.has_scenario and got.scenario == alone
    # the timeline's views: each of the 3 steps with the 4 ranks (fewer than 8)
    steps = sorted({r["step"] for r in got.report["steps"]})
    assert (
        sorted(got.tracks) == [(step, (0, 1, 2, 3)) for step in steps] and len(steps) == SCN.steps
    )
    for (step, ranks), (tracks, calls) in got.tracks.items():
        want_tracks, want_calls = run.step_tracks(step, list(ranks))
        pd.testing.assert_frame_equal(tracks, want_tracks)
        pd.testing.assert_frame_equal(calls, want_calls)
        assert len(calls) == SCN.world * SCN.collectives_per_step


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(list(df.columns[:3])).reset_index(drop=True)
