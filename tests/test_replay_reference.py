"""The vectorised what-if replay (analysis/replay/chain.py, analysis/replay/walk.py) against the
Python walk it replaced (tests/replay_reference.py): the replayed time of every (rank, step)
under every what-if is the same to the nanosecond, on the real runs of the repository, on
synthetic runs of several shapes (tests/synthetic_traces.py) and on random small runs (a seeded
generator: ranks that take part in some instances only, in different orders, asynchronous calls
that overlap, calls run by a worker thread after the program issued them, sizes that disagree,
duplicated step windows). A run whose calls wait for each other in a cycle fails in both."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import replay_reference as ref
from conftest import DATA, SAMPLES, memory_store
from synthetic_traces import Scenario, insert_run, simulate

from commwall.analysis.db import open_db, run_id
from commwall.analysis.replay import engine as replay
from commwall.analysis.replay.chain import BusyTime
from commwall.analysis.replay.engine import WhatIf
from commwall.analysis.report.session import run_session
from commwall.ingest import discover, store

MAIN, WORKER = 1, 2  # thread ids of the random runs: the program's, gloo's worker thread


def whatifs(con, rid: int, ranks: list[int]) -> list[WhatIf]:
    """The report's what-ifs, and each kind of change with a few sets of ranks fixed."""
    out = replay.standard_whatifs(*replay._targets(con, rid))
    sets = [(r,) for r in ranks[:3]] + [tuple(ranks[:2]), tuple(ranks), (ranks[-1], 10_000)]
    for i, fixed in enumerate(sets):
        out += [
            WhatIf(f"fixed {i}", "", fixed_ranks=fixed),
            WhatIf(f"fixed {i}, first", "", fixed_ranks=fixed, barrier="first"),
            WhatIf(f"fixed {i}, idle", "", fixed_ranks=fixed, remove_idle=True),
            WhatIf(f"fixed {i}, 3x", "", fixed_ranks=fixed, transfer_scale=1 / 3),
        ]
    return out + [WhatIf("first, 0.7x, idle", "", barrier="first", transfer_scale=0.7,
                         remove_idle=True)]  # fmt: skip


def assert_same_replay(con, rid: int) -> tuple[int, object]:
    """The new replay equals the reference under every what-if; returns the number of windows
    compared (-1: a cycle, in both) and the steps loaded. Both read the run inside its analysis
    session, as the report does (the same rows as the macros on their own, computed once)."""
    with run_session(con, rid):
        return _same_replay(con, rid)


def _same_replay(con, rid: int) -> tuple[int, object]:
    ranks = [int(r) for r, in con.execute("SELECT DISTINCT rank FROM ranks WHERE run_id = ? "
                                          "ORDER BY rank", [rid]).fetchall()]  # fmt: skip
    ws = whatifs(con, rid, ranks or [0])
    old_steps, old_total = ref._load_steps(con, rid)
    try:
        want = [ref.replay(old_steps, w) for w in ws]
    except RecursionError:  # a cycle: the new walk finds no call to take next
        steps = replay._load(con, rid)
        with pytest.raises(RecursionError):
            replay.replay_all(steps, ws)
        return -1, steps
    steps, total = replay._load_steps(con, rid)
    assert total == old_total
    assert len(set(steps.step.tolist())) == len(old_steps)  # steps_replayed
    assert (steps.n_calls == 0) == (not any(st.members for st in old_steps))
    for w, got, exp in zip(ws, replay.replay_all(steps, ws), want, strict=True):
        if exp.empty:
            assert got.empty, w
            continue
        pd.testing.assert_frame_equal(got, exp, check_exact=True, obj=w.key)
    return len(want[0]), steps


# -- real runs -------------------------------------------------------------------------------

REAL = {
    **{d.name: d for d in sorted(SAMPLES.iterdir()) if len(list(d.glob("*.pt.trace.json*"))) >= 2},
    **{f"{d.name}/{half}": d / half for d in sorted((DATA / "gloo_pairs").iterdir())
       if d.is_dir() for half in ("straggler", "baseline")},
    **{f"alternating/{d.name}": d for d in sorted((DATA / "gloo_alternating").iterdir())
       if d.is_dir()},
}  # fmt: skip


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "store.duckdb"
    w = store.connect(path)
    for name, d in REAL.items():
        store.ingest(w, name, discover.expand([str(d)]))
    w.close()
    c = open_db(path)
    yield c
    c.close()


def test_the_real_sets_are_there():
    assert {"dlrm_8rank", "gloo_4rank_sleep"} <= set(REAL)
    assert any("/straggler" in k for k in REAL) and any("alternating/" in k for k in REAL)


@pytest.mark.parametrize("name", REAL)
def test_real_run(real, name):
    n, _ = assert_same_replay(real, run_id(real, name))
    # the flight-recorder sets have no step windows: nothing to replay, in both
    assert n == 0 if name.startswith("fr_") else n > 0


# -- synthetic runs --------------------------------------------------------------------------

SHAPES = {
    "compute straggler": Scenario(hosts=2, ranks_per_host=4, steps=3, straggler=5,
                                  clock_offsets_us=(0, 700.0)),
    "late straggler": Scenario(hosts=3, ranks_per_host=2, steps=2, mode="late", straggler=1,
                               seed=4),
    "no straggler, matched by order": Scenario(hosts=1, ranks_per_host=3, with_seq=False),
    "single rank": Scenario(hosts=1, ranks_per_host=1, steps=2),
    "two ranks, one step": Scenario(hosts=1, ranks_per_host=2, steps=1, straggler=0),
}  # fmt: skip

# Edits of a stored run (2 x 2 ranks, steps 2-4 of 6 calls, seq 0-17), and what they make.
EDITS = {
    "unequal calls": (
        "DELETE FROM collectives WHERE rank = 2 AND seq % 4 = 1",
        lambda st: len(set(np.diff(st.first).tolist())) > 1,
    ),
    "empty step": (
        "DELETE FROM collectives WHERE seq >= 6 AND seq < 12",
        lambda st: 3 in st.step and 3 not in st.step[st.win],
    ),
    "duplicated window": (
        "INSERT INTO steps SELECT * FROM steps WHERE rank = 1 AND step = 3",
        lambda st: st.weight.tolist().count(2) == 1,
    ),
    "rank without activity": (
        "DELETE FROM activities WHERE rank = 3",
        lambda st: (st.rank[st.win] == 3).any() and st.idle[st.rank[st.win] == 3].max() == 0,
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_synthetic_run(shape):
    con = memory_store()
    rid = insert_run(con, "s", simulate(SHAPES[shape]))
    n, steps = assert_same_replay(con, rid)
    assert n == SHAPES[shape].world * SHAPES[shape].steps  # every window, with calls or not
    assert steps.n_calls == (0 if SHAPES[shape].world == 1 else n * 6)


@pytest.mark.parametrize("edit", EDITS)
def test_edited_synthetic_run(edit):
    con = memory_store()
    rid = insert_run(con, "s", simulate(Scenario(hosts=2, ranks_per_host=2, steps=3, straggler=2)))
    sql, made = EDITS[edit]
    con.execute(sql)
    n, steps = assert_same_replay(con, rid)
    assert n > 0 and made(steps)


# -- random small runs -----------------------------------------------------------------------


_RANDOM: dict = {}  # one store for all random runs (making one takes a second)


def random_run(seed: int) -> tuple[object, int]:
    """A store with one random run: 1-5 ranks, 1-3 steps of up to 7 instances, each instance on
    two or more ranks (sometimes one rank's size differs), a rank's calls sometimes in another
    order than the others' and overlapping (asynchronous), sometimes run by a worker thread
    after their issue; compute in between; sometimes a step window twice."""
    rng = np.random.default_rng(seed)
    n_ranks, n_steps = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    con = _RANDOM.get("con") or _RANDOM.setdefault("con", memory_store())
    for table in ("runs", "ranks", "steps", "activities", "collectives"):
        con.execute(f"DELETE FROM {table}")
    con.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    acts, colls, steps = [], [], []
    plan = []  # per step: [(seq, ranks, odd rank)]
    seq = 0
    for _ in range(n_steps):
        insts = []
        for _ in range(int(rng.integers(0, 8))):
            k = int(rng.integers(2, n_ranks + 1)) if n_ranks >= 2 else 1
            who = sorted(rng.choice(n_ranks, k, replace=False).tolist())
            odd = int(rng.choice(who)) if rng.random() < 0.1 else -1
            insts.append((seq, who, odd))
            seq += 1
        plan.append(insts)
    for r in range(n_ranks):
        con.execute("INSERT INTO ranks (run_id, rank, host) VALUES (1, ?, ?)", [r, f"h{r % 2}"])
        worker, overlap = rng.random() < 0.4, rng.random() < 0.4
        t = int(rng.integers(0, 3_000))
        for s, insts in enumerate(plan):
            start = t
            mine = [x for x in insts if r in x[1]]
            if rng.random() < 0.25:
                rng.shuffle(mine)
            issue = t
            for q, _, odd in mine:
                if rng.random() < 0.6:
                    c = int(rng.integers(50, 400))
                    acts.append((r, t, c, "compute", None, MAIN, 7))
                t += int(rng.integers(1, 500))
                dur = int(rng.integers(1, 900))
                issue = int(rng.integers(issue, t + 1)) if worker else t
                if worker:
                    acts.append((r, issue, 1, "other", "c10d::allreduce_", MAIN, None))
                acts.append((r, t, dur, "comm", "allreduce", WORKER if worker else 9,
                             None if worker else 21))  # fmt: skip
                size = 32 if r == odd else 16
                colls.append((r, t, dur, q, n_ranks, size))
                if not overlap or rng.random() < 0.5:
                    t += dur
            t += int(rng.integers(1, 800))
            steps.append((r, s + 1, start - int(rng.integers(0, 50)), t - start + 60))
            if rng.random() < 0.05:
                steps.append(steps[-1])
            t += int(rng.integers(0, 200))
    a = pd.DataFrame(acts, columns=["rank", "ts", "dur", "kind", "name", "tid", "stream"])
    a["launch_ts"], a["run_id"], a["file_id"] = a["ts"], 1, 1
    c = pd.DataFrame(colls, columns=["rank", "ts", "dur", "seq", "group_size", "in_bytes"])
    c["launch_ts"], c["out_bytes"], c["in_nelems"] = c["ts"], c["in_bytes"], c["in_bytes"] // 4
    c["out_nelems"], c["run_id"], c["file_id"] = c["in_nelems"], 1, 1
    c["op"], c["pg_name"], c["seq_source"], c["dtype"] = "allreduce", "0", "Seq", "float"
    st = pd.DataFrame(steps, columns=["rank", "step", "ts", "dur"])
    st["run_id"], st["file_id"] = 1, 1
    for table, df in (("activities", a), ("collectives", c), ("steps", st)):
        con.register("_rows", df)
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
        con.unregister("_rows")
    return con, 1


def test_random_runs():
    """Every random run replays the same; and the generator makes what it says: asynchronous
    calls (an earlier call still running at a later call's issue), calls held by a busy worker
    thread, duplicated windows, cycles."""
    seen = {"compared": 0, "async": 0, "worker": 0, "windows": 0, "cycle": 0}
    for seed in range(40):
        con, rid = random_run(seed)
        with run_session(con, rid):
            n, steps = assert_same_replay(con, rid)
            seen["cycle"] += n == -1
            seen["compared"] += n > 0
            if n > 0:
                seen["worker"] += bool((steps.busy_prev >= 0).any())
                seen["windows"] += bool((steps.weight > 1).any())
                seen["async"] += con.execute(
                    "SELECT count(*) > 0 FROM (SELECT te > lead(issue_ts) OVER (PARTITION BY "
                    "rank, step ORDER BY ts) AS x FROM replay_calls(?)) WHERE x",
                    [rid],
                ).fetchone()[0]
    assert all(v > 0 for v in seen.values()), seen


def test_busy_time_against_the_reference():
    """The idle time of any [a, b) of a rank: the vectorised BusyTime against the reference's
    per-rank bisection, at random points and at the intervals' own ends; a rank with a NULL row
    only (activity, none in range) is idle throughout, a rank without rows never."""
    rng = np.random.default_rng(11)
    rows, refs = [], {}
    for r in range(6):
        if r == 4:
            rows.append((r, None, None))
            refs[r] = ref._Busy(np.zeros(0, np.int64), np.zeros(0, np.int64))
            continue
        cuts = np.sort(rng.choice(np.arange(10**6, 10**6 + 5_000), 2 * int(rng.integers(1, 9)),
                                  replace=False))  # fmt: skip
        ts, dur = cuts[0::2], cuts[1::2] - cuts[0::2]
        rows += [(r, None, None)] + [(r, int(t), int(d)) for t, d in zip(ts, dur, strict=True)]
        refs[r] = ref._Busy(ts, dur)
    df = pd.DataFrame(rows, columns=["rank", "ts", "dur"]).astype({"ts": "Int64", "dur": "Int64"})
    busy = BusyTime(df)
    points = np.concatenate(
        [rng.integers(10**6 - 100, 10**6 + 5_100, 300), df["ts"].dropna(),
         (df["ts"] + df["dur"]).dropna()]
    ).astype(np.int64)  # fmt: skip
    rank = rng.integers(0, 7, 2000)  # rank 6: no rows
    a, b = rng.choice(points, 2000), rng.choice(points, 2000)
    asked = zip(rank.tolist(), a.tolist(), b.tolist(), strict=True)
    want = [refs[r].idle(x, y) if r in refs else 0 for r, x, y in asked]
    assert busy.idle(rank, a, b).tolist() == want
    assert (busy.idle(rank, a, b) > 0).sum() > 500
