"""One sweep over a run's timeline: every interval figure of every rank and step window at once.

The SQL modules define the figures, each with its own sweep line: the covered times of
overlap.sql (timeline_cover over each step window and over each rank), the parts of
decomposition.sql (timeline_parts, the same two scopes, with the wait intervals), and the
operator time of operator_compute.sql. On a large run each of those sweeps sorts millions of
interval ends again. A run's analysis session (analysis/report/session.py) computes them all from
one
pass instead: the ends of every timeline activity, wait interval and step window of the run,
sorted by (rank, time) once, with running depths per kind (cumulative sums). DuckDB groups the
intervals by rank (a sort on the rank alone); numpy makes the two ends of each and sorts them
by time, a batch of whole ranks at a time (nearly sorted already: cheaper than sorting every
end in the database). Between two
consecutive ends of a rank the depths are constant, so each such segment is credited, with its
length, to every figure whose condition holds there (the conditions of timeline_cover and
timeline_parts, verbatim) and to the step window open over it. Clipping to a window and then
sweeping measures exactly the same segments, so the figures are equal to the SQL's to the
nanosecond (tests/test_sweep.py compares the two on generated and real runs).

The sweep needs the step windows of each rank to be disjoint, as steps.sql makes them when step
starts increase with the step number. When they are not (a window that overlaps another), it
returns None and the session keeps the SQL definitions.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

#: Event codes of the sweep: the kind of interval an end belongs to.
_COMPUTE, _COMM, _MEMORY, _WAIT, _OPERATOR, _WINDOW = range(6)

#: Every interval of run $rid, grouped by rank (ORDER BY rank only: the ends are sorted by time
#: in numpy, `_ends`): timeline activities (operator activities, operator_compute.sql's
#: _is_operator, as their own code: they are compute too), wait intervals of decomposition.sql
#: and step windows (wid: their index in `_WINDOWS_SQL` order; 0 for the others).
_INTERVALS_SQL = f"""
WITH w AS (
    SELECT rank, ts, dur, (row_number() OVER (ORDER BY rank, ts, step))::BIGINT AS wid
    FROM step_windows($rid)
)
SELECT rank, ts, dur, code, wid FROM (
    SELECT rank, ts, dur,
        CASE
            WHEN _is_operator(kind, cat, name) THEN {_OPERATOR}
            WHEN kind = 'compute' THEN {_COMPUTE}
            WHEN kind = 'comm' THEN {_COMM}
            ELSE {_MEMORY}
        END::TINYINT AS code, 0::BIGINT AS wid
    FROM activities
    WHERE run_id = $rid AND kind IN ('compute', 'comm', 'memory') AND dur > 0
    UNION ALL
    SELECT rank, ts, dur, {_WAIT}::TINYINT, 0 FROM wait_intervals($rid) WHERE dur > 0
    UNION ALL
    SELECT rank, ts, dur, {_WINDOW}::TINYINT, wid FROM w WHERE dur > 0
)
ORDER BY rank
"""

#: The step windows of run $rid in the order that numbers them in `_INTERVALS_SQL` (1-based).
_WINDOWS_SQL = "SELECT rank, step, ts, dur FROM step_windows($rid) ORDER BY rank, ts, step"

#: Figures measured per scope, in the column order of the tables `sweep` returns: timeline_cover's
#: (compute_ns, comm_ns, both_ns, busy_ns), timeline_parts' (the five parts and their busy_ns,
#: here parts_busy_ns) and the operator time (op_compute_ns).
FIGURES = (
    "compute_ns",
    "comm_ns",
    "both_ns",
    "busy_ns",
    "compute_only_ns",
    "compute_overlapped_ns",
    "exposed_transfer_ns",
    "exposed_wait_ns",
    "memory_only_ns",
    "parts_busy_ns",
    "op_compute_ns",
)


@dataclass
class Sweep:
    """The figures of one run: per step window (rank, step, FIGURES) and per rank (rank,
    span_ns, FIGURES), as Arrow tables; span_ns is NULL for a rank without timeline activity."""

    steps: pa.Table
    ranks: pa.Table


def _disjoint(w: dict[str, np.ndarray]) -> bool:
    """Whether the windows of every rank (sorted by rank, ts) are disjoint."""
    pos = w["dur"] > 0
    rank, ts, te = w["rank"][pos], w["ts"][pos], w["ts"][pos] + w["dur"][pos]
    same = rank[1:] == rank[:-1]
    return not bool(np.any(same & (ts[1:] < te[:-1])))


#: Bits of a segment's state: which depths are positive, and whether comm outnumbers wait.
_C, _M, _W, _Y, _M_GT_W, _O = (1 << i for i in range(6))
_STATES = 64


def _figure_matrix() -> np.ndarray:
    """(state x FIGURES) 0/1 matrix: whether a segment in that state counts for each figure, by
    the conditions of timeline_cover and timeline_parts (each segment goes to the first part
    whose condition holds)."""
    out = np.zeros((_STATES, len(FIGURES)), dtype=np.int64)
    for s in range(_STATES):
        c, m, w, y, m_gt_w, o = (bool(s & b) for b in (_C, _M, _W, _Y, _M_GT_W, _O))
        if c and (m or w):
            part = "compute_overlapped_ns"
        elif c:
            part = "compute_only_ns"
        elif m_gt_w:
            part = "exposed_transfer_ns"
        elif w or m:
            part = "exposed_wait_ns"
        elif y:
            part = "memory_only_ns"
        else:
            part = None
        counts = {
            "compute_ns": c,
            "comm_ns": m,
            "both_ns": c and m,
            "busy_ns": c or m or y,
            "parts_busy_ns": part is not None,
            "op_compute_ns": o,
        }
        if part is not None:
            counts[part] = True
        out[s] = [counts.get(f, False) for f in FIGURES]
    return out


_MATRIX = _figure_matrix()


def _group_sums(keys: np.ndarray, length: np.ndarray, groups: int) -> np.ndarray:
    """Per group, the exact int64 sum of `length` of each of the _STATES states (groups x
    _STATES); `keys` = group x _STATES + state. Float bins are exact while sums stay below
    2**53 ns (104 days); beyond that, integer accumulation."""
    size = groups * _STATES
    if float(length.sum(dtype=np.float64)) < 2.0**52:
        sums = np.bincount(keys, weights=length, minlength=size).astype(np.int64)
    else:
        sums = np.zeros(size, dtype=np.int64)
        np.add.at(sums, keys, length)
    return sums.reshape(groups, _STATES)


def _order(rank: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The permutation that sorts ends by (rank, time): one stable argsort of a combined int64
    key when the ranks and times of the chunk span fit in one, else a lexsort."""
    if not len(t):
        return np.zeros(0, dtype=np.intp)
    r0, t0 = int(rank.min()), int(t.min())
    rs, tsp = int(rank.max()) - r0 + 1, int(t.max()) - t0 + 1
    if rs * tsp < 2**62:
        key = (rank.astype(np.int64) - r0) * tsp + (t - t0)
        return np.argsort(key, kind="stable")
    return np.lexsort((t, rank))


def _ends(iv: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The two ends of every interval of whole ranks, sorted by (rank, time): rank, t, code,
    d (+1 at a start, -1 at an end) and wid (a window's id at its start, minus it at its end).
    Ends of one rank at one time may come in any order: the segments between them are empty."""
    n = len(iv["ts"])
    t = np.concatenate([iv["ts"], iv["ts"] + iv["dur"]])
    order = _order(np.concatenate([iv["rank"], iv["rank"]]), t)
    is_end = order >= n
    j = order - n * is_end  # the interval of each end
    sign = 1 - 2 * is_end.astype(np.int32)
    return {
        "rank": iv["rank"][j],
        "t": t[order],
        "code": iv["code"][j],
        "d": sign,
        "wid": iv["wid"][j] * sign,
    }


#: What `_chunk` gives for a batch of whole ranks.
_Swept = tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]


def _chunk(ev: dict[str, np.ndarray]) -> _Swept:
    """The figures of whole ranks of events (sorted by rank, time): (ranks, span_ns or -1,
    figures per rank, lo, figures of the windows lo..lo + n - 1 (window index - 1))."""
    rank, t, code, d = ev["rank"], ev["t"], ev["code"], ev["d"]
    n = len(t)
    new_rank = np.r_[True, rank[1:] != rank[:-1]]
    length = np.zeros(n, dtype=np.int64)
    length[:-1] = np.where(new_rank[1:], 0, np.diff(t))  # a rank's last end closes nothing

    def depth(code_: int) -> np.ndarray:
        return np.cumsum(np.where(code == code_, d, 0), dtype=np.int32)

    def bit(on: np.ndarray, b: int) -> np.ndarray:
        return on.view(np.uint8) * np.uint8(b)

    m, w, o = depth(_COMM), depth(_WAIT), depth(_OPERATOR)
    state = bit(depth(_COMPUTE) + o > 0, _C) | bit(m > 0, _M) | bit(w > 0, _W)
    state |= bit(depth(_MEMORY) > 0, _Y) | bit(m > w, _M_GT_W) | bit(o > 0, _O)

    starts = np.flatnonzero(new_rank)
    local = np.cumsum(new_rank) - 1
    per_rank = _group_sums(local * _STATES + state, length, len(starts)) @ _MATRIX
    act = np.flatnonzero((code != _WAIT) & (code != _WINDOW))
    span = np.full(len(starts), -1, dtype=np.int64)
    if len(act):
        grp = local[act]
        first = np.r_[True, grp[1:] != grp[:-1]]
        last = np.r_[grp[1:] != grp[:-1], True]
        span[grp[first]] = t[act[last]] - t[act[first]]

    # the segments inside exactly one open window are credited to it (its id: the running sum
    # of the ids of the open windows)
    inside = np.flatnonzero(depth(_WINDOW) == 1)
    lo, per_win = 1, np.zeros((0, len(FIGURES)), dtype=np.int64)
    if len(inside):
        wid = np.cumsum(ev["wid"])[inside]
        lo = int(wid.min())
        sums = _group_sums(
            (wid - lo) * _STATES + state[inside], length[inside], int(wid.max()) - lo + 1
        )
        per_win = sums @ _MATRIX
    return rank[starts], span, per_rank, lo, per_win


def _figures(iv: dict[str, np.ndarray]) -> _Swept:
    """`_chunk` of the ends of intervals `iv` (whole ranks)."""
    return _chunk(_ends(iv))


#: Intervals fetched per batch; a batch's last rank waits for the next batch.
_BATCH = 1 << 20


def sweep(con: duckdb.DuckDBPyConnection, rid: int) -> Sweep | None:
    """The figures of run `rid` from one sweep, or None when some rank's step windows overlap
    (then only the SQL definitions apply). Events are streamed in batches, whole ranks at a time,
    so memory grows with the largest rank, not with the run."""
    wins = {
        k: np.asarray(v) for k, v in con.execute(_WINDOWS_SQL, {"rid": rid}).fetchnumpy().items()
    }
    if not _disjoint(wins):
        return None
    per_win = np.zeros((len(wins["rank"]), len(FIGURES)), dtype=np.int64)
    reader = con.sql(_INTERVALS_SQL, params={"rid": rid}).to_arrow_reader(_BATCH)
    out: list[_Swept] = []
    pending: deque[Future[_Swept]] = deque()
    held: dict[str, np.ndarray] | None = None
    # numpy releases the GIL in its sorts and scans: a batch is swept on a second thread while
    # DuckDB produces the next (chunks hold whole ranks, so they are independent); at most two
    # batches wait, so memory still grows with the largest rank, not with the run
    with ThreadPoolExecutor(1, thread_name_prefix="sweep") as pool:
        for batch in reader:
            if len(pending) >= 2:
                out.append(pending.popleft().result())
            cols = {k: batch.column(k).to_numpy() for k in ("rank", "ts", "dur", "code", "wid")}
            if held is not None:
                cols = {k: np.concatenate([held[k], cols[k]]) for k in cols}
            r = cols["rank"]
            cut = int(np.searchsorted(r, r[-1])) if len(r) else 0  # start of the last rank
            held = {k: v[cut:] for k, v in cols.items()}
            if cut:
                pending.append(pool.submit(_figures, {k: v[:cut] for k, v in cols.items()}))
        if held is not None and len(held["ts"]):
            pending.append(pool.submit(_figures, held))
        out += [f.result() for f in pending]
    for *_, lo, sums in out:
        per_win[lo - 1 : lo - 1 + len(sums)] += sums
    ranks = np.concatenate([o[0] for o in out]) if out else np.zeros(0, np.int32)
    span = np.concatenate([o[1] for o in out]) if out else np.zeros(0, np.int64)
    per_rank = np.concatenate([o[2] for o in out]) if out else np.zeros((0, len(FIGURES)), np.int64)
    rank_cols = {"rank": pa.array(ranks, pa.int32()), "span_ns": pa.array(span, mask=span < 0)}
    rank_cols |= {f: pa.array(per_rank[:, j]) for j, f in enumerate(FIGURES)}
    step_cols = {
        "rank": pa.array(wins["rank"], pa.int32()),
        "step": pa.array(wins["step"], pa.int64()),
    }
    step_cols |= {f: pa.array(per_win[:, j]) for j, f in enumerate(FIGURES)}
    return Sweep(pa.table(step_cols), pa.table(rank_cols))
