"""The one-pass sweep of a run's timeline (analysis/steps/sweep.py) against the SQL definitions it
replaces in a session: operator_compute, step_overlap, rank_overlap, step_decomposition and
rank_decomposition computed by their own macros (the peer) and from the sweep must be the same
rows to the nanosecond, on random stores (nested, touching and zero-length intervals, operator
and wrapper compute, memory copies, matched all-reduces with waits, ranks without activity,
windows without activity, events split over many batches) and on the real sets.

Both sides read the tables the SQL definitions start from (the matching of collectives, the
clock fit, the step windows: `PREREQUISITES`) from one session, as the report's session does;
the macros compared are never cached, so their own SQL computes the peer."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from conftest import DLRM, SAMPLES, analysis_store, memory_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commwall.analysis.db import run_id
from commwall.analysis.report.session import CACHED, FROM_SWEEP, _sweep_tables, run_session
from commwall.analysis.steps import sweep as sweep_module
from commwall.analysis.steps.timeline import VIEW_TABLES

_CON: dict = {}

#: The session's tables the macros compared here read: the matching, the clock fit and the step
#: windows, the inputs every view of a step reads (analysis/steps/timeline.py); outside a session
#: every macro call would compute them again.
PREREQUISITES = VIEW_TABLES


def fast_and_slow(con, rid: int) -> list[tuple[str, pd.DataFrame, pd.DataFrame]] | None:
    """(macro, rows from the sweep, rows of the macro) for every macro the sweep replaces; None
    when the sweep does not apply. The macros' inputs (PREREQUISITES) are computed once, in a
    session; the macros themselves are not cached there."""
    assert set(PREREQUISITES) <= set(CACHED) and not set(PREREQUISITES) & set(FROM_SWEEP)
    with run_session(con, rid, names=PREREQUISITES):
        return _fast_and_slow(con, rid)


def _fast_and_slow(con, rid: int) -> list[tuple[str, pd.DataFrame, pd.DataFrame]] | None:
    tables = _sweep_tables(con, rid)
    if not tables:
        return None
    try:
        out = []
        for name, query in FROM_SWEEP.items():
            fast = con.execute(query.format(rid=rid, **tables)).df()
            slow = con.execute(f"SELECT * FROM {name}({rid})").df()
            out.append((name, fast, slow))
        return out
    finally:
        for t in tables.values():
            con.execute(f"DROP TABLE temp.{t}")


def assert_same(pairs) -> None:
    for name, fast, slow in pairs:
        assert list(fast.dtypes) == list(slow.dtypes), name
        pd.testing.assert_frame_equal(fast, slow, check_exact=True, obj=name)


KINDS = [("compute", "kernel", "gemm"), ("compute", "cpu_op", "aten::mm"),
         ("compute", "cpu_op", "evaluate_function: X"), ("comm", "kernel", "ncclKernel"),
         ("memory", "gpu_memcpy", "Memcpy")]  # fmt: skip

interval = st.tuples(st.integers(0, 60), st.integers(-2, 25), st.sampled_from(range(len(KINDS))))
rank_rows = st.tuples(
    st.lists(st.integers(0, 40), max_size=4),  # step starts (step numbers in list order)
    st.lists(interval, max_size=12),
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20)), max_size=3),  # all-reduces
)


#: Every call: an all-reduce of 4 floats in process group '0' of 3 ranks, matched by Seq.
ALLREDUCE = ("allreduce", "0", 3, "Seq", "float", 4, 4, 16, 16)


def random_store(ranks: list) -> duckdb.DuckDBPyConnection:
    """Run 1 of an in-memory store (reused: loading the macros is slow) holding `ranks`: per
    rank (step starts, activities (ts, dur, KINDS index), all-reduces (ts, dur), one per seq);
    ranks alternate between two hosts."""
    if "con" not in _CON:
        _CON["con"] = memory_store()
    con = _CON["con"]
    tables = {
        "runs": [(1, "r")],
        "ranks": [(1, r, f"h{r % 2}") for r in range(len(ranks))],
        "steps": [(1, 1, r, s, ts, 10) for r, x in enumerate(ranks) for s, ts in enumerate(x[0])],
        "activities": [
            (1, r, 1, ts, dur, *KINDS[k], ts) for r, x in enumerate(ranks) for ts, dur, k in x[1]
        ],
        "collectives": [
            (1, r, 1, ts, dur, ts, seq, *ALLREDUCE)
            for r, x in enumerate(ranks)
            for seq, (ts, dur) in enumerate(x[2])
        ],
    }
    columns = {
        "runs": "run_id, name",
        "ranks": "run_id, rank, host",
        "steps": "run_id, file_id, rank, step, ts, dur",
        "activities": "run_id, rank, file_id, ts, dur, kind, cat, name, launch_ts",
        "collectives": "run_id, rank, file_id, ts, dur, launch_ts, seq, op, pg_name,"
        " group_size, seq_source, dtype, in_nelems, out_nelems, in_bytes, out_bytes",
    }
    for table, rows in tables.items():
        con.execute(f"DELETE FROM {table}")
        if rows:
            marks = ", ".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {table} ({columns[table]}) VALUES ({marks})", rows)
    return con


def windows_overlap(con) -> bool:
    """Brute force: two step windows of one rank with positive length that share an instant."""
    return con.execute(
        "SELECT count(*) > 0 FROM step_windows(1) a JOIN step_windows(1) b"
        " ON a.rank = b.rank AND a.step < b.step AND a.dur > 0 AND b.dur > 0"
        " AND a.ts < b.ts + b.dur AND b.ts < a.ts + a.dur"
    ).fetchone()[0]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(rank_rows, min_size=1, max_size=3), st.integers(1, 9))
def test_sweep_equals_the_sql_on_random_stores(monkeypatch_batch, ranks, batch):
    monkeypatch_batch(batch)  # ranks spread over many batches
    con = random_store(ranks)
    pairs = fast_and_slow(con, 1)
    assert (pairs is None) == windows_overlap(con)
    if pairs is not None:
        assert_same(pairs)


@pytest.fixture
def monkeypatch_batch(monkeypatch):
    return lambda n: monkeypatch.setattr(sweep_module, "_BATCH", n)


def test_overlapping_windows_leave_the_sql():
    # host steps start at 5, 20 and 10: windows [5, 20) (up to step 1's start), [20, 20)
    # (step 2 starts earlier: empty) and [10, 20) (the host end), so [10, 20) lies in two
    con = random_store([([5, 20, 10], [(0, 40, 0)], [])])
    assert windows_overlap(con)
    assert sweep_module.sweep(con, 1) is None


@pytest.mark.parametrize("sample", [DLRM, SAMPLES / "gloo_4rank_compute"], ids=lambda p: p.name)
def test_sweep_equals_the_sql_on_real_sets(tmp_path, sample):
    con = analysis_store(tmp_path / "s.duckdb", (sample,))
    pairs = fast_and_slow(con, run_id(con, sample.name))
    assert pairs is not None
    assert_same(pairs)
    # the figures are not all zero: the real sets have compute, communication and waiting
    by_name = {name: fast for name, fast, _ in pairs}
    assert (by_name["step_decomposition"]["exposed_wait_ns"] > 0).any()
    assert (by_name["step_overlap"]["both_ns"] > 0).any()
