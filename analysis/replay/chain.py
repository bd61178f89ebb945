"""The what-if replay's input as arrays: every replayed window's chain of gaps and collective
calls (the model is in analysis/replay/engine.py), built for all windows at once with numpy.

A window is one (rank, step); its calls are in the order the rank made them. For each call the
chain says what it waits for before its gap: the window start (the first call), the issue of the
rank's previous call (`DEP_ARRIVAL`) or the own end of an earlier call (`DEP_END`): the latest own
end at or before the call's issue, when that is later than the previous call's issue (the
earliest such call when several end then). Likewise for the window end (the tail), and for the
worker that ran the call (`busy_prev`: the earlier call whose own end the worker waited for after
the issue, or -1).

The latest own end at or before a time, among the calls before a call, is the running maximum of
the own ends in every ordinary window (each call ends before the next is issued); a window where
an earlier call is still running at some call's issue (asynchronous calls) is worked out call by
call instead, with a sorted list (`_by_bisect`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: What a call (or a window end) follows, in Steps.dep and Steps.tail_dep.
DEP_WINDOW, DEP_ARRIVAL, DEP_END = 0, 1, 2


class BusyTime:
    """Busy time of every rank in any [a, b), from its merged busy intervals: rows rank, ts, dur
    in rank then time order, disjoint per rank (replay_busy_within); a row with NULL ts marks a
    rank with activity but none in its range (all idle there). A rank without rows has no idle
    time."""

    def __init__(self, df: pd.DataFrame) -> None:
        rank = df["rank"].to_numpy(np.int64)
        rows = df["ts"].notna().to_numpy()
        self.ranks = np.unique(rank)
        self.start = df["ts"][rows].to_numpy(np.int64)
        self.end = self.start + df["dur"][rows].to_numpy(np.int64)
        self.csum = np.concatenate([[0], np.cumsum(self.end - self.start)])
        r = rank[rows]
        lo = np.flatnonzero(np.diff(r, prepend=r[:1] - 1))  # each rank's first row
        hi = np.append(lo[1:], len(r))[: len(lo)]
        self.rows_of = {int(k): (int(a), int(b)) for k, a, b in zip(r[lo], lo, hi, strict=True)}

    def _upto(self, rank: int, t: np.ndarray) -> np.ndarray:
        """Busy time of `rank` before each of `t`."""
        lo, hi = self.rows_of.get(rank, (0, 0))
        n = np.searchsorted(self.start[lo:hi], t, side="right")  # intervals starting <= t
        j = np.maximum(lo + n - 1, 0)
        if len(self.start) == 0:
            return np.zeros(len(t), np.int64)
        inside = self.csum[j] - self.csum[lo] + np.minimum(self.end[j], t) - self.start[j]
        return np.where(n > 0, inside, 0)

    def idle(self, rank: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Idle time of rank[i] in [a[i], b[i]) (0 where b <= a or the rank has no activity)."""
        out = np.zeros(len(rank), np.int64)
        ask = np.flatnonzero((b > a) & np.isin(rank, self.ranks))
        order = ask[np.argsort(rank[ask], kind="stable")]
        cuts = np.flatnonzero(np.diff(rank[order])) + 1
        for q in np.split(order, cuts):
            if len(q):
                r = int(rank[q[0]])
                out[q] = (b[q] - a[q]) - (self._upto(r, b[q]) - self._upto(r, a[q]))
        return out


@dataclass(eq=False)
class Steps:
    """The replayed steps as arrays. Windows in step order, then in the order of their ranks;
    calls window by window, in each window in the rank's order; instances numbered 0..n-1."""

    # -- windows
    step: np.ndarray
    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    weight: np.ndarray  # the (rank, step)'s windows in the data; its calls count as many members
    first: np.ndarray  # window w's calls are first[w]:first[w + 1] (n_windows + 1 entries)
    tail_dep: np.ndarray  # DEP_*: what the window end follows
    tail_prev: np.ndarray  # the call it follows (-1 for DEP_WINDOW)
    tail_gap: np.ndarray
    tail_idle: np.ndarray
    # -- calls
    win: np.ndarray  # the call's window
    inst: np.ndarray  # its instance
    dep: np.ndarray  # DEP_*: what its issue follows
    prev: np.ndarray  # the call it follows (-1 for DEP_WINDOW)
    gap: np.ndarray
    idle: np.ndarray  # idle time inside the gap
    end_offset: np.ndarray  # the call's own end minus its instance's end E
    busy_prev: np.ndarray  # the call whose own end the worker waited for after the issue, or -1
    busy_gap: np.ndarray  # that end to the arrival (without busy_prev: the issue to the arrival)
    # -- instances
    last: np.ndarray  # measured last arrival S
    inst_end: np.ndarray  # measured end E
    inst_key: np.ndarray  # the instance's id in replay_calls (ik), ascending

    @property
    def n_calls(self) -> int:
        """Number of calls."""
        return len(self.win)


def _windows(wins: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """One window per (step, rank), in step order then first appearance (the last of duplicated
    windows, at the place of the first), and how many windows each stands for."""
    wins = wins[wins["step"].notna()]
    wins = wins.iloc[np.argsort(wins["step"].to_numpy(np.int64), kind="stable")]
    key = pd.MultiIndex.from_arrays(
        [wins["step"].to_numpy(np.int64), wins["rank"].to_numpy(np.int64)]
    )
    codes, uniq = key.factorize()
    last = np.zeros(len(uniq), np.int64)
    np.maximum.at(last, codes, np.arange(len(codes)))
    return wins.iloc[last], np.bincount(codes, minlength=len(uniq)).astype(np.int64)


def _call_order(win: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The calls (in query order) window by window, each window's by start. Starts tied within
    a window are put in the order numpy's default (unstable) sort puts them in, as the per-rank
    `sort_values("ts")` of the earlier replay did."""
    order = np.lexsort((ts, win))
    w, t = win[order], ts[order]
    tied = np.unique(w[1:][(w[1:] == w[:-1]) & (t[1:] == t[:-1])])
    if len(tied):
        bounds = np.searchsorted(w, tied), np.searchsorted(w, tied, side="right")
        for a, b in zip(*bounds, strict=True):
            rows = np.sort(order[a:b])
            order[a:b] = rows[np.argsort(ts[rows], kind="quicksort")]
    return order


def _by_bisect(
    iss: list[int], ts: list[int], te: list[int], end: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """For one window's calls (issues, starts, own ends) and its end: per call the time its gap
    starts from and the call it follows (-1: the window start or the previous issue, told by
    position), the call the worker waited for (or -1) and that end (or the issue); then the
    time the tail starts from. The calls are walked in order with their own ends sorted."""
    ends: list[tuple[int, int]] = []  # (own end of call j, j), sorted
    dep_t: list[int] = []
    dep_j: list[int] = []
    busy_j: list[int] = []
    busy_t: list[int] = []

    def latest_end(t: int) -> tuple[int, int] | None:
        # the latest own end <= t and the first call that ended then
        i = bisect.bisect_right(ends, (t, len(ends)))
        if not i:
            return None
        e = ends[i - 1][0]
        return e, ends[bisect.bisect_left(ends, (e, -1))][1]

    def dependency(k: int, t: int) -> tuple[int, int]:
        found = latest_end(t)
        if found and found[0] > iss[k - 1]:
            return found
        return iss[k - 1], -1

    for k in range(len(iss)):
        t, j = dependency(k, iss[k]) if k else (0, -1)
        dep_t.append(t)
        dep_j.append(j)
        found = latest_end(ts[k])
        if found and found[0] > iss[k]:
            busy_t.append(found[0])
            busy_j.append(found[1])
        else:
            busy_t.append(iss[k])
            busy_j.append(-1)
        bisect.insort(ends, (te[k], k))
    tail_t, tail_j = dependency(len(iss), end)
    dep_j.append(tail_j)
    a, b, c, d = (np.array(x, np.int64) for x in (dep_t, dep_j, busy_j, busy_t))
    return a, b, c, d, tail_t


def build_steps(wins: pd.DataFrame, calls: pd.DataFrame, busy: BusyTime) -> Steps:
    """The steps of windows `wins` (replay_windows) with calls `calls` (replay_calls) as arrays;
    `busy` gives the idle time in the gaps. Calls without a window of their rank and step are
    left out."""
    wins, weight = _windows(wins)
    w_step = wins["step"].to_numpy(np.int64)
    w_rank = wins["rank"].to_numpy(np.int64)
    start = wins["ts"].to_numpy(np.int64)
    end = start + wins["dur"].to_numpy(np.int64)
    n_win = len(w_step)
    key = pd.MultiIndex.from_arrays([w_step, w_rank])
    c_win = key.get_indexer(
        pd.MultiIndex.from_arrays(
            [calls["step"].to_numpy(np.int64), calls["rank"].to_numpy(np.int64)]
        )
    )
    kept = np.flatnonzero(c_win >= 0)
    c_win = c_win[kept]
    c_ts = calls["ts"].to_numpy(np.int64)[kept]
    in_order = _call_order(c_win, c_ts)
    order, win = kept[in_order], c_win[in_order]
    ts = calls["ts"].to_numpy(np.int64)[order]
    te = calls["te"].to_numpy(np.int64)[order]
    iss = np.minimum(calls["issue_ts"].to_numpy(np.int64)[order], ts)
    ik = calls["ik"].to_numpy(np.int64)[order]
    uniq, one, inst = np.unique(ik, return_index=True, return_inverse=True)
    last = calls["last_ts"].to_numpy(np.int64)[order][one]
    inst_end = calls["end_ts"].to_numpy(np.int64)[order][one]

    n = len(win)
    idx = np.arange(n)
    first = np.concatenate([[0], np.cumsum(np.bincount(win, minlength=n_win))]).astype(np.int64)
    pos = idx - first[win]
    # running maximum of own ends and the first call that reached it, window by window
    cm = pd.Series(te).groupby(win).cummax().to_numpy(np.int64) if n else te
    before = np.concatenate([[0], cm[:-1]])
    fm = np.maximum.accumulate(np.where((pos == 0) | (te > before), idx, -1)) if n else idx
    later = pos > 0
    cm_b, fm_b = np.where(later, before, 0), np.where(later, np.roll(fm, 1), -1)
    iss_b = np.where(later, np.roll(iss, 1), 0)

    # the gap's origin: the latest own end before the issue when later than the previous issue
    dep = np.where(later, np.where(cm_b > iss_b, DEP_END, DEP_ARRIVAL), DEP_WINDOW)
    prev = np.where(dep == DEP_END, fm_b, np.where(later, idx - 1, -1))
    dep_t = np.where(dep == DEP_END, cm_b, np.where(later, iss_b, start[win]))
    # the worker: busy with an earlier call at the issue when an own end falls in (issue, start]
    waited = later & (cm_b > iss)
    busy_prev = np.where(waited, fm_b, -1)
    busy_gap = ts - np.where(waited, cm_b, iss)
    # the tail, from the last call (windows with calls)
    has = first[1:] > first[:-1]
    lc = np.maximum(first[1:] - 1, 0)
    t_cm, t_fm, t_iss = (cm[lc], fm[lc], iss[lc]) if n else (end, end, end)
    t_end = has & (t_cm > t_iss)
    tail_dep = np.where(has, np.where(t_end, DEP_END, DEP_ARRIVAL), DEP_WINDOW)
    tail_prev = np.where(t_end, t_fm, np.where(has, lc, -1))
    tail_t = np.where(t_end, t_cm, np.where(has, t_iss, start))

    # windows where an earlier call runs past a later call's issue or start, or past the end:
    # the running maximum is not the latest end before that time
    hard = np.unique(
        np.concatenate([win[later & (cm_b > iss)], np.flatnonzero(has & (t_cm > end))])
    )
    for w in hard:
        a, b = int(first[w]), int(first[w + 1])
        d_t, d_j, b_j, b_t, tail_t[w] = _by_bisect(
            iss[a:b].tolist(), ts[a:b].tolist(), te[a:b].tolist(), int(end[w])
        )
        ks = np.arange(b - a)
        dep[a:b] = np.where(ks == 0, DEP_WINDOW, np.where(d_j[:-1] >= 0, DEP_END, DEP_ARRIVAL))
        prev[a:b] = np.where(d_j[:-1] >= 0, a + d_j[:-1], np.where(ks > 0, a + ks - 1, -1))
        dep_t[a:b] = np.where(ks == 0, start[w], d_t)
        busy_prev[a:b] = np.where(b_j >= 0, a + b_j, -1)
        busy_gap[a:b] = ts[a:b] - b_t
        tail_dep[w] = DEP_END if d_j[-1] >= 0 else DEP_ARRIVAL
        tail_prev[w] = a + d_j[-1] if d_j[-1] >= 0 else b - 1

    tail_gap = np.maximum(end - tail_t, 0)
    return Steps(
        step=w_step,
        rank=w_rank,
        start=start,
        end=end,
        weight=weight,
        first=first,
        tail_dep=tail_dep,
        tail_prev=tail_prev,
        tail_gap=tail_gap,
        tail_idle=busy.idle(w_rank, tail_t, end),
        win=win,
        inst=inst.astype(np.int64),
        dep=dep,
        prev=prev,
        gap=np.maximum(iss - dep_t, 0),
        idle=busy.idle(w_rank[win], dep_t, iss),
        end_offset=te - inst_end[inst],
        busy_prev=busy_prev,
        busy_gap=busy_gap,
        last=last,
        inst_end=inst_end,
        inst_key=uniq.astype(np.int64),
    )
