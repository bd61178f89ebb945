"""Time arithmetic of a Kineto trace's rows: µs to ns, the time base, the store's time range,
launch times, and the host ops that enclose or block on communication (all vectorised).
"""

from __future__ import annotations

import numpy as np

from commwall.ingest.schema import (
    MAX_NS,
)


def to_ns(values: np.ndarray) -> np.ndarray:
    """µs (float64, within the store's time range) → int64 ns, exact for integer epoch µs and to
    ~1 ns for floats."""
    a = values
    whole = np.floor(a)
    return whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000).astype(np.int64)


def enclosing(
    ts: np.ndarray,
    dur: np.ndarray,
    pid: np.ndarray,
    tid: np.ndarray,
    inner: np.ndarray,
    candidates: np.ndarray,
) -> np.ndarray:
    """Mask of the `candidates` rows that enclose an `inner` row of the same thread (start at
    or before it, end at or after it). The inner rows of one thread do not overlap (a thread
    waits once at a time), so the first one starting at or after a candidate's start decides."""
    out = np.zeros(len(ts), dtype=bool)
    for p, t in {(int(a), int(b)) for a, b in zip(pid[inner], tid[inner], strict=True)}:
        same = (pid == p) & (tid == t)
        rows = np.flatnonzero(inner & same)
        starts = ts[rows]
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], (ts[rows] + dur[rows])[order]
        cand = np.flatnonzero(candidates & same)
        first = np.searchsorted(starts, ts[cand], side="left")
        ok = first < len(starts)
        hit = np.zeros(len(cand), dtype=bool)
        hit[ok] = ends[first[ok]] <= ts[cand[ok]] + dur[cand[ok]]
        out[cand[hit]] = True
    return out


def blocking(
    ts: np.ndarray,
    dur: np.ndarray,
    pid: np.ndarray,
    tid: np.ndarray,
    ops: np.ndarray,
    moved: np.ndarray,
) -> np.ndarray:
    """`dur` with each `ops` row (a blocking send or receive) lasting until its transfer
    begins: the first `moved` row of the same process starting at or after the op, if it starts
    before the thread's next op (classify.py). The transfer event itself is communication
    already; the two never overlap, so that each call is one stretch of communication for the
    decomposition. Returns a new array."""
    out = dur.copy()
    for p in {int(a) for a in pid[ops]}:
        rows = np.flatnonzero(moved & (pid == p))
        if not len(rows):
            continue
        order = np.argsort(ts[rows], kind="stable")
        starts = ts[rows][order]
        for t in {int(b) for b in tid[ops & (pid == p)]}:
            mine = np.flatnonzero(ops & (pid == p) & (tid == t))
            mine = mine[np.argsort(ts[mine], kind="stable")]
            nxt = np.append(ts[mine][1:], np.iinfo(np.int64).max)
            first = np.searchsorted(starts, ts[mine], side="left")
            ok = first < len(starts)
            ok[ok] &= starts[first[ok]] < nxt[ok]
            hit = mine[ok]
            out[hit] = starts[first[ok]] - ts[hit]
    return out


def first_time(ts_us: np.ndarray) -> float:
    """The first start (µs) that could be a time at all, for telling the time base."""
    with np.errstate(invalid="ignore"):
        good = np.flatnonzero(np.abs(ts_us) <= MAX_NS / 1000)
    return float(ts_us[good[0]]) if len(good) else 0.0


def in_range(ts_us: np.ndarray, dur_us: np.ndarray, base: int) -> np.ndarray:
    """Rows whose start and end (ns since the epoch, after adding `base`) lie within the store's
    time range, 1970 to 2200; NaN and infinities are out. Vectorised: no per-event Python."""
    with np.errstate(invalid="ignore", over="ignore"):
        start = ts_us * 1000.0 + float(base)
        return (start >= 0) & (start + dur_us * 1000.0 <= MAX_NS)


def launch_times(
    corr: np.ndarray, ts_ns: np.ndarray, is_device: np.ndarray, is_launch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: when the host launched it (device rows: start of the earliest runtime call with
    the same correlation id; otherwise its own start), and the row of that runtime call (-1)."""
    launch = ts_ns.copy()
    row = np.full(len(ts_ns), -1, dtype=np.int64)
    rt = np.flatnonzero(is_launch & (corr >= 0))
    dev = np.flatnonzero(is_device & (corr >= 0))
    if len(rt) == 0 or len(dev) == 0:
        return launch, row
    order = rt[np.lexsort((ts_ns[rt], corr[rt]))]
    keys, first = np.unique(corr[order], return_index=True)
    src = order[first]
    pos = np.clip(np.searchsorted(keys, corr[dev]), 0, len(keys) - 1)
    found = keys[pos] == corr[dev]
    launch[dev[found]] = ts_ns[src[pos[found]]]
    row[dev[found]] = src[pos[found]]
    return launch, row
