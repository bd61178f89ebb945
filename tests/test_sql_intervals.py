"""Table-driven tests of analysis/sql/intervals.sql on tiny inline tables, plus a property test
against a brute-force implementation."""

from __future__ import annotations

import duckdb
import pytest
from conftest import memory_store
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return memory_store()


def cover(con, rows):
    """timeline_cover over (grp, ts, dur, kind) rows: {grp: (comp, comm, both, busy)}."""
    con.execute("CREATE OR REPLACE TEMP TABLE t (grp INT, ts BIGINT, dur BIGINT, kind VARCHAR)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    out = con.execute("SELECT * FROM timeline_cover(t) ORDER BY grp").fetchall()
    return {g: tuple(r) for g, *r in out}


# (case, rows (grp, ts, dur, kind), expected {grp: (compute, comm, both, busy)})
COVER_CASES = [
    ("disjoint", [(1, 0, 10, "compute"), (1, 20, 5, "comm")], {1: (10, 5, 0, 15)}),
    ("touching", [(1, 0, 10, "compute"), (1, 10, 5, "comm")], {1: (10, 5, 0, 15)}),
    ("nested comm in compute", [(1, 0, 100, "compute"), (1, 10, 20, "comm")], {1: (100, 20, 20, 100)}),
    ("nested compute in compute", [(1, 0, 100, "compute"), (1, 10, 20, "compute")], {1: (100, 0, 0, 100)}),
    ("partial overlap", [(1, 0, 10, "compute"), (1, 5, 10, "comm")], {1: (10, 10, 5, 15)}),
    ("identical", [(1, 0, 10, "compute"), (1, 0, 10, "comm")], {1: (10, 10, 10, 10)}),
    ("identical same kind", [(1, 0, 10, "comm"), (1, 0, 10, "comm")], {1: (0, 10, 0, 10)}),
    ("zero length ignored", [(1, 5, 0, "comm"), (1, 0, 10, "compute")], {1: (10, 0, 0, 10)}),
    ("ties at start", [(1, 0, 3, "comm"), (1, 0, 7, "comm"), (1, 0, 5, "compute")], {1: (5, 7, 5, 7)}),
    ("memory counts only as busy", [(1, 0, 10, "memory"), (1, 5, 10, "comm")], {1: (0, 10, 0, 15)}),
    ("groups apart", [(1, 0, 10, "compute"), (2, 0, 10, "comm")], {1: (10, 0, 0, 10), 2: (0, 10, 0, 10)}),
    ("empty", [], {}),
]  # fmt: skip


@pytest.mark.parametrize("case,rows,expected", COVER_CASES, ids=[c[0] for c in COVER_CASES])
def test_timeline_cover(con, case, rows, expected):
    assert cover(con, rows) == expected


MERGE_CASES = [
    ("disjoint", [(1, 0, 5), (1, 10, 5)], [(1, 0, 5), (1, 10, 5)]),
    ("touching merge", [(1, 0, 5), (1, 5, 4)], [(1, 0, 9)]),
    ("nested", [(1, 0, 10), (1, 2, 3)], [(1, 0, 10)]),
    ("chain", [(1, 0, 4), (1, 3, 4), (1, 6, 4)], [(1, 0, 10)]),
    ("zero length dropped", [(1, 3, 0)], []),
    ("identical", [(1, 1, 2), (1, 1, 2)], [(1, 1, 2)]),
]


@pytest.mark.parametrize("case,rows,expected", MERGE_CASES, ids=[c[0] for c in MERGE_CASES])
def test_interval_merge(con, case, rows, expected):
    con.execute("CREATE OR REPLACE TEMP TABLE m (grp INT, ts BIGINT, dur BIGINT)")
    if rows:
        con.executemany("INSERT INTO m VALUES (?, ?, ?)", rows)
    got = con.execute("SELECT grp, ts, dur FROM interval_merge(m) ORDER BY grp, ts").fetchall()
    assert got == expected


def brute(rows):
    """Per group, count covered unit cells for each set (times are small integers)."""
    out = {}
    for g in {r[0] for r in rows}:
        comp, comm, anyk = set(), set(), set()
        for grp, ts, dur, kind in rows:
            if grp != g or dur <= 0:
                continue
            cells = set(range(ts, ts + dur))
            anyk |= cells
            if kind == "compute":
                comp |= cells
            elif kind == "comm":
                comm |= cells
        if anyk:
            out[g] = (len(comp), len(comm), len(comp & comm), len(anyk))
    return out


interval = st.tuples(
    st.integers(0, 2),
    st.integers(0, 60),
    st.integers(0, 25),
    st.sampled_from(["compute", "comm", "memory"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(interval, max_size=25))
def test_timeline_cover_matches_brute_force(con, rows):
    # the module's store (loading the macros is slow): `cover` replaces its table every time
    assert cover(con, rows) == brute(rows)
