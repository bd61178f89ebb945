"""Table-driven tests of idle_gaps (analysis/sql/idle.sql) on one-rank stores built row by row:
the gaps between timeline activities, the part of them during which the activity that ends
the gap had been issued, and how far ahead the host issues its work."""

from __future__ import annotations

import pytest
from test_sql_steps import store_with

# (case, steps (step, ts, dur), activities (ts, dur, kind, launch_ts),
#  expected (gaps_ns, queued_ns, launched, lead_ns))
CASES = [
    (
        "host-starved: the work ending the gap is issued inside it",
        [(1, 0, 100)],
        [(0, 10, "compute", 0), (20, 10, "compute", 15)],
        (10, 5, 1, 5),
    ),
    (
        "device stall: the work ending the gap was issued before it began",
        [(1, 0, 100)],
        [(0, 10, "compute", 0), (20, 10, "comm", 5)],
        (10, 10, 1, 15),
    ),
    (
        "a long activity covers a later short one: the gap starts at the latest end",
        [(1, 0, 100)],
        [(0, 50, "compute", 0), (10, 10, "memory", 10), (60, 10, "compute", 55)],
        (10, 5, 1, 5),
    ),
    (
        "CPU activities (launch_ts = ts, or NULL): nothing queued, no lead",
        [(1, 0, 100)],
        [(0, 10, "compute", 0), (30, 10, "comm", None)],
        (20, 0, 0, None),
    ),
    (
        "gaps are clipped to the step windows' span",
        [(1, 100, 10), (2, 110, 10)],
        [(50, 10, "compute", 50), (100, 5, "compute", 100), (115, 5, "compute", 100)],
        (10, 10, 1, 15),
    ),
    ("no gap", [(1, 0, 100)], [(0, 10, "compute", 0), (10, 5, "compute", 2)], (0, 0, 1, 8)),
]


@pytest.mark.parametrize("case,steps,acts,expected", CASES, ids=[c[0] for c in CASES])
def test_idle_gaps(case, steps, acts, expected):
    con = store_with(steps, acts)
    got = con.execute("SELECT gaps_ns, queued_ns, launched, lead_ns FROM idle_gaps(1)").fetchall()
    assert got == [expected]


def test_other_activities_are_not_on_the_timeline():
    con = store_with([(1, 0, 100)], [(0, 10, "compute", 0), (12, 5, "other", 0)])
    con.execute("INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, launch_ts) "
                "VALUES (1, 0, 1, 30, 5, 'compute', 1)")  # fmt: skip
    assert con.execute("SELECT gaps_ns, queued_ns FROM idle_gaps(1)").fetchall() == [(20, 20)]
