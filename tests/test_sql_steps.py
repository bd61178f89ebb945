"""Table-driven tests of step windows (analysis/sql/steps.sql) and per-step overlap
(analysis/sql/overlap.sql) on tiny stores built row by row."""

from __future__ import annotations

import pytest
from conftest import memory_store


def store_with(steps, acts):
    """A one-run, one-rank store. steps: (step, ts, dur); acts: (ts, dur, kind, launch_ts)."""
    con = memory_store()
    con.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    con.execute("INSERT INTO ranks (run_id, rank) VALUES (1, 0)")
    for s, ts, dur in steps:
        con.execute("INSERT INTO steps VALUES (1, 1, 0, ?, ?, ?)", [s, ts, dur])
    for ts, dur, kind, launch in acts:
        con.execute(
            "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, launch_ts) "
            "VALUES (1, 0, 1, ?, ?, ?, ?)",
            [ts, dur, kind, launch],
        )
    return con


# (case, steps, activities, expected windows [(step, ts, dur)])
WINDOW_CASES = [
    (
        "cpu trace: step 2 starts at its first op while step 1's comm still runs",
        [(1, 0, 100), (2, 100, 100)],
        [(2, 50, "compute", 2), (60, 60, "comm", 60), (101, 50, "compute", 101)],
        [(1, 0, 101), (2, 101, 99)],
    ),
    (
        "cpu trace: a stall before the first op is the step's own (host start)",
        [(1, 0, 100), (2, 100, 100)],
        [(2, 40, "compute", 2), (150, 30, "compute", 150)],
        [(1, 0, 100), (2, 100, 100)],
    ),
    (
        "cpu trace: the previous step's comm ends inside the stall: the window starts there",
        [(1, 0, 100), (2, 100, 100)],
        [(2, 40, "compute", 2), (60, 70, "comm", 60), (140, 20, "compute", 140)],
        [(1, 0, 130), (2, 130, 70)],
    ),
    (
        "gpu trace: a device window starts at its first kernel, whatever the host did",
        [(1, 0, 100), (2, 100, 100)],
        [(10, 40, "compute", 2), (150, 30, "compute", 120)],
        [(1, 10, 140), (2, 150, 50)],
    ),
    (
        "gpu work launched in step 1 runs after the host moved on",
        [(1, 0, 10), (2, 10, 10)],
        [(5, 30, "compute", 1), (40, 10, "comm", 12)],
        [(1, 5, 35), (2, 40, 10)],
    ),
    ("step without activity keeps its host window", [(3, 100, 50)], [], [(3, 100, 50)]),
    (
        "last step ends at its last activity when that is later than the host end",
        [(1, 0, 10)],
        [(2, 5, "compute", 1), (4, 20, "comm", 2)],
        [(1, 2, 22)],
    ),
    (
        "activity launched before the first step does not move the window",
        [(1, 100, 10)],
        [(50, 80, "compute", 40)],
        [(1, 100, 10)],
    ),
]


@pytest.mark.parametrize("case,steps,acts,expected", WINDOW_CASES, ids=[c[0] for c in WINDOW_CASES])
def test_step_windows(case, steps, acts, expected):
    con = store_with(steps, acts)
    got = con.execute("SELECT step, ts, dur FROM step_windows(1) ORDER BY step").fetchall()
    assert got == expected


def test_step_overlap_clips_to_window_and_partitions_time():
    # step 1 window [0, 100), step 2 [100, 200): comm 80..130 is split 20 + 30
    con = store_with(
        [(1, 0, 100), (2, 100, 100)],
        [
            (0, 90, "compute", 0),
            (80, 50, "comm", 80),
            (100, 40, "compute", 100),
            (150, 50, "compute", 150),
        ],
    )
    rows = con.execute(
        "SELECT step, span_ns, compute_ns, comm_ns, both_ns, busy_ns, idle_ns, exposed_comm_ns, "
        "eta, gamma FROM step_overlap(1) ORDER BY step"
    ).fetchall()
    # step 1: compute [0,90), comm [80,100): both 10, busy 100
    assert rows[0] == (1, 100, 90, 20, 10, 100, 0, 10, 10 / 20, 20 / 90)
    # step 2: compute [100,140)+[150,200) = 90, comm [100,130) = 30, both 30, busy 90
    assert rows[1] == (2, 100, 90, 30, 30, 90, 10, 0, 1.0, 30 / 90)
    whole = con.execute("SELECT comm_ns, compute_ns FROM rank_overlap(1)").fetchone()
    assert whole == (rows[0][3] + rows[1][3], rows[0][2] + rows[1][2])


def test_no_comm_gives_null_eta_and_zero_gamma():
    con = store_with([(1, 0, 10)], [(0, 10, "compute", 0)])
    eta, gamma, frac = con.execute(
        "SELECT eta, gamma, comm_overlap_fraction FROM step_overlap(1)"
    ).fetchone()
    assert eta is None and gamma == 0 and frac is None
