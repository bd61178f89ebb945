"""The what-if replay's walk (the model is in analysis/replay/engine.py), vectorised with numpy.

Every call has an issue time I and an arrival A, every instance an end D (its start, the last
arrival or under "nobody waits" the first, plus its transfer). A call's times follow from its
window start or from the times of earlier calls of its rank and from the ends of instances it
waited for; a rank made to keep the others' pace ("fixed") arrives at an instance with the
others at the median of their arrivals. The calls are taken in waves: in each wave every window
computes its next call when the instances that call waits for have ended (all of a wave's calls
at once, with numpy), then the fixed ranks' calls whose instances have no other arrival left,
then every instance whose last member arrived ends. The order of the waves depends only on the
chains and on which ranks are fixed, so it is worked out once (`_schedule`) and every what-if
with those fixed ranks walks it together, one row of the arrays each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commwall.analysis.replay.chain import DEP_END, DEP_WINDOW, Steps

#: "No time": earlier than every time, and far enough from int64's end to add gaps to.
NEVER = -(2**62)


@dataclass(frozen=True)
class WhatIf:
    """One change to replay: gap and barrier transformations."""

    key: str
    label: str
    fixed_ranks: tuple[int, ...] = ()
    barrier: str = "last"  # 'last' (measured semantics) | 'first' (nobody waits)
    transfer_scale: float = 1.0
    remove_idle: bool = False
    #: (rank, factor) pairs: the busy part of the rank's gaps (its compute, everything but
    #: idle) scaled by the factor (a pipeline stage balanced: its compute at another's pace)
    busy_scale: tuple[tuple[int, float], ...] = ()
    #: (ik, factor) pairs: the transfer of those instances (replay_calls' ik) scaled by the
    #: factor, on top of transfer_scale (one dimension's collectives faster, experts balanced)
    instance_scale: tuple[tuple[int, float], ...] = ()


@dataclass
class _Wave:
    calls: np.ndarray  # calls computed from their chains
    pinned: np.ndarray  # fixed ranks' calls set to the others' median arrival
    pinned_group: np.ndarray  # for each pinned call, its group in others/others_at
    others: np.ndarray  # the arrivals (calls) whose medians they take, group by group
    others_at: np.ndarray  # where each group starts in others
    ended: np.ndarray  # instances whose last member arrived in the wave
    members: np.ndarray  # their members (calls), instance by instance
    members_at: np.ndarray  # where each instance's members start


def _gather(items: np.ndarray, at: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """items[at[g]:at[g + 1]] for every g of `groups`, concatenated, and where each starts."""
    lens = at[groups + 1] - at[groups]
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    idx = np.repeat(at[groups] - starts, lens) + np.arange(int(lens.sum()))
    return items[idx], starts


def _by_instance(calls: np.ndarray, inst: np.ndarray, n_inst: int) -> tuple[np.ndarray, np.ndarray]:
    """`calls` grouped by their instance `inst` (stable) and where each instance's group starts
    (n_inst + 1 entries)."""
    order = np.argsort(inst, kind="stable")
    at = np.concatenate([[0], np.cumsum(np.bincount(inst, minlength=n_inst))]).astype(np.int64)
    return calls[order], at


def _schedule(st: Steps, fixed_win: np.ndarray) -> list[_Wave]:
    """The waves of the walk when the windows `fixed_win` are fixed."""
    n, n_inst = st.n_calls, len(st.last)
    fixed = fixed_win[st.win]
    calls = np.arange(n)
    left_free = np.bincount(st.inst[~fixed], minlength=n_inst)  # arrivals of the others to come
    pinned = fixed & (left_free[st.inst] > 0)
    pinned_by, pinned_at = _by_instance(calls[pinned], st.inst[pinned], n_inst)
    free = calls[~fixed]
    free = np.repeat(free, st.weight[st.win[free]])  # a duplicated window counts as many times
    others_by, others_at = _by_instance(free, st.inst[free], n_inst)
    members_by, members_at = _by_instance(calls, st.inst, n_inst)
    left = np.bincount(st.inst, minlength=n_inst)  # arrivals to come
    ended = np.zeros(n_inst + 1, bool)
    ended[n_inst] = True  # the instance of "nothing to wait for"
    waits_a = np.where(st.dep == DEP_END, st.inst[st.prev], n_inst)
    waits_b = np.where(st.busy_prev >= 0, st.inst[st.busy_prev], n_inst)
    done = np.zeros(n, bool)
    nxt, stop = st.first[:-1].copy(), st.first[1:]
    fixed_w = np.flatnonzero(fixed_win)
    waves, todo = [], n
    while todo:
        act = np.flatnonzero(nxt < stop)
        c = nxt[act]
        ready = ~pinned[c] & ended[waits_a[c]] & ended[waits_b[c]]
        now = c[ready]
        freed_free = now[~fixed[now]]
        np.subtract.at(left_free, st.inst[freed_free], 1)
        touched = np.unique(st.inst[freed_free])
        freed = touched[left_free[touched] == 0]
        freed = freed[pinned_at[freed + 1] > pinned_at[freed]]  # with calls to pin
        now_pinned, pin_at = _gather(pinned_by, pinned_at, freed)
        others, at = _gather(others_by, others_at, freed)
        group = np.repeat(np.arange(len(freed)), np.diff(np.append(pin_at, len(now_pinned))))
        both = np.concatenate([now, now_pinned])
        if not len(both):
            raise RecursionError("the replay's calls wait for each other in a cycle")
        done[both] = True
        todo -= len(both)
        np.subtract.at(left, st.inst[both], 1)
        touched = np.unique(st.inst[both])
        fin = touched[left[touched] == 0]
        ended[fin] = True
        members, m_at = _gather(members_by, members_at, fin)
        waves.append(_Wave(now, now_pinned, group, others, at, fin, members, m_at))
        nxt[act[ready]] += 1
        while len(fixed_w):  # past the pinned calls already done
            w = fixed_w[nxt[fixed_w] < stop[fixed_w]]
            w = w[done[nxt[w]]]
            if not len(w):
                break
            nxt[w] += 1
    return waves


def _medians(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """int(np.median(g)) of every group g = values[:, at[i]:at[i + 1]], row by row, exactly as
    numpy computes it (the mean of the middle one or two, in float64)."""
    n = np.diff(np.append(at, values.shape[1]))
    group = np.repeat(np.arange(len(at)), n)
    lo, hi = at + (n - 1) // 2, at + n // 2
    out = np.empty((values.shape[0], len(at)), np.int64)
    for i, row in enumerate(values):
        s = row[np.lexsort((row, group))].astype(np.float64)
        out[i] = ((s[lo] + s[hi]) / 2).astype(np.int64)
    return out


def _walk(
    st: Steps, waves: list[_Wave], whatifs: Sequence[WhatIf], fixed_win: np.ndarray
) -> np.ndarray:
    """Replayed end of every window (rows: `whatifs`, all with the fixed windows `fixed_win`)."""
    n, n_inst, rows = st.n_calls, len(st.last), len(whatifs)
    calls = np.arange(n)
    remove = np.array([w.remove_idle for w in whatifs])[:, None]
    gap = np.where(remove, np.maximum(st.gap - st.idle, 0), st.gap)
    gap = _busy_scaled(gap, st.idle, st.rank[st.win], whatifs)
    scale = np.array([w.transfer_scale for w in whatifs], np.float64)[:, None]
    measured = np.maximum(st.inst_end - st.last, 0).astype(np.float64)
    measured = measured * _instance_factors(st, whatifs)
    transfer = np.concatenate(
        [(measured * scale).astype(np.int64), np.zeros((rows, 1), np.int64)], axis=1
    )
    last = np.array([w.barrier == "last" for w in whatifs])[:, None]
    # what each call's times start from; index n (n_inst) is "no call" ("no instance"): NEVER
    chain = np.where(st.dep == DEP_WINDOW, n, calls - 1)
    on_end = st.dep == DEP_END
    after = np.where(on_end, st.inst[st.prev], n_inst)
    after_off = np.where(on_end, st.end_offset[st.prev], 0)
    window = np.where(st.dep == DEP_WINDOW, st.start[st.win], NEVER)
    held = st.busy_prev >= 0
    held_by = np.where(held, st.inst[st.busy_prev], n_inst)
    held_off = np.where(held, st.end_offset[st.busy_prev] + st.busy_gap, 0)
    free_gap = np.where(held, 0, st.busy_gap)
    issue = np.full((rows, n + 1), NEVER, np.int64)
    arrive = np.full((rows, n + 1), NEVER, np.int64)
    end = np.full((rows, n_inst + 1), NEVER, np.int64)
    for wave in waves:
        c = wave.calls
        base = np.maximum(end[:, after[c]] + after_off[c], issue[:, chain[c]])
        i = np.maximum(base, window[c]) + gap[:, c]
        issue[:, c] = i
        a = np.maximum(i + free_gap[c], end[:, held_by[c]] + held_off[c])
        arrive[:, c] = np.maximum(a, arrive[:, chain[c]])
        if len(wave.pinned):
            med = _medians(arrive[:, wave.others], wave.others_at)[:, wave.pinned_group]
            issue[:, wave.pinned] = arrive[:, wave.pinned] = med
        if len(wave.ended):
            times = arrive[:, wave.members]
            start = np.maximum.reduceat(times, wave.members_at, axis=1)
            if not last.all():
                start = np.where(last, start, np.minimum.reduceat(times, wave.members_at, axis=1))
            end[:, wave.ended] = start + transfer[:, wave.ended]
    return _tails(st, issue, end, whatifs, fixed_win)


def _tails(st: Steps, issue: np.ndarray, end: np.ndarray, whatifs: Sequence[WhatIf],
           fixed_win: np.ndarray) -> np.ndarray:  # fmt: skip
    """Replayed window ends: a tail after the last call's issue or the own end it follows (a
    fixed rank's tail: the median tail of the others of its step, when it has any)."""
    n_inst = len(st.last)
    if not st.n_calls:
        return np.broadcast_to(st.end, (len(whatifs), len(st.end))).copy()
    has = st.first[1:] > st.first[:-1]
    last_call = np.maximum(st.first[1:] - 1, 0)
    on_end = st.tail_dep == DEP_END
    prev = np.maximum(st.tail_prev, 0)
    after = np.where(on_end, st.inst[prev], n_inst)
    base = np.where(on_end, end[:, after] + st.end_offset[prev], issue[:, prev])
    base = np.maximum(base, issue[:, last_call])
    tail = st.tail_gap.copy()
    steps, step_of = np.unique(st.step, return_inverse=True)
    fixed_in = np.bincount(step_of[fixed_win], minlength=len(steps)) > 0
    free = np.flatnonzero(has & ~fixed_win & fixed_in[step_of])
    if len(free):
        at = np.flatnonzero(np.diff(np.append(-1, step_of[free])))
        med = _medians(st.tail_gap[free][None, :], at)[0]
        with_med = np.zeros(len(steps), bool)
        med_of = np.zeros(len(steps), np.int64)
        with_med[step_of[free[at]]], med_of[step_of[free[at]]] = True, med
        pick = fixed_win & with_med[step_of]
        tail[pick] = med_of[step_of[pick]]
    remove = np.array([w.remove_idle for w in whatifs])[:, None]
    tails = np.where(remove, np.maximum(tail - st.tail_idle, 0), tail)
    tails = _busy_scaled(tails, st.tail_idle, st.rank, whatifs)
    return np.where(has, base + tails, st.end)


def _instance_factors(st: Steps, whatifs: Sequence[WhatIf]) -> np.ndarray:
    """Each what-if's factor on each instance's transfer (rows: `whatifs`, columns: the
    instances of `st`): its instance_scale where it names the instance (by ik), else 1.
    Instances of steps not replayed are ignored."""
    out = np.ones((len(whatifs), len(st.last)), np.float64)
    for row, w in enumerate(whatifs):
        if not w.instance_scale or not len(st.inst_key):
            continue
        keys = np.array([k for k, _ in w.instance_scale], np.int64)
        factors = np.array([f for _, f in w.instance_scale], np.float64)
        pos = np.minimum(np.searchsorted(st.inst_key, keys), len(st.inst_key) - 1)
        found = st.inst_key[pos] == keys
        out[row, pos[found]] = factors[found]
    return out


def _busy_scaled(
    gaps: np.ndarray, idle: np.ndarray, ranks: np.ndarray, whatifs: Sequence[WhatIf]
) -> np.ndarray:
    """`gaps` (rows: `whatifs`; columns: gaps of the ranks `ranks` with idle time `idle`) with
    the busy part of each gap (gap - idle) scaled for the ranks a what-if's busy_scale names."""
    if not any(w.busy_scale for w in whatifs):
        return gaps
    out = np.array(np.broadcast_to(gaps, (len(whatifs), gaps.shape[-1])), np.int64)
    for row, w in enumerate(whatifs):
        for rank, factor in w.busy_scale:
            mine = ranks == rank
            idle_part = np.minimum(idle[mine], out[row, mine])
            busy = out[row, mine] - idle_part
            out[row, mine] = idle_part + np.round(busy * factor).astype(np.int64)
    return out


def replay_ends(st: Steps, whatifs: Sequence[WhatIf]) -> np.ndarray:
    """Replayed window end of every window of `st` (columns) under each of `whatifs` (rows);
    what-ifs fixing the same ranks are walked together."""
    out = np.empty((len(whatifs), len(st.step)), np.int64)
    by_fixed: dict[frozenset[int], list[int]] = {}
    for i, w in enumerate(whatifs):
        by_fixed.setdefault(frozenset(w.fixed_ranks), []).append(i)
    for ranks, rows in by_fixed.items():
        fixed_win = np.isin(st.rank, list(ranks))
        waves = _schedule(st, fixed_win)
        out[rows] = _walk(st, waves, [whatifs[i] for i in rows], fixed_win)
    return out
