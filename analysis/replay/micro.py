"""The what-if "more micro-batches" of a pipeline, replayed: every micro-batch split into
`parts` smaller ones in the measured schedule, through the replay's engine (walk.py) on chains
rebuilt from the measured ones (docs/parallelism.md, "Pipeline parallelism").

A pipeline rank's measured chain (chain.py) is read as *segments* (the gaps: its compute and
whatever else it did between calls) and *comm points* (its calls between two segments; calls
issued together, a batched kernel's sends and receives, are one point). A segment uses the
receives of the point before it and produces the sends of the point after it. With `parts` =
k, a segment that uses or produces a micro-batch's messages becomes k segments of 1/k of its
time, each with 1/k of each such message (1/k of its measured transfer): receive, compute,
send, k times. A segment whose receives and sends are different micro-batches' (the k-th
message of their channels differs: the last stage's forward of one and backward of another)
holds two computes, taken as equal: k receives each followed by 1/(2k) of it, then 1/(2k) of
it before each of k sends. Other segments (the step's start, the optimizer, a gap without a
neighbour's message) and other calls (a data-parallel all-reduce) stay as measured. A rebuilt
point waits for every call of the point before it to end (blocking, batched where the rank's
measured chain batched its calls, as a GPU pipeline waiting on its requests does); where that
deadlocks (1F1B's split batches no longer pair with their peers'), for its receives and other
calls only (sends that do not hold the rank). For GPipe this is GPipe with k·m micro-batches;
for 1F1B the warm-up keeps its number of measured micro-batches, each now k.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from commwall.analysis.replay.chain import DEP_ARRIVAL, DEP_END, DEP_WINDOW, Steps
from commwall.analysis.replay.walk import WhatIf, replay_ends


def _points(st: Steps, w: int) -> list[list[int]]:
    """The window's calls grouped into comm points: a call issued with the previous one (no
    gap, following its issue) joins its point."""
    out: list[list[int]] = []
    for c in range(int(st.first[w]), int(st.first[w + 1])):
        if out and st.dep[c] == DEP_ARRIVAL and st.gap[c] == 0:
            out[-1].append(c)
        else:
            out.append([c])
    return out


class _Builder:
    """The rebuilt Steps, window by window."""

    def __init__(self, st: Steps) -> None:
        self.st = st
        self.calls: dict[str, list[int]] = {
            k: [] for k in ("win", "inst", "dep", "prev", "gap", "idle", "off", "bprev", "bgap")
        }
        self.inst: dict[tuple[int, int], int] = {}  # (measured instance, part) -> new id
        self.last: list[int] = []
        self.end: list[int] = []
        self.wins: dict[str, list[int]] = {
            k: [] for k in ("w", "first", "tdep", "tprev", "tgap", "tidle")
        }

    def instance(self, i: int, part: int, parts: int) -> int:
        """The new instance of measured instance `i`'s `part` (transfer / parts; parts = 1:
        the measured instance itself)."""
        key = (i, part)
        if key not in self.inst:
            self.inst[key] = len(self.last)
            st = self.st
            if parts == 1:
                self.last.append(int(st.last[i]))
                self.end.append(int(st.inst_end[i]))
            else:
                self.last.append(0)
                self.end.append(round(max(int(st.inst_end[i]) - int(st.last[i]), 0) / parts))
        return self.inst[key]

    def window(self, w: int, program: list, batched: bool, blocking: bool) -> None:
        """Window `w` of the measured steps as `program`: segments ("seg", gap, idle, _) and
        calls ("call", new instance, end offset, is a send), in order. A point (the calls
        between two segments; each call on its own when not `batched` and `blocking`) is issued
        at once, after the previous point's calls that hold the rank have ended (all of them
        when `blocking`, else all but its sends) and the segment between."""
        c = self.calls
        self.wins["w"].append(w)
        self.wins["first"].append(len(c["win"]))
        nw = len(self.wins["w"]) - 1
        gap = idle = 0
        held: list[int] = []  # the previous point's calls that hold the rank
        point: list[tuple[int, bool]] = []  # the point being built: (call, holds the rank)
        for kind, a, b, send in program:
            if kind == "seg":
                gap, idle = gap + a, idle + b
                if point:
                    held, point = [x for x, h in point if h], []
                continue
            if point and not batched and blocking:
                held, point = [x for x, h in point if h], []
            mine = bool(c["win"]) and c["win"][-1] == nw
            if point:  # issued with the point's first call
                row = (DEP_ARRIVAL, len(c["win"]) - 1, 0, 0, -1, 0)
            elif held:  # after the ends of the calls it waits for (first: issue; last: arrival)
                bp, bg = (held[-1], gap) if len(held) > 1 else (-1, 0)
                row = (DEP_END, held[0], gap, idle, bp, bg)
            elif mine:  # after the previous call's issue
                row = (DEP_ARRIVAL, len(c["win"]) - 1, gap, idle, -1, 0)
            else:
                row = (DEP_WINDOW, -1, gap, idle, -1, 0)
            dep, prev, g, i, bp, bg = row
            idx = len(c["win"])
            for k, v in zip(c, (nw, a, dep, prev, g, i, b, bp, bg), strict=True):
                c[k].append(v)
            point.append((idx, blocking or not send))
            gap = idle = 0
        if point:
            held = [x for x, h in point if h]
        mine = bool(c["win"]) and c["win"][-1] == nw
        self.wins["tdep"].append(DEP_END if held else DEP_ARRIVAL if mine else DEP_WINDOW)
        self.wins["tprev"].append(held[0] if held else len(c["win"]) - 1 if mine else -1)
        self.wins["tgap"].append(gap)
        self.wins["tidle"].append(idle)

    def steps(self) -> Steps:
        st, c, w = self.st, self.calls, np.array(self.wins["w"], np.int64)
        arr = {k: np.array(v, np.int64) for k, v in c.items()}
        n_calls = (
            np.bincount(arr["win"], minlength=len(w))
            if len(arr["win"])
            else np.zeros(len(w), np.int64)
        )
        return Steps(
            step=st.step[w], rank=st.rank[w], start=st.start[w], end=st.end[w],
            weight=st.weight[w],
            first=np.concatenate([[0], np.cumsum(n_calls)]).astype(np.int64),
            tail_dep=np.array(self.wins["tdep"], np.int64),
            tail_prev=np.array(self.wins["tprev"], np.int64),
            tail_gap=np.array(self.wins["tgap"], np.int64),
            tail_idle=np.array(self.wins["tidle"], np.int64),
            win=arr["win"], inst=arr["inst"], dep=arr["dep"], prev=arr["prev"], gap=arr["gap"],
            idle=arr["idle"], end_offset=arr["off"], busy_prev=arr["bprev"],
            busy_gap=arr["bgap"], last=np.array(self.last, np.int64),
            inst_end=np.array(self.end, np.int64),
            inst_key=np.arange(len(self.last), dtype=np.int64),
        )  # fmt: skip


def split_micro_batches(
    st: Steps,
    pairs: pd.DataFrame,
    ranks: Iterable[int],
    parts: int = 2,
    blocking: bool = True,
) -> Steps | None:
    """The windows of `ranks` (a pipeline's) rebuilt with every micro-batch split into `parts`
    (module); `pairs` holds the point-to-point barriers (p2p_replay_pairs: ik, src, k).
    parts = 1 rebuilds the measured chains as blocking points. None when a call of those
    windows waits for a rank outside them (its instance could not be replayed)."""
    keep = set(int(r) for r in ranks)
    wins = [w for w in range(len(st.step)) if int(st.rank[w]) in keep]
    calls = np.concatenate(
        [np.arange(st.first[w], st.first[w + 1]) for w in wins] or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    counts = np.bincount(st.inst, minlength=len(st.last))
    if not len(calls) or (np.bincount(st.inst[calls], minlength=len(st.last)) != counts).any():
        return None
    src = dict(zip(pairs["ik"].astype(int), pairs["src"].astype(int), strict=True))
    nth = dict(zip(pairs["ik"].astype(int), pairs["k"].astype(int), strict=True))

    def through(recvs: list[int], sends: list[int]) -> bool:
        """Whether a segment works on one micro-batch: its receives and sends are the same
        messages of their channels (the k-th in the step: the micro-batch's), or it only
        receives or only sends."""
        if not recvs or not sends:
            return True
        k = {nth[int(st.inst_key[st.inst[c]])] for c in recvs + sends}
        return len(k) == 1

    b = _Builder(st)
    for w in wins:
        rank = int(st.rank[w])
        points = _points(st, w)
        q = len(points)
        segs = [(int(st.gap[p[0]]), int(st.idle[p[0]])) for p in points]
        segs.append((int(st.tail_gap[w]), int(st.tail_idle[w])))

        def way(c: int, rank: int = rank) -> str | None:
            s = src.get(int(st.inst_key[st.inst[c]]))
            return None if s is None else ("send" if s == rank else "recv")

        program: list = []
        for j in range(q + 1):
            recvs = [c for c in points[j - 1] if way(c) == "recv"] if j else []
            sends = [c for c in points[j] if way(c) == "send"] if j < q else []
            gap, idle = segs[j]

            def halves(cs: list[int], h: int) -> list:
                return [("call", b.instance(int(st.inst[c]), h, parts), 0, way(c) == "send")
                        for c in cs]  # fmt: skip

            if not recvs and not sends:
                program.append(("seg", gap, idle, False))
            elif through(recvs, sends):
                for h in range(parts):  # one micro-batch: receive, compute, send, part by part
                    seg = ("seg", round(gap / parts), round(idle / parts), False)
                    program += [*halves(recvs, h), seg, *halves(sends, h)]
            else:  # two computes: the first uses the receives, the second makes the sends
                seg = ("seg", round(gap / (2 * parts)), round(idle / (2 * parts)), False)
                for h in range(parts):
                    program += [*halves(recvs, h), seg]
                for h in range(parts):
                    program += [seg, *halves(sends, h)]
            if j < q:
                program += [("call", b.instance(int(st.inst[c]), 0, 1), int(st.end_offset[c]),
                             False) for c in points[j] if way(c) is None]  # fmt: skip
        b.window(w, program, any(len(p) > 1 for p in points), blocking)
    return b.steps()


def replay_micro_batches(
    st: Steps, pairs: pd.DataFrame, ranks: Iterable[int], parts: int = 2
) -> pd.DataFrame | None:
    """Replayed step per (rank, step) of `ranks` (pipelines' ranks) with `parts` times the
    micro-batches: rank, step, replayed_ns; None where split_micro_batches cannot rebuild the
    chains or the rebuilt calls wait for each other in a cycle (the split would deadlock)."""
    ranks = list(ranks)
    w = WhatIf("micro_batches", f"{parts}x the micro-batches")
    for blocking in (True, False):
        rebuilt = split_micro_batches(st, pairs, ranks, parts, blocking)
        if rebuilt is None:
            return None
        try:
            ends = replay_ends(rebuilt, [w])[0]
            break
        except RecursionError:  # the split points wait for each other: sends that don't hold
            continue
    else:
        return None
    return pd.DataFrame(
        {"rank": rebuilt.rank, "step": rebuilt.step, "replayed_ns": ends - rebuilt.start}
    )
