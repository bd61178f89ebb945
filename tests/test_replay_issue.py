"""Table-driven tests of the replay's issue times (analysis/sql/replay.sql `replay_issues`,
analysis/replay/engine.py): a collective that a worker thread runs (gloo) cannot start before the
program issued it, however early the call ahead of it in the worker's queue ends. The stores are
tiny and every answer is worked out by hand in the comments."""

from __future__ import annotations

import pytest
from test_decomposition_sql import store_with as decomposition_store

from commwall.analysis.replay.engine import (
    WhatIf,
    _load,
    job_step,
    job_steps,
    replay,
    replay_section,
    whatif_by_step,
)

MAIN, WORKER = 1, 2  # thread ids: the program's thread, gloo's worker thread


def store_with(ranks: dict) -> object:
    """One run, one step [0, 80) per rank; ranks: {rank: (all-reduces [(ts, dur, seq)] run on the
    worker thread, issue ops [ts] on the main thread)}. Every rank also computes [0, 5)."""
    con = decomposition_store(
        {r: ([(1, 0, 80)], [(0, 5, "compute")], colls) for r, (colls, _) in ranks.items()}
    )
    con.execute(
        "UPDATE activities SET tid = ?, name = 'gloo:all_reduce' WHERE kind = 'comm'", [WORKER]
    )
    for r, (_, issues) in ranks.items():
        for ts in issues:
            con.execute(
                "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, name, tid, "
                "launch_ts) VALUES (1, ?, 1, ?, 1, 'other', 'c10d::allreduce_', ?, ?)",
                [r, ts, MAIN, ts],
            )
    return con


# Rank 1 issues all-reduce A at 10 and B at 30; its worker runs A [10, 55) (waiting for rank 0
# until 50) and B [55, 65) (queued behind A). Rank 0, late, runs A [50, 55) and B [60, 65).
# Instance A: last arrival S = 50, end E = 55, transfer 5; B: S = 60, E = 65, transfer 5.
LATE = {
    0: ([(50, 5, 1), (60, 5, 2)], [50, 60]),
    1: ([(10, 45, 1), (55, 10, 2)], [10, 30]),
}

ISSUES = [
    # the n-th c10d op issued the n-th worker call: (rank, call start, issue)
    ("paired in order", LATE, [(0, 50, 50), (0, 60, 60), (1, 10, 10), (1, 55, 30)]),
    # rank 1 has one op for two calls: it cannot be paired, so it has no row
    ("counts differ", {0: LATE[0], 1: (LATE[1][0], [10])}, [(0, 50, 50), (0, 60, 60)]),
    # no ops at all (a trace without c10d ops): no issue times
    ("no ops", {0: (LATE[0][0], []), 1: (LATE[1][0], [])}, []),
]


@pytest.mark.parametrize("case,ranks,expected", ISSUES, ids=[c[0] for c in ISSUES])
def test_replay_issues_by_hand(case, ranks, expected):
    con = store_with(ranks)
    got = con.execute("SELECT * FROM replay_issues(1) ORDER BY rank, raw_ts").fetchall()
    assert got == expected


def test_device_calls_have_no_issue_time():
    """Calls on a device stream (NCCL kernels) are not worker-thread calls: no pairing."""
    con = store_with(LATE)
    con.execute("UPDATE activities SET stream = 7 WHERE kind = 'comm'")
    assert con.execute("SELECT count(*) FROM replay_issues(1)").fetchone() == (0,)


REPLAY = [
    ("unchanged", LATE, WhatIf("u", "u"), 80),
    # Rank 0 at the others' pace: A starts at rank 1's arrival 10 and ends at 15. Rank 1's B
    # was issued 20 after A's issue (30), its worker free at 15: B arrives at 30, ends at 35;
    # both tails are 15 (65 -> 80): 50. (Read without the issue, B would follow A's end at 15
    # and the step would be 35.)
    ("late rank fixed", LATE, WhatIf("s", "s", fixed_ranks=(0,)), 50),
    ("late rank fixed, issues unknown", {0: (LATE[0][0], []), 1: (LATE[1][0], [])},
     WhatIf("s", "s", fixed_ranks=(0,)), 35),
    # Nobody waits: A starts at its first arrival 10, ends 15. Rank 1 reaches B at its issue
    # (30), B starts at 30 and ends at 35, rank 1 ends at 50. Rank 0 issues B 5 after its end of
    # A but never before its own arrival at A (50): 55; its tail 15 after that: 70.
    ("no waiting", LATE, WhatIf("w", "w", barrier="first"), 70),
]  # fmt: skip


@pytest.mark.parametrize("case,ranks,whatif,expected", REPLAY, ids=[c[0] for c in REPLAY])
def test_replay_with_issue_times_by_hand(case, ranks, whatif, expected):
    steps = _load(store_with(ranks), 1)
    assert job_step(replay(steps, whatif), "replayed_ns") == expected


def test_job_steps_take_the_slowest_rank_of_each_step():
    import pandas as pd

    df = pd.DataFrame({"rank": [0, 1, 0, 1], "step": [1, 1, 2, 2], "replayed_ns": [10, 30, 50, 20]})
    assert job_steps(df, "replayed_ns").to_dict() == {1: 30, 2: 50}


def test_whatif_by_step_fixes_the_rank_causing_the_waiting():
    """Per step (one here): the measured step 80, unchanged 80, rank 0 (all of the waiting is
    for it) fixed 50 as in 'late rank fixed' above."""
    got = whatif_by_step(store_with(LATE), 1).set_index("key")
    assert got.loc["unchanged", ["step", "measured_ns", "step_ns"]].tolist() == [1, 80, 80]
    assert got.loc["straggler_fixed", "step_ns"] == 50


def test_steps_of_no_duration_are_not_replayed():
    """Two ranks whose only step window and collective take 0 ns (a corrupt export can give it):
    there is no step time to shorten, so the replay is not available and says why, instead of
    what-ifs that each save 0 of 0 ms."""
    zero = {r: ([(1, 5, 0)], [(5, 0, "compute")], [(5, 0, 1)]) for r in (0, 1)}
    sec = replay_section(decomposition_store(zero), 1)
    assert sec["available"] is False and "0 ms" in sec["reason"] and sec["whatifs"] == []
