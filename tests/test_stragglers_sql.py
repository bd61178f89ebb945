"""Table-driven tests of stragglers.sql (flag and kind rules, per-step levels) and
operator_compute.sql on tiny inline tables."""

from __future__ import annotations

import duckdb
import pytest
from conftest import memory_store

US = 1_000


@pytest.fixture(scope="module")
def store() -> duckdb.DuckDBPyConnection:
    return memory_store()


@pytest.fixture
def con(store) -> duckdb.DuckDBPyConnection:
    for table in ("collectives", "ranks", "steps", "activities"):
        store.execute(f"DELETE FROM {table}")
    return store


def scores(con, rows, level="run"):
    """_straggler_scores over one scope's rows: (rank, lateness µs, caused ns, window ns,
    compute µs, delay µs, units, mean share, sd of share); the scope is the run, or a step."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE t (level VARCHAR, step BIGINT, rank INT, lateness_ns DOUBLE,"
        " caused_ns BIGINT, window_ns BIGINT, compute_ns DOUBLE, delay_ns DOUBLE, n_units INT,"
        " mean_share DOUBLE, sd_share DOUBLE)"
    )
    con.executemany(
        f"INSERT INTO t VALUES ('{level}', {1 if level == 'step' else 'NULL'}, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?)",
        [
            (r, late * US, caused, window, None if c is None else c * US, d * US, k, m, sd)
            for r, late, caused, window, c, d, k, m, sd in rows
        ],
    )
    out = con.execute("SELECT rank, flagged, kind FROM _straggler_scores(t) ORDER BY rank")
    return {r: (f, k) for r, f, k in out.fetchall()}


W = 1_000_000  # window ns; caused 300_000 with 5 ranks = 6 % cost share


def five(late4=500, caused4=300_000, comp4=100, delay4=400, units=6, share4=0.8, sd4=0.05):
    """Five ranks; ranks 0-3 share the rest of the waiting evenly, rank 4 is the candidate.
    t of rank 4 = (share4 - 1/5) * sqrt(units) / sd4."""
    rest = (1 - share4) / 4
    quiet = [(r, d, 0, W, 100 + d, 1, units, rest, 0.05) for r, d in enumerate((0, 1, -1, 2))]
    return [*quiet, (4, late4, caused4, W, comp4, delay4, units, share4, sd4)]


# (case, rows, flagged {rank: kind}); t = (share - 1/n) sqrt(units) / max(sd, 0.001)
SCORE_CASES = [
    ("consistent, more compute: compute", five(comp4=400), {4: "compute"}),
    ("consistent, normal compute: other", five(), {4: "other"}),
    ("extra compute under half the delay: other", five(comp4=250), {4: "other"}),
    ("t just below 5: (0.8-0.2)*sqrt(6)/0.30 = 4.90", five(sd4=0.30), {}),
    ("t just above 5: (0.8-0.2)*sqrt(6)/0.29 = 5.07", five(sd4=0.29), {4: "other"}),
    ("too few units (2)", five(units=2, sd4=0.001), {}),
    ("below the 10 µs floor", five(late4=9, delay4=9), {}),
    # a rank whose calls queue behind the others' busy workers (gloo): its median lateness is
    # nil, but it arrives 40 ms after the first rank at its latest collective of each step
    ("median lateness nil, delay 40 ms: flagged", five(late4=0, delay4=40_000), {4: "other"}),
    ("median lateness nil, delay under the floor", five(late4=0, delay4=10), {}),
    ("cost under 5 %", five(caused4=200_000), {}),
    ("every unit agrees (sd 0): finite t, flagged", five(sd4=0.0), {4: "other"}),
    ("no compute measured: unknown", [(*r[:4], None, *r[5:]) for r in five()], {4: "unknown"}),
    ("two ranks: the one causing all waiting; compute vs the other rank",
     [(0, -30, 0, W, 100, 0, 6, 0.0, 0.0), (1, 30, 200_000, W, 150, 60, 6, 1.0, 0.0)],
     {1: "compute"}),
    ("two ranks, shares 0.6/0.4 with spread: chance",
     [(0, -30, 80_000, W, 100, 0, 6, 0.4, 0.3), (1, 30, 120_000, W, 100, 60, 6, 0.6, 0.3)],
     {}),
]  # fmt: skip


@pytest.mark.parametrize("case,rows,expected", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_flag_and_kind_rules(con, case, rows, expected):
    got = scores(con, rows)
    assert {r: k for r, (f, k) in got.items() if f} == expected
    assert all(k is None for r, (f, k) in got.items() if not f)


def two(caused1=700_000, caused0=100_000, late1=500, sd1=0.35, share1=0.875):
    """Two ranks in one scope of 8 units, window 1 ms: rank 1 causes `caused1` of the waiting
    (cost share caused1 / 2 ms), its share of the units `share1` with spread `sd1` (the default:
    7 of 8 instances, one of noise: t = (0.875 - 0.5) sqrt(8) / 0.35 = 3.0, under 5)."""
    return [
        (0, -late1, caused0, W, 100, 0, 8, 1 - share1, sd1),
        (1, late1, caused1, W, 100, late1, 8, share1, sd1),
    ]


# (case, rows, level, flagged {rank: kind}): in a step, causing more than half of its waiting at
# a cost of at least 35 % of the ranks' time flags a rank whose t the step's few units keep low
STEP_CASES = [
    ("step: 7 of 8 instances, 87.5 % of the waiting, 35 % cost", two(), "step", {1: "other"}),
    ("the same over the run: t alone decides", two(), "run", {}),
    ("step: 30 % cost", two(caused1=600_000, caused0=0), "step", {}),
    ("step: half of the waiting, not more", two(caused1=700_000, caused0=700_000), "step", {}),
    ("step: under the 10 µs floor", two(late1=5), "step", {}),
]  # fmt: skip


@pytest.mark.parametrize("case,rows,level,expected", STEP_CASES, ids=[c[0] for c in STEP_CASES])
def test_step_flag_rules(con, case, rows, level, expected):
    got = scores(con, rows, level)
    assert {r: k for r, (f, k) in got.items() if f} == expected


def test_scopes_are_scored_apart(con):
    con.execute(
        "CREATE OR REPLACE TEMP TABLE t AS SELECT * FROM (VALUES"
        " ('step', 1, 0, 0.0, 0, 1000000, 1.0, 0.0, 8, 0.0, 0.0),"
        " ('step', 1, 1, 0.0, 0, 1000000, 1.0, 0.0, 8, 0.0, 0.0),"
        " ('step', 1, 2, 90000.0, 200000, 1000000, 1.0, 90000.0, 8, 1.0, 0.0),"
        " ('step', 2, 0, 90000.0, 200000, 1000000, 1.0, 90000.0, 8, 1.0, 0.0),"
        " ('step', 2, 1, 0.0, 0, 1000000, 1.0, 0.0, 8, 0.0, 0.0),"
        " ('step', 2, 2, 0.0, 0, 1000000, 1.0, 0.0, 8, 0.0, 0.0))"
        " t(level, step, rank, lateness_ns, caused_ns, window_ns, compute_ns, delay_ns, n_units,"
        " mean_share, sd_share)"
    )
    got = con.execute(
        "SELECT step, rank FROM _straggler_scores(t) WHERE flagged ORDER BY step"
    ).fetchall()
    assert got == [(1, 2), (2, 0)]


def call(rank, ts, dur, seq):
    return (rank, ts, dur, ts, "allreduce", "0", 3, seq, "Seq", "float", 4, 4, 16, 16)


def test_levels_per_step_and_run(con):
    """3 ranks, 2 steps of 3 all-reduces each; rank 2 arrives 100 µs late every time."""
    rows, steps = [], []
    for r in range(3):
        for s in range(2):
            steps.append((r, s, s * 1_000_000, 1_000_000))
            for j in range(3):
                t = s * 1_000_000 + (j + 1) * 250_000
                late = 100_000 if r == 2 else r * 1_000
                rows.append(call(r, t + late, 150_000 - late, 3 * s + j))
    con.executemany(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, launch_ts, op, pg_name,"
        " group_size, seq, seq_source, dtype, in_nelems, out_nelems, in_bytes, out_bytes)"
        " VALUES (1, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    con.executemany("INSERT INTO steps VALUES (1, 0, ?, ?, ?, ?)", steps)
    con.executemany("INSERT INTO ranks (run_id, rank, host) VALUES (1, ?, 'h')", [(r,) for r in range(3)])  # fmt: skip
    run = {
        r["rank"]: r
        for r in con.execute("SELECT * FROM straggler_ranks(1)").df().to_dict("records")
    }
    assert [run[r]["flagged"] for r in range(3)] == [False, False, True]
    assert (run[2]["n_last"], run[2]["n_instances"], run[2]["late_fraction"]) == (6, 6, 1.0)
    assert (run[2]["n_steps"], run[2]["steps_flagged"]) == (2, 2)
    assert run[2]["lateness_ns"] == 99_000
    assert run[2]["kind"] == "unknown" and run[2]["compute_ns"] == 0  # no activities
    # each instance: arrivals 0, 1, 100 µs; the first µs is shared by ranks 1 and 2 (500 ns
    # each), the next 99 µs keep two ranks waiting on rank 2 alone
    assert [run[r]["caused_ns"] for r in range(3)] == [0, 6 * 500, 6 * 198_500]
    assert [run[r]["wait_ns"] for r in range(3)] == [6 * 100_000, 6 * 99_000, 0]
    assert run[2]["window_ns"] == 2_000_000
    assert run[2]["cost_share"] == pytest.approx(6 * 198_500 / (3 * 2_000_000))
    # units: the run has 2 steps (< 3), so its units are the 6 instances; rank 2's share of
    # each is 198_500 / 199_000; a step's units are its 3 instances
    assert run[2]["n_units"] == 6
    assert run[2]["mean_share"] == pytest.approx(198_500 / 199_000)
    assert run[2]["delay_ns"] == 100_000  # 100 µs after rank 0 at its latest collective
    per_step = con.execute("SELECT step, rank, caused_ns FROM straggler_steps(1) WHERE flagged")
    assert per_step.fetchall() == [(0, 2, 595_500), (1, 2, 595_500)]


def test_single_rank_is_not_applicable(con):
    con.execute(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, op, group_size)"
        " VALUES (1, 0, 0, 0, 10, 'allreduce', 8)"
    )
    assert con.execute("SELECT count(*) FROM straggler_ranks(1)").fetchone() == (0,)


def test_operator_compute_skips_wrapper_time(con):
    """A 100 µs autograd wrapper holding a 20 µs matmul and a 10 µs add (the rest is a sleep in
    a hook): operator time 30 µs; a GPU kernel counts whole; overlaps count once."""
    acts = [
        (0, 0, 100, "compute", "cpu_op", "autograd::engine::evaluate_function: ReluBackward0"),
        (0, 10, 20, "compute", "cpu_op", "aten::mm"),
        (0, 12, 5, "compute", "cpu_op", "aten::resolve_conj"),
        (0, 50, 10, "compute", "cpu_op", "aten::add"),
        (0, 200, 40, "compute", "kernel", "sm90_gemm"),
        (0, 220, 40, "compute", "kernel", "elementwise"),
        (0, 300, 50, "comm", "kernel", "ncclDevKernel_AllReduce"),
        (1, 0, 100, "compute", "cpu_op", "aten::mm"),
    ]
    con.executemany(
        "INSERT INTO activities (run_id, file_id, rank, ts, dur, kind, cat, name, launch_ts)"
        " VALUES (1, 0, ?, ?, ?, ?, ?, ?, 0)",
        [(r, t * US, d * US, k, c, n) for r, t, d, k, c, n in acts],
    )
    con.executemany("INSERT INTO steps VALUES (1, 0, ?, 7, 0, 1000)", [(0,), (1,)])
    got = con.execute("SELECT rank, step, compute_ns FROM operator_compute(1) ORDER BY rank")
    assert got.fetchall() == [(0, 7, 90 * US), (1, 7, 100 * US)]


# (case, steps as (rank, step, ts µs), expected {rank: (n_steps, start delay µs)}): each rank's
# median over the steps it shares with another rank of (its start - the step's first start)
START_CASES = [
    ("rank 1 starts 5, 7 and 3 µs after rank 0", [(0, 1, 0), (1, 1, 5), (0, 2, 100), (1, 2, 107),
     (0, 3, 200), (1, 3, 203)], {0: (3, 0.0), 1: (3, 5.0)}),
    ("the first rank changes from step to step", [(0, 1, 0), (1, 1, 4), (0, 2, 110), (1, 2, 100)],
     {0: (2, 5.0), 1: (2, 2.0)}),
    ("a step only one rank has is not compared", [(0, 1, 0), (1, 1, 6), (0, 2, 50)],
     {0: (1, 0.0), 1: (1, 6.0)}),
    ("no step shared by two ranks: no rows", [(0, 1, 0), (1, 2, 9)], {}),
]  # fmt: skip


@pytest.mark.parametrize("case,steps,expected", START_CASES, ids=[c[0] for c in START_CASES])
def test_step_start_delays(con, case, steps, expected):
    con.executemany(
        "INSERT INTO steps VALUES (1, 0, ?, ?, ?, 50000)", [(r, s, t * US) for r, s, t in steps]
    )
    con.executemany("INSERT INTO ranks (run_id, rank, host) VALUES (1, ?, 'h')", [(0,), (1,)])
    got = con.execute("SELECT rank, n_steps, start_delay_ns FROM step_start_delays(1)").fetchall()
    assert {r: (n, d / US) for r, n, d in got} == expected
