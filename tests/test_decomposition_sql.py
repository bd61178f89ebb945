"""Table-driven tests of the step decomposition (analysis/sql/decomposition.sql) and of the
what-if replay (analysis/replay/engine.py) on a tiny two-rank store whose answers are worked out by
hand in the comments.

The macros asserted read the matching of collectives, the clock fit and the step windows
(`PREREQUISITES`); each test computes those once, in an analysis session of the run, as the
report's session does. The macros asserted are not cached there: their own SQL computes them."""

from __future__ import annotations

import pytest
from conftest import memory_store
from hypothesis import given, settings
from hypothesis import strategies as st

from commwall.analysis.replay.engine import WhatIf, _load, job_step, replay, standard_whatifs
from commwall.analysis.report.session import CACHED, run_session
from commwall.analysis.steps.timeline import VIEW_TABLES

PARTS = (
    "compute_only_ns",
    "compute_overlapped_ns",
    "exposed_transfer_ns",
    "exposed_wait_ns",
    "memory_only_ns",
    "idle_ns",
)


#: The session's tables the macros compared here read: the matching, the clock fit and the step
#: windows, the inputs every view of a step reads (analysis/steps/timeline.py); outside a session
#: every macro call would compute them again.
PREREQUISITES = VIEW_TABLES
assert set(PREREQUISITES) <= set(CACHED)


def prepared(con):
    """An analysis session of run 1 caching only PREREQUISITES."""
    return run_session(con, 1, names=PREREQUISITES)


_STORE: dict = {}  # one in-memory store, emptied for every case (loading the macros is slow)


def store_with(ranks):
    """One run; ranks: {rank: (host steps [(step, ts, dur)], activities [(ts, dur, kind)],
    all-reduces [(ts, dur, seq)])}. An activity is launched at its own start; an all-reduce is
    both a comm activity and a collective call (4 floats, process group '0')."""
    con = _STORE.get("con")
    if con is None:
        con = _STORE["con"] = memory_store()
    for table in ("runs", "ranks", "steps", "activities", "collectives"):
        con.execute(f"DELETE FROM {table}")
    con.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    for r, (steps, acts, colls) in ranks.items():
        con.execute("INSERT INTO ranks (run_id, rank, host) VALUES (1, ?, 'h')", [r])
        for s, ts, dur in steps:
            con.execute("INSERT INTO steps VALUES (1, 1, ?, ?, ?, ?)", [r, s, ts, dur])
        rows = [*acts, *((ts, dur, "comm") for ts, dur, _ in colls)]
        for ts, dur, kind in rows:
            con.execute(
                "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, launch_ts)"
                " VALUES (1, ?, 1, ?, ?, ?, ?)",
                [r, ts, dur, kind, ts],
            )
        for ts, dur, seq in colls:
            con.execute(
                "INSERT INTO collectives (run_id, rank, file_id, ts, dur, launch_ts, op, pg_name,"
                " group_size, seq, seq_source, dtype, in_nelems, out_nelems, in_bytes, out_bytes)"
                " VALUES (1, ?, 1, ?, ?, ?, 'allreduce', '0', 2, ?, 'Seq', 'float', 4, 4, 16, 16)",
                [r, ts, dur, ts, seq],
            )
    return con


# Rank 0 computes [0, 30), enters the all-reduce at 20, copies memory [70, 80); rank 1 computes
# [0, 40) and enters at 40: rank 0 waits [20, 40) (10 of it under its own compute), both
# transfer [40, 60). Windows [0, 100) on both ranks (the host steps end at 100).
TWO = {
    0: ([(1, 0, 100)], [(0, 30, "compute"), (70, 10, "memory")], [(20, 40, 0)]),
    1: ([(1, 0, 100)], [(0, 40, "compute")], [(40, 20, 0)]),
}

# (case, ranks, expected {rank: (compute_only, overlapped, transfer, wait, memory, idle)})
CASES = [
    ("late peer: wait before its arrival, transfer after", TWO,
     {0: (20, 10, 20, 10, 10, 30), 1: (40, 0, 20, 0, 0, 40)}),
    ("a comm interval no instance explains counts as transfer",
     {0: ([(1, 0, 50)], [(0, 10, "compute"), (10, 30, "comm")], [])},
     {0: (10, 0, 30, 0, 0, 10)}),
    ("two comm streams: one transferring while the other waits is transfer",
     {0: ([(1, 0, 100)], [(30, 20, "comm")], [(20, 40, 0)]),
      1: ([(1, 0, 100)], [(0, 40, "compute")], [(40, 20, 0)])},
     # rank 0's window starts at its host start (0: every activity runs on the host): idle
     # [0, 20); [20, 30) wait only; [30, 40) a stream transfers beside the waiting one;
     # [40, 60) transfer; idle [60, 100)
     {0: (0, 0, 30, 10, 0, 60), 1: (40, 0, 20, 0, 0, 40)}),
    ("a step without activity is all idle",
     {0: ([(1, 0, 50), (2, 50, 30)], [(0, 20, "compute")], [])},
     # step 1 [0, 50): compute 20, idle 30; step 2 [50, 80): idle 30
     {0: (20, 0, 0, 0, 0, 60)}),
]  # fmt: skip


def parts(con):
    with prepared(con):
        rows = con.execute(f"SELECT rank, {', '.join(PARTS)}, step_ns FROM step_decomposition(1)")
        return rows.fetchall()


@pytest.mark.parametrize("case,ranks,expected", CASES, ids=[c[0] for c in CASES])
def test_step_decomposition(case, ranks, expected):
    got = parts(store_with(ranks))
    by_rank: dict[int, list] = {}
    for r, *p, step in got:
        assert sum(p) == step  # the six parts add up to the window, to the nanosecond
        by_rank.setdefault(r, []).append(tuple(p))
    assert {r: tuple(map(sum, zip(*v, strict=True))) for r, v in by_rank.items()} == expected


def test_summary_is_the_mean_row_and_agrees_with_overlap():
    con = store_with(TWO)
    with prepared(con):
        s = con.execute("SELECT * FROM run_summary(1)").df().iloc[0]
    # mean of the two windows: compute (30 + 40) / 2, comm (40 + 20) / 2, overlap (10 + 0) / 2
    assert (s.step_ns, s.tau_comp_ns, s.tau_comm_ns, s.overlap_ns) == (100, 35, 30, 5)
    assert s.eta == 5 / 30 and s.gamma == 30 / 35
    assert s.exposed_comm_ns == s.exposed_transfer_ns + s.exposed_wait_ns == 25
    assert s.exposed_comm_share == 0.25


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 200),
            st.integers(0, 60),
            st.sampled_from(["compute", "comm", "memory"]),
        ),
        max_size=12,
    ),
    st.integers(0, 80),
    st.integers(0, 80),
)
def test_parts_always_add_up(acts, a0, a1):
    """Any timeline, with an all-reduce the two ranks enter at a0 and a1."""
    ranks = {
        0: ([(1, 0, 150), (2, 150, 100)], acts, [(a0, 30, 0)]),
        1: ([(1, 0, 150), (2, 150, 100)], [(0, 10, "compute")], [(a1, 30, 0)]),
    }
    got = parts(store_with(ranks))
    assert got and all(sum(p) == step and min(p) >= 0 for _, *p, step in got)


# -- the replay -------------------------------------------------------------------------------
# Store TWO as chains: rank 0 arrives at 20 (gap 20 after its window start), rank 1 at 40 (gap
# 40); the instance's last arrival S = 40 and end E = 60, so its transfer is T = 20; both window
# ends come 40 after E. Idle: rank 0's tail [60, 100) holds 10 of memory (idle 30); rank 1's
# tail is all idle (40); no gap before a call is idle.
REPLAY = [
    ("unchanged", WhatIf("u", "u"), 100),
    # the instance starts at the first arrival (20) and ends at 40: both ends at 80
    ("no waiting", WhatIf("w", "w", barrier="first"), 80),
    ("transfer 2x faster", WhatIf("t", "t", transfer_scale=0.5), 90),  # E = 40 + 10
    ("transfer hidden", WhatIf("h", "h", transfer_scale=0.0), 80),  # E = 40
    # rank 1 arrives with the median of the others (20): E = 40; its tail is the others' (40)
    ("late rank at the others' pace", WhatIf("s", "s", fixed_ranks=(1,)), 80),
    # rank 0 ends at 60 + 10, rank 1 at 60 + 0: the slowest is 70
    ("idle removed", WhatIf("i", "i", remove_idle=True), 70),
    # E = 20: rank 0 at 60, rank 1 cannot leave before its own arrival (40) + 40
    ("all communication hidden", WhatIf("c", "c", barrier="first", transfer_scale=0.0), 80),
]


@pytest.mark.parametrize("case,whatif,expected", REPLAY, ids=[c[0] for c in REPLAY])
def test_replay_by_hand(case, whatif, expected):
    con = store_with(TWO)
    with prepared(con):
        steps = _load(con, 1)
    assert job_step(replay(steps, whatif), "replayed_ns") == expected


def test_standard_whatifs_fix_the_flagged_ranks_or_the_top_cause():
    keys = [w.key for w in standard_whatifs([], None)]
    assert "straggler_fixed" not in keys and keys[0] == "unchanged"
    assert next(w for w in standard_whatifs([3, 5], 1) if w.fixed_ranks).fixed_ranks == (3, 5)
    assert next(w for w in standard_whatifs([], 1) if w.fixed_ranks).fixed_ranks == (1,)
