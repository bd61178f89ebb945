"""What-if replay of the measured run: the run's own timeline re-played with one thing changed.

Model (docs/diagnosis.md). Per step, every rank is a chain of *gaps* and *collective calls*, on
the aligned clock (sql/replay.sql):

* the first call of a rank's step comes a gap after its window start; a later call comes a gap
  after the rank's previous call, counted from that call's *end* when the rank arrived after it
  had ended (it was blocked on it: a blocking collective, or a serial communication thread), from
  its *arrival* otherwise (an asynchronous collective: the rank went on working); the window end
  comes a gap after the last call, counted the same way;
* every matched instance (>= 2 ranks, sizes agreeing) is a barrier: its transfer starts when its
  last rank arrives (S) and takes the measured transfer T = E - S, E the instance's median end.

Gaps hold whatever the rank did between calls (compute, memory copies, idle, other calls).
Where the trace says when the program *issued* a call that a worker thread ran later (gloo's
`c10d::*` op, sql/replay.sql), the chain above runs on the issues, and the call arrives at the
later of its issue and the own end of an earlier call the worker was still busy with (the
worker's measured delay after that end kept; a call that no earlier end held keeps its measured
delay after its issue): a call waiting in the worker's queue cannot start before the program
asked for it, however early the call ahead of it ends.
Replaying with nothing changed reproduces every window exactly (up to non-causal instances,
E < S, whose transfer is taken as 0). A what-if changes gaps or barriers and replays: the step
time of a step is its slowest rank's (window start to replayed window end), and the run's is the
median over steps (job_step).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from analysis import policy
from analysis.units import NS_PER_MS


@dataclass
class _Call:
    rank: int
    ik: int
    arrival: int
    dep: str  # the issue's: 'window' | 'arrival' (previous call's issue) | 'end' (an own end)
    prev: int  # index in the rank's chain of the call depended on (-1 for 'window')
    gap: int
    idle: int
    end_offset: int = 0  # the call's own end minus its instance's end E
    issue: int = -1  # when the program issued the call (= arrival when not known)
    busy_prev: int = -1  # the call whose own end the worker waited for after the issue, or -1
    busy_gap: int = 0  # that end to the arrival (without busy_prev: the issue to the arrival)


@dataclass
class _Rank:
    rank: int
    start: int
    end: int
    calls: list[_Call] = field(default_factory=list)
    tail_dep: str = "window"
    tail_prev: int = -1
    tail_gap: int = 0
    tail_idle: int = 0


@dataclass
class _Step:
    step: int
    ranks: dict[int, _Rank]
    last: dict[int, int]  # ik -> measured last arrival S
    end: dict[int, int]  # ik -> measured end E
    members: dict[int, list[tuple[int, int]]]  # ik -> [(rank, call index)]


@dataclass(frozen=True)
class WhatIf:
    """One change to replay: gap and barrier transformations."""

    key: str
    label: str
    fixed_ranks: tuple[int, ...] = ()
    barrier: str = "last"  # 'last' (measured semantics) | 'first' (nobody waits)
    transfer_scale: float = 1.0
    remove_idle: bool = False


class _Busy:
    """Busy time of one rank in any [a, b), from its merged busy intervals."""

    def __init__(self, ts: np.ndarray, dur: np.ndarray) -> None:
        # Python lists: bisect and indexing on them are several times faster than on arrays
        self.start = ts.tolist()
        self.end = (ts + dur).tolist()
        self.cum = np.concatenate([[0], np.cumsum(dur)]).tolist()

    def _upto(self, t: int) -> int:
        i = bisect.bisect_right(self.start, t)  # intervals starting at or before t
        if i == 0:
            return 0
        return int(self.cum[i - 1] + min(self.end[i - 1], t) - self.start[i - 1])

    def idle(self, a: int, b: int) -> int:
        if b <= a:
            return 0
        return (b - a) - (self._upto(b) - self._upto(a))


#: The replay is a Python walk over every call, seven times (one per what-if). A run with more
#: calls than this (thousands of ranks) is replayed on a sample of its steps, evenly spaced,
#: as many as fit (at least one); every step of smaller runs (all real sets) is replayed.
MAX_REPLAY_CALLS = 100_000


def _sample_steps(calls_per_step: dict[int, int], budget: int | None = None) -> set[int]:
    """The steps to replay: all when their calls fit in `budget` (default MAX_REPLAY_CALLS),
    else k evenly spaced steps (k = as many of the average step as fit, at least 1)."""
    budget = MAX_REPLAY_CALLS if budget is None else budget
    steps = sorted(calls_per_step)
    total = sum(calls_per_step.values())
    if total <= budget or not steps:
        return set(steps)
    k = max(1, min(len(steps), budget * len(steps) // total))
    return {steps[(2 * i + 1) * len(steps) // (2 * k)] for i in range(k)}


def _load(con: duckdb.DuckDBPyConnection, rid: int) -> list[_Step]:
    return _load_steps(con, rid)[0]


def _load_steps(con: duckdb.DuckDBPyConnection, rid: int) -> tuple[list[_Step], int]:
    """The steps to replay (all, or the sample of _sample_steps) and the number of steps."""
    wins = con.execute("SELECT * FROM replay_windows(?)", [rid]).df()
    per_step = con.execute(
        "SELECT step, count(*) FROM replay_calls(?) WHERE step IS NOT NULL GROUP BY step", [rid]
    ).fetchall()
    n_steps = wins["step"].nunique()
    keep = _sample_steps({int(s): int(n) for s, n in per_step})
    # only the calls of the steps replayed are loaded (a large run's are millions)
    calls = con.execute(
        "SELECT * FROM replay_calls(?) WHERE list_contains(?, step) ORDER BY rank, ts",
        [rid, sorted(keep)],
    ).df()
    if len(keep) < len(per_step):  # a sample: only its steps (windows without calls neither)
        wins = wins[wins["step"].isin(keep)]
    busy = _busy(con, rid, wins, calls)
    steps: list[_Step] = []
    by_step = {int(s): g for s, g in calls.groupby("step", sort=True)}
    for s, wg in wins.groupby("step", sort=True):
        cg = by_step.get(int(s))
        st = _Step(int(s), {}, {}, {}, {})
        by_rank: dict[int, pd.DataFrame] = {}
        if cg is not None:
            for ik, last, end in (
                cg[["ik", "last_ts", "end_ts"]].drop_duplicates("ik").itertuples(index=False)
            ):
                st.last[int(ik)], st.end[int(ik)] = int(last), int(end)
            by_rank = {int(r): g for r, g in cg.groupby("rank", sort=False)}
        for w in wg.itertuples(index=False):
            rk = _Rank(int(w.rank), int(w.ts), int(w.ts + w.dur))
            b = busy.get(rk.rank)
            mine = by_rank.get(rk.rank)
            _chain(rk, None if mine is None else mine.sort_values("ts"), st, b)
            st.ranks[rk.rank] = rk
        steps.append(st)
    return steps, n_steps


def _busy(
    con: duckdb.DuckDBPyConnection, rid: int, wins: pd.DataFrame, calls: pd.DataFrame
) -> dict[int, _Busy]:
    """Every rank's busy time over the span of `wins` and `calls` (the steps replayed), which
    holds every instant the replay asks about: window starts and ends, issues, arrivals and
    ends of calls (replay_busy_within; all of replay_busy when every step is replayed)."""
    points = pd.concat(
        [
            pd.DataFrame({"rank": wins["rank"], "lo": wins["ts"], "hi": wins["ts"] + wins["dur"]}),
            pd.DataFrame({"rank": calls["rank"], "lo": calls["issue_ts"], "hi": calls["te"]}),
        ]
    )
    ranges = points.groupby("rank").agg(lo=("lo", "min"), hi=("hi", "max")).reset_index()
    view = f"_replay_ranges_{id(ranges)}"
    con.register(view, ranges)
    try:
        df = con.execute(f"SELECT * FROM replay_busy_within(?, {view})", [rid]).df()
    finally:
        con.unregister(view)
    return {
        int(r): _Busy(g["ts"].dropna().to_numpy(np.int64), g["dur"].dropna().to_numpy(np.int64))
        for r, g in df.groupby("rank", sort=False)
    }


def _chain(rk: _Rank, mine: pd.DataFrame | None, st: _Step, busy: _Busy | None) -> None:
    """Turn a rank's measured calls in a step into gaps with their dependencies: each call (and
    the window end) depends on the latest of the rank's previous arrival and the ends of its
    earlier instances that had finished by then (what it was last blocked on)."""

    def idle(a: int, b: int) -> int:
        return busy.idle(a, b) if busy is not None else 0

    ends: list[tuple[int, int]] = []  # (the rank's own end of call j, j), sorted

    def dependency(t: int) -> tuple[int, str, int]:
        # the latest own end e <= t later than the previous arrival (the first call with that
        # end on ties), else the previous arrival; a sorted list instead of a scan of all calls
        if not rk.calls:
            return rk.start, "window", -1
        best = (rk.calls[-1].issue, "arrival", len(rk.calls) - 1)
        i = bisect.bisect_right(ends, (t, len(ends)))
        if i and ends[i - 1][0] > best[0]:
            e = ends[i - 1][0]
            return e, "end", ends[bisect.bisect_left(ends, (e, -1))][1]
        return best

    if mine is not None:
        issues = mine["issue_ts"] if "issue_ts" in mine else mine["ts"]
        cols = (*(mine[c].tolist() for c in ("ik", "ts", "te")), issues.tolist())
        for ik, ts, te, iss in zip(*cols, strict=True):
            ik, ts, iss = int(ik), int(ts), min(int(iss), int(ts))
            dep_t, dep, prev = dependency(iss)
            end_offset = int(te) - st.end[ik]
            call = _Call(
                rk.rank, ik, ts, dep, prev, max(iss - dep_t, 0), idle(dep_t, iss), end_offset, iss
            )
            i = bisect.bisect_right(ends, (ts, len(ends)))
            if i and ends[i - 1][0] > iss:  # the worker was busy with an earlier call
                e = ends[i - 1][0]
                call.busy_prev = ends[bisect.bisect_left(ends, (e, -1))][1]
                call.busy_gap = ts - e
            else:  # started late on its own (a worker thread not yet scheduled)
                call.busy_gap = ts - iss
            rk.calls.append(call)
            j = len(rk.calls) - 1
            bisect.insort(ends, (st.end[ik] + end_offset, j))
            st.members.setdefault(ik, []).append((rk.rank, j))
    dep_t, rk.tail_dep, rk.tail_prev = dependency(rk.end)
    rk.tail_gap = max(rk.end - dep_t, 0)
    rk.tail_idle = idle(dep_t, rk.end)


def _median_tail(st: _Step, fixed: set[int]) -> int | None:
    """The median tail gap (last call to window end) of the ranks not fixed."""
    tails = [rk.tail_gap for r, rk in st.ranks.items() if r not in fixed and rk.calls]
    return int(np.median(tails)) if tails else None


def _replay_step(st: _Step, w: WhatIf) -> dict[int, int]:
    """Replayed window end of every rank of step `st` under what-if `w`."""
    fixed = set(w.fixed_ranks) & set(st.ranks)
    med_tail = _median_tail(st, fixed) if fixed else None

    def gap_of(c: _Call) -> int:
        return max(c.gap - c.idle, 0) if w.remove_idle else c.gap

    arrival: dict[tuple[int, int], int] = {}
    done: dict[int, int] = {}  # ik -> replayed end

    def transfer(ik: int) -> int:
        return int(max(st.end[ik] - st.last[ik], 0) * w.transfer_scale)

    issued: dict[tuple[int, int], int] = {}

    def own_end(r: int, k: int) -> int:
        p = st.ranks[r].calls[k]
        return end(p.ik) + p.end_offset

    def issue(r: int, k: int) -> int:
        key = (r, k)
        if key in issued:
            return issued[key]
        c = st.ranks[r].calls[k]
        if r in fixed and any(q not in fixed for q, _ in st.members[c.ik]):
            issued[key] = arrive(r, k)  # a fixed rank arrives with the others
            return issued[key]
        if c.dep == "window":
            base = st.ranks[r].start
        elif c.dep == "arrival":
            base = issue(r, c.prev)
        else:
            base = own_end(r, c.prev)
        if k > 0:  # never before its own previous call (only a what-if can break this)
            base = max(base, issue(r, k - 1))
        issued[key] = base + gap_of(c)
        return issued[key]

    def arrive(r: int, k: int) -> int:
        key = (r, k)
        if key in arrival:
            return arrival[key]
        c = st.ranks[r].calls[k]
        if r in fixed:
            others = [arrive(q, j) for q, j in st.members[c.ik] if q not in fixed]
            if others:
                arrival[key] = int(np.median(others))
                return arrival[key]
        t = issue(r, k)
        if c.busy_prev >= 0:
            t = max(t, own_end(r, c.busy_prev) + c.busy_gap)
        else:
            t += c.busy_gap
        if k > 0:
            t = max(t, arrive(r, k - 1))
        arrival[key] = t
        return arrival[key]

    def end(ik: int) -> int:
        if ik not in done:
            times = [arrive(r, k) for r, k in st.members[ik]]
            start = max(times) if w.barrier == "last" else min(times)
            done[ik] = start + transfer(ik)
        return done[ik]

    for ik in sorted(st.members, key=lambda i: (st.last[i], st.end[i])):
        end(ik)
    out = {}
    for r, rk in st.ranks.items():
        if not rk.calls:
            out[r] = rk.end
            continue
        p = rk.tail_prev
        if rk.tail_dep == "end":
            base = own_end(r, p)
        else:
            base = issue(r, p)
        base = max(base, issue(r, len(rk.calls) - 1))
        tail = med_tail if (r in fixed and med_tail is not None) else rk.tail_gap
        if w.remove_idle:
            tail = max(tail - rk.tail_idle, 0)
        out[r] = base + tail
    return out


def replay(steps: list[_Step], w: WhatIf) -> pd.DataFrame:
    """Replayed step time per (rank, step) under `w`: rank, step, measured_ns, replayed_ns."""
    rows = []
    for st in steps:
        ends = _replay_step(st, w)
        for r, rk in st.ranks.items():
            rows.append((r, st.step, rk.end - rk.start, ends[r] - rk.start))
    return pd.DataFrame(rows, columns=["rank", "step", "measured_ns", "replayed_ns"])


def job_steps(df: pd.DataFrame, col: str) -> pd.Series:
    """The job's time of every step: the slowest rank's (a synchronous job waits for it)."""
    return df.groupby("step")[col].max()


def job_step(df: pd.DataFrame, col: str) -> float:
    """The job's step time: per step the slowest rank's, then the median over steps."""
    return float(job_steps(df, col).median())


def standard_whatifs(
    stragglers: list[int], top_rank: int | None, speedup: float = policy.WHATIF_TRANSFER_SPEEDUP
) -> list[WhatIf]:
    """The what-ifs every report replays: stragglers (or the rank causing the most waiting) at
    the median rank's pace, nobody waiting, transfer `speedup`× faster, transfer hidden, all
    exposed communication hidden, idle removed."""
    out = [WhatIf("unchanged", "nothing changed (the replay of the measured run)")]
    fix = tuple(stragglers) or ((top_rank,) if top_rank is not None else ())
    if fix:
        who = ", ".join(str(r) for r in fix)
        what = "straggler" if stragglers else "rank causing the most waiting"
        s = "s" if len(fix) > 1 else ""
        out.append(
            WhatIf(
                "straggler_fixed",
                f"{what}{s} {who} at the pace of the other ranks (median gaps)",
                fixed_ranks=fix,
            )
        )
    out += [
        WhatIf("no_wait", "no rank waits for another (each collective starts at the first arrival)",
               barrier="first"),
        WhatIf(f"transfer_{speedup:g}x", f"data transfer {speedup:g}x faster (link or compression)",
               transfer_scale=1 / speedup),
        WhatIf("transfer_hidden", "data transfer fully hidden (takes no time on the critical path)",
               transfer_scale=0.0),
        WhatIf("comm_hidden", "all exposed communication hidden (no transfer, no waiting)",
               barrier="first", transfer_scale=0.0),
        WhatIf("idle_removed", "idle gaps removed (host, input pipeline, launch delays)",
               remove_idle=True),
    ]  # fmt: skip
    return out


@dataclass
class ReplayResult:
    """Measured and replayed step times and the ranked what-ifs."""

    measured_ns: float
    replayed_ns: float
    whatifs: pd.DataFrame  # key, label, step_ns, saving_ns, saving_share (ranked)
    per_step: pd.DataFrame  # rank, step, measured_ns, replayed_ns (unchanged)
    steps_replayed: int = 0  # steps replayed (all, or a sample: MAX_REPLAY_CALLS)
    steps_total: int = 0  # steps of the run with a window
    by_step: pd.DataFrame = field(default_factory=pd.DataFrame)  # see whatif_by_step


def replay_run(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    stragglers: list[int],
    top_rank: int | None,
    progress: Callable[[str], None] | None = None,
) -> ReplayResult | None:
    """Replay run `rid` unchanged and under the standard what-ifs; None when the run has no
    steps with collective barriers to replay."""
    steps, n_steps = _load_steps(con, rid)
    if not steps or not any(st.members for st in steps):
        return None
    results = {}
    per_step = None
    by_step = []
    for w in standard_whatifs(stragglers, top_rank):
        if progress:
            progress(w.key)
        df = replay(steps, w)
        if w.key == "unchanged":
            per_step = df
        job = job_steps(df, "replayed_ns")
        by_step.append(pd.DataFrame({"key": w.key, "step_ns": job}).reset_index())
        results[w] = float(job.median())
    assert per_step is not None
    measured_by_step = job_steps(per_step, "measured_ns").rename("measured_ns").reset_index()
    by_step_df = pd.concat(by_step, ignore_index=True).merge(measured_by_step, on="step")
    measured = job_step(per_step, "measured_ns")
    base = results[next(w for w in results if w.key == "unchanged")]
    rows = [
        (w.key, w.label, v, base - v, (base - v) / base if base else None)
        for w, v in results.items()
        if w.key != "unchanged"
    ]
    table = pd.DataFrame(rows, columns=["key", "label", "step_ns", "saving_ns", "saving_share"])
    table = table.sort_values("saving_ns", ascending=False, kind="stable").reset_index(drop=True)
    by_step_df = by_step_df[["step", "key", "measured_ns", "step_ns"]]
    return ReplayResult(measured, base, table, per_step, len(steps), n_steps, by_step_df)


def _targets(con: duckdb.DuckDBPyConnection, rid: int) -> tuple[list[int], int | None]:
    """The flagged stragglers of run `rid` and the rank causing the most waiting (None when
    nobody waits): whom "straggler fixed" fixes."""
    ranks = con.execute("SELECT rank, flagged, caused_ns FROM straggler_ranks(?)", [rid]).df()
    flagged = [int(r) for r in ranks.loc[ranks["flagged"], "rank"]]
    top = None
    if not ranks.empty and ranks["caused_ns"].max() > 0:
        top = int(ranks.loc[ranks["caused_ns"].idxmax(), "rank"])
    return flagged, top


def whatif_by_step(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """The replay of run `rid` step by step: one row per (replayed step, what-if) with the job's
    measured step (`measured_ns`, the slowest rank's window) and its replay under the what-if
    (`step_ns`); `key` as in the report's `replay.whatifs`, plus `unchanged`. Empty when the run
    has nothing to replay. The run's figures are the medians of these over steps."""
    res = replay_run(con, rid, *_targets(con, rid))
    if res is None:
        return pd.DataFrame(columns=["step", "key", "measured_ns", "step_ns"])
    return res.by_step


def replay_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The report's `replay`: measured and replayed step time (median over rank-step windows)
    and the what-ifs ranked by the time they would save."""
    flagged, top = _targets(con, rid)
    res = replay_run(con, rid, flagged, top)
    if res is None:
        return {
            "available": False,
            "reason": "no step windows with collectives matched across ranks to replay",
            "whatifs": [],
        }
    err = (res.replayed_ns - res.measured_ns) / res.measured_ns if res.measured_ns else None
    whatifs = [
        {
            "key": r.key,
            "label": r.label,
            "step_ms": r.step_ns / NS_PER_MS,
            "saving_ms": r.saving_ns / NS_PER_MS,
            "saving_pct": None if r.saving_share is None else 100 * r.saving_share,
        }
        for r in res.whatifs.itertuples(index=False)
    ]
    return {
        "available": True,
        "statistic": "median over steps of the slowest rank's window",
        "measured_step_ms": res.measured_ns / NS_PER_MS,
        "replayed_step_ms": res.replayed_ns / NS_PER_MS,
        "replay_error": err,
        "fixed_ranks": flagged or ([top] if top is not None else []),
        "whatifs": whatifs,
        "steps_replayed": res.steps_replayed,
        "steps_total": res.steps_total,
    }
