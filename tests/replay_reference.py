"""The what-if replay as it was before it was vectorised (analysis/replay/engine.py at commit aa43b44):
the steps loaded into per-rank chains of Python objects, then a memoised recursion over every
call, once per what-if. Kept, unchanged, only as the reference that
tests/test_replay_reference.py holds the vectorised replay to, to the nanosecond. It reads the
same SQL macros (analysis/sql/replay.sql), the busy time through the current module's query, and
takes the same sample of steps."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from commwall.analysis.replay.engine import WhatIf, _busy_rows, _sample_steps


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
    df = _busy_rows(con, rid, wins, calls)  # the same SQL, now shared
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
