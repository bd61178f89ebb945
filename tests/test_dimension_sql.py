"""Table-driven tests of the step by dimension (analysis/sql/dimension.sql): the exposed
communication of a timeline given to the keys exposed at each instant, answers worked out by
hand in the comments; and a property test that the keys add up to decomposition.sql's parts."""

from __future__ import annotations

import pytest
from conftest import memory_store
from hypothesis import given, settings
from hypothesis import strategies as st

_STORE: dict = {}


def con():
    if "con" not in _STORE:
        _STORE["con"] = memory_store()
    return _STORE["con"]


def dimension_parts(rows):
    """rows: (ts, dur, kind, dkey) of one group → {dkey: (transfer, wait)}."""
    c = con()
    c.execute("CREATE OR REPLACE TEMP TABLE t (grp INT, ts BIGINT, dur BIGINT, kind VARCHAR,"
              " dkey VARCHAR)")  # fmt: skip
    if rows:
        c.executemany("INSERT INTO t VALUES (0, ?, ?, ?, ?)", [list(r) for r in rows])
    got = c.execute(
        "SELECT dkey, exposed_transfer_ns, exposed_wait_ns FROM dimension_parts('t')"
    ).fetchall()
    return {k: (t, w) for k, t, w in got}


# (case, rows (ts, dur, kind, dkey), expected {dkey: (exposed transfer, exposed wait)})
CASES = [
    ("one call alone is its key's transfer",
     [(0, 10, "comm", "TP")],
     {"TP": (10, 0)}),
    ("compute hides what it overlaps",
     # compute [0, 10), TP [5, 15): exposed [10, 15)
     [(0, 10, "compute", None), (5, 10, "comm", "TP")],
     {"TP": (5, 0)}),
    ("a wait, a transfer, then two keys share",
     # TP [0, 20) waiting [0, 5); DP [10, 30): [0, 5) TP wait; [5, 10) TP transfer;
     # [10, 20) both transfer, 5 each; [20, 30) DP
     [(0, 20, "comm", "TP"), (0, 5, "wait", "TP"), (10, 20, "comm", "DP")],
     {"TP": (10, 5), "DP": (15, 0)}),
    ("one key waiting while another transfers: the transfer's",
     [(0, 10, "comm", "TP"), (0, 10, "wait", "TP"), (0, 10, "comm", "DP")],
     {"DP": (10, 0)}),
    ("two keys waiting share the wait",
     [(0, 10, "comm", "TP"), (0, 10, "wait", "TP"), (0, 10, "comm", "EP"),
      (0, 10, "wait", "EP")],
     {"TP": (0, 5), "EP": (0, 5)}),
    ("two calls of one key at once count once",
     [(0, 10, "comm", "DP"), (5, 10, "comm", "DP")],
     {"DP": (15, 0)}),
    ("memory and idle are no communication",
     [(0, 10, "memory", None), (20, 5, "compute", None)],
     {}),
]  # fmt: skip


@pytest.mark.parametrize("case,rows,expected", CASES, ids=[c[0] for c in CASES])
def test_dimension_parts(case, rows, expected):
    assert dimension_parts(rows) == expected


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 100),
            st.integers(0, 40),
            st.sampled_from(["compute", "comm", "memory", "wait"]),
            st.sampled_from(["TP", "DP", "EP"]),
        ),
        max_size=10,
    )
)
def test_keys_add_up_to_the_decomposition(rows):
    """Whatever the timeline, the keys' transfer and wait add up to timeline_parts' exposed
    transfer and wait (a wait interval lies inside a comm interval of its key)."""
    full = []
    for ts, dur, kind, key in rows:
        if kind == "wait":  # as wait_intervals makes them: inside their call
            full += [(ts, dur + 5, "comm", key), (ts, dur, "wait", key)]
        else:
            full.append((ts, dur, kind, key if kind == "comm" else None))
    got = dimension_parts(full)
    c = con()
    want = c.execute(
        "SELECT coalesce(sum(exposed_transfer_ns), 0), coalesce(sum(exposed_wait_ns), 0) "
        "FROM timeline_parts('t')"
    ).fetchone()
    assert sum(t for t, _ in got.values()) == pytest.approx(want[0])
    assert sum(w for _, w in got.values()) == pytest.approx(want[1])


def test_a_blocking_wait_takes_the_key_of_the_call_it_overlaps():
    """dimension_rows on a store: a comm activity that is no call (a functional wait) takes
    the key of the call it overlaps longest; calls take their group's dimension; an FSDP group's
    all-gathers and other calls are keyed apart."""
    c = con()
    for table in ("runs", "ranks", "steps", "activities", "collectives"):
        c.execute(f"DELETE FROM {table}")
    c.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    c.execute("INSERT INTO ranks (run_id, rank, host) VALUES (1, 0, 'h')")
    calls = [(0, 10, "a", "1", "allreduce"), (20, 10, "b", "2", "allgather"),
             (40, 10, "c", "2", "reduce_scatter")]  # fmt: skip
    for ts, dur, name, pg, op in calls:
        c.execute("INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, name, launch_ts)"
                  " VALUES (1, 0, 1, ?, ?, 'comm', ?, ?)", [ts, dur, name, ts])  # fmt: skip
        c.execute("INSERT INTO collectives (run_id, rank, file_id, ts, dur, op, name, pg_name,"
                  " group_size) VALUES (1, 0, 1, ?, ?, ?, ?, ?, 2)",
                  [ts, dur, op, name, pg])  # fmt: skip
    # the wait [2, 22) overlaps call a [0, 10) by 8 and call b [20, 30) by 2: a's key
    c.execute("INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, name, launch_ts)"
              " VALUES (1, 0, 1, 2, 20, 'comm', '_c10d_functional::wait_tensor', 2)")  # fmt: skip
    c.execute("CREATE OR REPLACE TEMP TABLE roles (pg_name VARCHAR, dimension VARCHAR)")
    c.execute("INSERT INTO roles VALUES ('1', 'TP'), ('2', 'FSDP')")
    got = c.execute(
        "SELECT ts, dkey FROM dimension_rows(1, 'roles') WHERE kind = 'comm' ORDER BY ts"
    ).fetchall()
    assert got == [(0, "TP"), (2, "TP"), (20, "FSDP all-gather"), (40, "FSDP reduce-scatter")]
