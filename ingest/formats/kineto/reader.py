"""PyTorch profiler (Kineto) chrome traces → canonical Arrow tables. A pure function of the file.

Handles both timestamp conventions (absolute epoch µs; `baseTimeNanoseconds` + relative µs),
both `distributedInfo` shapes, string pids/tids, legacy categories, GPU traces with NCCL
kernels of every naming era, and CPU-only (gloo) traces. See KINETO notes in the README.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator
from math import prod
from operator import attrgetter
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest import classify
from commwall.ingest.collective_names import kernel_algo, kernel_op, normalize_op
from commwall.ingest.dtypes import dtype_size
from commwall.ingest.errors import IngestError
from commwall.ingest.exec import forked
from commwall.ingest.formats.kineto import events as kineto_events
from commwall.ingest.formats.kineto.events import Args, DistInfo, Event, Header, Id
from commwall.ingest.parsed import Parsed
from commwall.ingest.schema import (
    COLLECTIVES,
    MAX_NS,
    NEGATIVE_DURATION,
    PROCESS_GROUPS,
    RANKS,
    STEPS,
    TIME_RANGE,
)
from commwall.ingest.sources import DEFAULT_MAX_BYTES, read_bytes

FORMAT = "kineto"
STEP_RE = re.compile(r"^ProfilerStep#(\d{1,18})$")  # longer numbers are not steps
RANK_IN_NAME = re.compile(r"(?:rank|worker)[_\-.]?(\d{1,9})(?!\d)", re.IGNORECASE)
INT32_MAX, INT64_MAX = (1 << 31) - 1, (1 << 63) - 1
EPOCH_US_MIN = 1e15  # absolute epoch µs are ~1.5e15 and later; relative ones are far smaller
DROPPED_CATS = frozenset({"python_function", "Trace"})
#: The c10d ops that issue a point-to-point call on a CPU trace (their `Concrete Inputs` hold
#: the peer's rank in the process group, third) and the op of the `gloo:*` call they issue.
P2P_OPS = {"c10d::send": "send", "c10d::recv_": "recv"}
#: The c10d op that issues a `gloo:all_to_all` on a CPU trace: its `Concrete Inputs` hold the
#: output and input split sizes (fourth and fifth), its `Input Dims` the output and input.
ALLTOALL_OP = "c10d::alltoall_base_"
MAX_LIST = 1 << 16  # entries of a rank list or split sizes read from an arg (more: not read)


def looks_like_kineto(head: bytes) -> bool:
    """Content sniff: a JSON object with Kineto keys, or a bare JSON array of events."""
    h = head.removeprefix(kineto_events.BOM).lstrip()
    if h[:1] == b"[":
        return b'"ph"' in h[:4096]
    return h[:1] == b"{" and any(
        k in h for k in (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"')
    )


def _to_ns(values: np.ndarray) -> np.ndarray:
    """µs (float64, within the store's time range) → int64 ns, exact for integer epoch µs and to
    ~1 ns for floats."""
    a = values
    whole = np.floor(a)
    return whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000).astype(np.int64)


def _int_or_none(v: Id) -> int | None:
    """An integer, or a string of at most 18 ASCII digits as one; else None."""
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isascii() and v.lstrip("-").isdigit() and len(v.lstrip("-")) <= 18:
        return int(v)
    return None


def _count(path: Path, v: Id, what: str) -> int | None:
    """A rank or world size (the decoder bounds integers; a string is checked here)."""
    n = _int_or_none(v)
    if n is not None and not 0 <= n <= INT32_MAX:
        raise IngestError(path, f"{what} {v!r} is out of range (0 to {INT32_MAX:,})")
    return n


def _as_int(v: Id) -> int | None:
    return v if type(v) is int else _int_or_none(v)


def _raw_list(raw: msgspec.Raw) -> list | None:
    try:
        v = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return v if isinstance(v, list) else None


def _first_tensor(dims: list | None, types: list | None) -> tuple[int | None, str | None]:
    """Elements and dtype of the first tensor input (Input Dims/Input type), if any."""
    if not dims or not isinstance(dims[0], list):
        return None, None
    d = dims[0]
    t = types[0] if types and isinstance(types[0], str) else None
    if not all(isinstance(x, int) and x >= 0 for x in d) or (not d and dtype_size(t) is None):
        return None, None
    n = prod(d)
    return (n, t) if n <= INT64_MAX else (None, None)  # a 0-d tensor (dims []) has one element


def _rank_of(path: Path, dist: DistInfo | None, rank: int | None) -> tuple[int, str]:
    if dist is not None and (n := _count(path, dist.rank, "distributedInfo.rank")) is not None:
        return n, "distributedInfo"
    m = RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1)), "file name"
    if rank is not None:
        return rank, "--rank"
    raise IngestError(
        path,
        "cannot tell which rank this trace is: no distributedInfo.rank, no rank or worker "
        "number in the file name; pass --rank",
    )


class _Chunks:
    """Column chunks of the complete events, one chunk per decoded batch. Names and categories
    are dictionary-encoded per batch (in Arrow) and unified at the end."""

    def __init__(self) -> None:
        self.ts: list[np.ndarray] = []
        self.dur: list[np.ndarray] = []
        self.cat: list[pa.DictionaryArray] = []
        self.name: list[pa.DictionaryArray] = []
        self.ints: dict[str, list[pa.Array]] = {
            k: [] for k in ("pid", "tid", "stream", "correlation", "external_id")
        }
        self.n = 0  # complete events
        self.events = 0  # all events seen
        self.kept: dict[int, Event] = {}  # row → event, for the rows `_kept_rows` picks

    def collect(self, batches: Iterator[list[Event]], comm: re.Pattern[str]) -> _Chunks:
        """Add every batch; keep the events whose args matter (see `_kept_rows`)."""
        for evs in batches:
            self.events += len(evs)
            offset = self.n
            xs, cats, names = self.add(evs)
            if not xs:
                continue
            cat_values = [*cats.dictionary.to_pylist(), None]  # code -1: no category
            cat_codes = pc.fill_null(cats.indices, -1).to_numpy(False)
            for j in _kept_rows(cats, names, comm):
                e = xs[j]
                e.cat = cat_values[cat_codes[j]]
                if e.args is not None:
                    e.args = _detached(e.args)
                self.kept[offset + int(j)] = e
        return self

    def __getstate__(self) -> dict:
        """Pickled (to cross processes) with the kept events as JSON: far faster than structs."""
        state = self.__dict__.copy()
        state["kept"] = (list(self.kept), msgspec.json.encode(list(self.kept.values())))
        return state

    def __setstate__(self, state: dict) -> None:
        rows, blob = state["kept"]
        self.__dict__.update(state, kept=dict(zip(rows, _KEPT.decode(blob), strict=True)))

    def extend(self, other: _Chunks) -> _Chunks:
        """These chunks followed by `other`'s."""
        self.ts += other.ts
        self.dur += other.dur
        self.cat += other.cat
        self.name += other.name
        for k, v in other.ints.items():
            self.ints[k] += v
        self.kept.update((self.n + i, e) for i, e in other.kept.items())
        self.n += other.n
        self.events += other.events
        return self

    def add(self, evs: list[Event]) -> tuple[list[Event], pa.DictionaryArray, pa.DictionaryArray]:
        """Append the complete events of a batch; returns them with their encoded (cat, name)
        columns."""
        xs = [e for e in evs if e.ph == "X" and e.ts is not None and e.cat not in DROPPED_CATS]
        if not xs:
            return (
                xs,
                pa.array([], pa.string()).dictionary_encode(),
                pa.array([], pa.string()).dictionary_encode(),
            )
        self.ts.append(np.array(list(map(_TS, xs)), np.float64))  # µs, checked in `in_range`
        dur = np.array(list(map(_DUR, xs)), np.float64)  # a missing dur is NaN
        self.dur.append(np.nan_to_num(dur, nan=0.0))  # negative ones: clamped in `parse`
        cats = _legacy(pa.array(list(map(_CAT, xs)), pa.string()).dictionary_encode())
        names = pc.fill_null(pa.array(list(map(_NAME, xs)), pa.string()), "").dictionary_encode()
        self.cat.append(cats)
        self.name.append(names)
        args = [e.args or _NO_ARGS for e in xs]
        i = self.ints
        i["pid"].append(_ids(list(map(_PID, xs))))
        i["tid"].append(_ids(list(map(_TID, xs))))
        i["stream"].append(pa.array(list(map(_STREAM, args)), I64))
        i["correlation"].append(pa.array(list(map(_CORR, args)), I64))
        ext = pa.array(list(map(_EXT, args)), I64)
        if ext.null_count:
            ext = pc.coalesce(ext, pa.array(list(map(_LEGACY_EXT, args)), I64))
        i["external_id"].append(ext)
        self.n += len(xs)
        return xs, cats, names

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the rows where `mask` is true (the kept events renumbered)."""
        ends = np.cumsum([len(t) for t in self.ts])
        for i, (a, b) in enumerate(zip(ends - [len(t) for t in self.ts], ends, strict=True)):
            m = mask[a:b]
            pm = pa.array(m)
            self.ts[i], self.dur[i] = self.ts[i][m], self.dur[i][m]
            self.cat[i], self.name[i] = self.cat[i].filter(pm), self.name[i].filter(pm)
            for col in self.ints.values():
                col[i] = col[i].filter(pm)
        row = np.cumsum(mask) - 1
        self.kept = {int(row[r]): e for r, e in self.kept.items() if mask[r]}
        self.n = int(np.count_nonzero(mask))

    def column(self, name: str) -> pa.ChunkedArray:
        """One whole integer column (chunks are not copied)."""
        return pa.chunked_array(self.ints[name], I64)

    def strings(self, which: str) -> tuple[pa.ChunkedArray, np.ndarray, list[str]]:
        """A string column unified to one dictionary: (column, codes, dictionary values)."""
        col = pa.chunked_array(getattr(self, which)).unify_dictionaries()
        codes = np.concatenate([c.indices.to_numpy(False) for c in col.chunks])
        values = col.chunks[0].dictionary.to_pylist() if col.num_chunks else []
        return col, codes, values


def _legacy(cats: pa.DictionaryArray) -> pa.DictionaryArray:
    """Legacy (PyTorch <= 1.9) category names mapped to modern ones, on the dictionary only."""
    values = cats.dictionary.to_pylist()
    if not any(v in classify.LEGACY_CATS for v in values):
        return cats
    mapped = pa.array([classify.LEGACY_CATS.get(v, v) for v in values], pa.string())
    return pa.DictionaryArray.from_arrays(cats.indices, mapped)


def _np(col: pa.ChunkedArray) -> np.ndarray:
    """An integer column as numpy, nulls as -1."""
    return pc.fill_null(col, -1).to_numpy()


_NO_ARGS = Args()
_KEPT = msgspec.json.Decoder(list[Event])
KINDS = pa.array([classify.OTHER, classify.COMPUTE, classify.COMM, classify.MEMORY])
PARALLEL_PIECES = 8  # pieces (about 16 MB) per decoding process, at least
I64 = pa.int64()
_TS, _DUR, _CAT, _NAME, _PID, _TID = (
    attrgetter(f) for f in ("ts", "dur", "cat", "name", "pid", "tid")
)
_STREAM, _CORR, _EXT, _LEGACY_EXT = (
    attrgetter(f) for f in ("stream", "correlation", "external_id", "legacy_external_id")
)


def _ids(values: list) -> pa.Array:
    """pid/tid values (ints, or strings in some traces) as int64; non-numbers are null."""
    try:
        return pa.array(values, I64)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_as_int(v) for v in values], I64)


def _kept_rows(
    cats: pa.DictionaryArray, names: pa.DictionaryArray, comm: re.Pattern[str]
) -> np.ndarray:
    """Rows of a batch whose args matter beyond their columns: steps, host collective ops
    (`record_param_comms`, `nccl:*`, `gloo:*`, ...) and communication kernels."""
    values = names.dictionary.to_pylist()
    host = [
        i
        for i, n in enumerate(values)
        if n.startswith(("ProfilerStep#", "nccl:", "record_param_comms"))
        or classify.HOST_COMM.match(n)
        or n in P2P_OPS
        or n == ALLTOALL_OP
    ]
    commk = [i for i, n in enumerate(values) if comm.search(n)]
    kernel = [i for i, c in enumerate(cats.dictionary.to_pylist()) if c == "kernel"]
    n_idx, c_idx = names.indices.to_numpy(False), cats.indices.to_numpy(False)
    mask = np.isin(n_idx, host) | (np.isin(n_idx, commk) & np.isin(c_idx, kernel))
    return np.flatnonzero(mask)


def _detached(a: Args) -> Args:
    """The args with their raw fields copied out of the decoded piece (a raw field refers to
    the whole piece, which would otherwise stay in memory), legacy external id resolved."""
    return msgspec.structs.replace(
        a,
        external_id=a.legacy_external_id if a.external_id is None else a.external_id,
        input_dims=msgspec.Raw(bytes(a.input_dims)),
        input_type=msgspec.Raw(bytes(a.input_type)),
        concrete=msgspec.Raw(bytes(a.concrete)),
    )


def _decode(trace: kineto_events.Trace, comm: re.Pattern[str], jobs: int) -> _Chunks:
    """All events as column chunks: on the fast path, shared with forked processes when the
    file has enough pieces (PARALLEL_PIECES per process) and `jobs` allows (0: one per core);
    on the careful path when the fast path cannot decode the file."""
    try:
        spans = trace.spans()
        processes = min(jobs or forked.cores(), forked.cores(), len(spans) // PARALLEL_PIECES)
        if processes < 2:
            return _Chunks().collect(trace.events(spans), comm)
        # the last piece brings the fields after the array: it is read here, first
        last = _Chunks().collect(trace.events(spans[-1:]), comm)
        inner = spans[:-1]
        parts = forked.shared_map(
            lambda i: _Chunks().collect(trace.events(inner[i : i + 1]), comm), len(inner), processes
        )
        out = _Chunks()
        for part in parts:
            out.extend(part)
        return out.extend(last)
    except kineto_events.Uncut:
        return _Chunks().collect(trace.careful(), comm)


def parse(
    path: str | Path,
    rank: int | None = None,
    comm_patterns: tuple[str, ...] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    jobs: int = 0,
) -> Parsed:
    """Parse one Kineto trace file into the store's tables (ranks, process_groups, activities,
    steps, collectives). `rank` is used only when neither distributedInfo nor the file name
    tells the rank; `comm_patterns` extend the communication-kernel regex; `jobs` caps the
    processes decoding the file (0: automatic).

    Events are decoded in batches so that memory stays near the size of the file."""
    path = Path(path)
    trace = kineto_events.Trace(path, read_bytes(path, max_bytes))
    comm_re = classify.comm_regex(comm_patterns)
    chunks = _decode(trace, comm_re, jobs)
    kept, n_events = chunks.kept, chunks.events
    if chunks.n == 0:
        raise IngestError(path, f"trace has no complete ('X') events ({n_events} events)")

    header = trace.header
    del trace
    dist = header.distributedInfo
    rank_value, rank_source = _rank_of(path, dist, rank)
    ts_us, dur_us = np.concatenate(chunks.ts), np.concatenate(chunks.dur)
    negative = dur_us < 0  # stored with duration 0, and counted
    dur_us[negative] = 0.0
    base = header.baseTimeNanoseconds
    if base is not None:
        time_base = "base_ns"
    elif _first_time(ts_us) > EPOCH_US_MIN:
        time_base, base = "epoch_us", 0
    else:
        time_base, base = "unknown", 0
    ok = _in_range(ts_us, dur_us, base)
    dropped = len(ok) - int(np.count_nonzero(ok))
    clamped = int(np.count_nonzero(negative & ok))
    del negative
    if dropped:
        chunks.keep(ok)
        ts_us, dur_us, kept = ts_us[ok], dur_us[ok], chunks.kept
        if chunks.n == 0:
            raise IngestError(path, f"no event has a time within {TIME_RANGE} ({dropped} events)")
    ts_ns = _to_ns(ts_us) + base
    dur_ns = _to_ns(dur_us)
    del ts_us, dur_us
    cat_col, cat_codes, cats = chunks.strings("cat")
    name_col, name_codes, names = chunks.strings("name")
    pid, tid, corr = chunks.column("pid"), chunks.column("tid"), chunks.column("correlation")

    def cat_is(wanted: frozenset[str] | set[str]) -> np.ndarray:
        return np.isin(cat_codes, [i for i, c in enumerate(cats) if c in wanted])

    is_device = cat_is(classify.DEVICE_CATS)
    gpu = bool(is_device.any())
    step_rows = sorted(
        i for i, e in kept.items() if STEP_RE.match(e.name or "") and e.cat != "gpu_user_annotation"
    )
    pid_np, tid_np = _np(pid), _np(tid)
    main_threads = {(int(pid_np[i]), int(tid_np[i])) for i in step_rows}
    if not main_threads:
        same = (pid_np == tid_np) & (pid_np >= 0)
        main_threads = {(int(p), int(p)) for p in np.unique(pid_np[same])}

    def name_matches(pattern: re.Pattern[str]) -> np.ndarray:
        return np.isin(name_codes, [i for i, n in enumerate(names) if pattern.search(n)])

    other, compute, comm, memory = range(4)  # codes into KINDS
    kind = np.full(chunks.n, other, dtype=np.int8)
    wait = np.zeros(chunks.n, dtype=bool)
    if gpu:
        kernel = cat_is({"kernel"})
        kind[kernel] = compute
        kind[kernel & name_matches(comm_re)] = comm
        kind[cat_is(classify.MEMORY_CATS)] = memory
    else:
        on_main = np.zeros(chunks.n, dtype=bool)
        for p, t in main_threads:
            on_main |= (pid_np == p) & (tid_np == t)
        enqueue = name_matches(classify.HOST_ENQUEUE)
        kind[cat_is({"cpu_op"}) & on_main & ~enqueue] = compute
        kind[name_matches(classify.HOST_COMM)] = comm
        wait = cat_is({"cpu_op"}) & on_main & name_matches(classify.HOST_WAIT)
        if wait.any():  # the program waits for communication: not compute (classify.py)
            kind[wait] = comm
            kind[_enclosing(ts_ns, dur_ns, pid_np, tid_np, wait, kind == compute)] = other
        for way, op_re in classify.HOST_P2P.items():  # blocking sends and receives
            ops = cat_is({"cpu_op"}) & on_main & name_matches(op_re)
            if ops.any():
                moved = name_matches(classify.HOST_P2P_TRANSFER[way])
                dur_ns = _blocking(ts_ns, dur_ns, pid_np, tid_np, ops, moved)
                kind[ops] = comm
                wait |= ops
    is_launch = cat_is(classify.LAUNCH_CATS)
    launch_ns, launch_row = _launch_times(_np(corr), ts_ns, is_device, is_launch)
    comm_rows = np.flatnonzero((kind == comm) & ~wait)  # a wait is no collective of its own

    activities = pa.table(
        {
            "rank": pa.array(np.full(chunks.n, rank_value, np.int32)),
            "ts": pa.array(ts_ns),
            "dur": pa.array(dur_ns),
            "kind": pa.DictionaryArray.from_arrays(kind, KINDS),
            "cat": cat_col,
            "name": name_col,
            "pid": pid,
            "tid": tid,
            "stream": chunks.column("stream"),
            "correlation": corr,
            "external_id": chunks.column("external_id"),
            "launch_ts": pa.array(launch_ns),
        },
    )
    steps = _steps(kept, step_rows, ts_ns, dur_ns, rank_value)
    world = _count(path, dist.world_size, "distributedInfo.world_size") if dist else None
    threads = (pid_np, tid_np)
    try:  # args kept raw (sizes, types, concrete inputs) are decoded here, UTF-8 checked here
        collectives = _collectives(
            kept, comm_rows, ts_ns, dur_ns, launch_ns, launch_row, threads, gpu, rank_value, world
        )
    except UnicodeDecodeError as e:
        raise IngestError(
            path, "not valid JSON: a string in an event's args is not valid UTF-8"
        ) from e
    host_pid = int(pid_np[step_rows[0]]) if step_rows else _most_common(pid_np[cat_is({"cpu_op"})])
    device = _most_common(pid_np[is_device]) if gpu else None
    device = device if device is not None and 0 <= device <= INT32_MAX else None
    ranks = _ranks_row(header, rank_value, rank_source, time_base, host_pid, device, world)
    pgs = _process_groups(dist, rank_value)
    detail = {
        "time_base": time_base,
        "trace_kind": "gpu" if gpu else "cpu",
        "events": n_events,
        "complete_events": chunks.n,
        "steps": steps.num_rows,
        "collectives": collectives.num_rows,
        "rank_source": rank_source,
    }
    if dropped:
        detail["dropped_events"] = dropped
        detail["dropped_reason"] = f"start or end outside {TIME_RANGE}"
    if clamped:
        detail["clamped_events"], detail["clamped_reason"] = clamped, NEGATIVE_DURATION
    tables = {
        "ranks": ranks,
        "process_groups": pgs,
        "activities": activities,
        "steps": steps,
        "collectives": collectives,
    }
    return Parsed(format=FORMAT, tables=tables, detail=detail)


def _enclosing(
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


def _blocking(
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


def _first_time(ts_us: np.ndarray) -> float:
    """The first start (µs) that could be a time at all, for telling the time base."""
    with np.errstate(invalid="ignore"):
        good = np.flatnonzero(np.abs(ts_us) <= MAX_NS / 1000)
    return float(ts_us[good[0]]) if len(good) else 0.0


def _in_range(ts_us: np.ndarray, dur_us: np.ndarray, base: int) -> np.ndarray:
    """Rows whose start and end (ns since the epoch, after adding `base`) lie within the store's
    time range, 1970 to 2200; NaN and infinities are out. Vectorised: no per-event Python."""
    with np.errstate(invalid="ignore", over="ignore"):
        start = ts_us * 1000.0 + float(base)
        return (start >= 0) & (start + dur_us * 1000.0 <= MAX_NS)


def _launch_times(
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


def _steps(
    kept: dict[int, Event], rows: list[int], ts_ns: np.ndarray, dur_ns: np.ndarray, rank: int
) -> pa.Table:
    seen: dict[int, int] = {}
    for i in rows:
        m = STEP_RE.match(kept[i].name or "")
        if m:  # always: the rows were chosen by this match
            seen.setdefault(int(m.group(1)), i)
    ns = sorted(seen)
    return pa.table(
        {
            "rank": pa.array([rank] * len(ns), pa.int32()),
            "step": pa.array(ns, pa.int64()),
            "ts": pa.array([int(ts_ns[seen[n]]) for n in ns], pa.int64()),
            "dur": pa.array([int(dur_ns[seen[n]]) for n in ns], pa.int64()),
        },
        schema=STEPS,
    )


class _HostOps:
    """The host-side collective ops (`record_param_comms`, `nccl:*`) per thread, for finding
    the op that encloses a kernel's launch."""

    def __init__(
        self,
        kept: dict[int, Event],
        ts_ns: np.ndarray,
        dur_ns: np.ndarray,
        threads: tuple[np.ndarray, np.ndarray],
    ) -> None:
        rows = [
            i
            for i, e in kept.items()
            if (e.name == "record_param_comms" or (e.name or "").startswith("nccl:"))
            and e.cat != "gpu_user_annotation"
        ]
        idx = np.array(rows, dtype=np.int64)
        per: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
        for i, p, t, s, e in zip(
            rows,
            threads[0][idx].tolist(),
            threads[1][idx].tolist(),
            ts_ns[idx].tolist(),
            (ts_ns[idx] + dur_ns[idx]).tolist(),
            strict=True,
        ):
            per[p, t].append((s, e, i))
        self.per = {k: sorted(v) for k, v in per.items()}
        self.starts = {k: [s for s, _, _ in v] for k, v in self.per.items()}

    def enclosing(self, thread: tuple[int, int], t: int) -> list[int]:
        """Rows of the ops on `thread` that contain time `t`, innermost last."""
        ops = self.per.get(thread)
        if not ops:
            return []
        j = bisect_right(self.starts[thread], t)
        return [i for s, e, i in ops[max(0, j - 8) : j] if s <= t <= e]


def _collectives(
    kept: dict[int, Event],
    comm_rows: np.ndarray,
    ts_ns: np.ndarray,
    dur_ns: np.ndarray,
    launch_ns: np.ndarray,
    launch_row: np.ndarray,
    threads: tuple[np.ndarray, np.ndarray],
    gpu: bool,
    rank: int,
    world: int | None,
) -> pa.Table:
    """One row per communication activity, with what its args (or, for old GPU traces, the
    host op that launched it) say about op, sizes, process group and sequence number."""
    rows: dict[str, list] = {f.name: [] for f in COLLECTIVES}
    host = _HostOps(kept, ts_ns, dur_ns, threads) if gpu else None
    issuers = None if gpu else _P2pIssuers(kept, ts_ns, threads)
    splits = None if gpu else _alltoall_splits(kept, comm_rows, ts_ns)
    lr = launch_row[comm_rows]
    launcher = np.where(lr >= 0, threads[0][lr], -1).tolist(), threads[1][lr].tolist()
    launched = launch_ns[comm_rows].tolist()
    for k, i in enumerate(comm_rows.tolist()):
        e = kept[i]
        a = e.args or _NO_ARGS
        name = e.name or ""
        op = normalize_op(a.coll_name) if a.coll_name else "unknown"
        in_n, out_n, dtype = a.in_nelems, a.out_nelems, a.dtype
        pg_name = None if a.pg_name is None else str(a.pg_name)
        pg_desc, group, seq = a.pg_desc, a.group_size, a.seq
        seq_source = "Seq" if seq is not None else None
        peer = _peer(a)
        pg_ranks, in_splits, out_splits = _ints(a.pg_ranks), _ints(a.in_split), _ints(a.out_split)
        if host is not None:
            thread = (launcher[0][k], launcher[1][k])
            for j in host.enclosing(thread, launched[k]) if thread[0] >= 0 else []:
                h = kept[j]
                ha = h.args or _NO_ARGS
                if h.name == "record_param_comms":
                    if op == "unknown" and ha.coll_name:
                        op = normalize_op(ha.coll_name)
                    in_n = in_n if in_n is not None else ha.in_nelems
                    out_n = out_n if out_n is not None else ha.out_nelems
                    dtype = dtype or ha.dtype
                    peer = peer if peer is not None else _peer(ha)
                    pg_ranks = pg_ranks or _ints(ha.pg_ranks)
                    in_splits = in_splits or _ints(ha.in_split)
                    out_splits = out_splits or _ints(ha.out_split)
                    pg_name = pg_name or (None if ha.pg_name is None else str(ha.pg_name))
                    pg_desc = pg_desc or ha.pg_desc
                    group = group or ha.group_size
                    if seq is None and ha.seq is not None:
                        seq, seq_source = ha.seq, "Seq"
                    if seq is None:
                        ci = _raw_list(ha.concrete)
                        ci_seq = _int_or_none(ci[1]) if ci and len(ci) == 8 else None
                        if ci_seq is not None and 0 <= ci_seq <= INT64_MAX:
                            seq, seq_source = ci_seq, "concrete_inputs"
                else:  # nccl:<op>
                    if op == "unknown":
                        op = normalize_op(h.name)
                    if in_n is None:
                        n, t = _first_tensor(_raw_list(ha.input_dims), _raw_list(ha.input_type))
                        if n is not None:
                            in_n, dtype = n, dtype or t
            if op == "unknown":
                op = kernel_op(name)
            algo = kernel_algo(name)
        else:
            op = normalize_op(name)
            in_n, dtype = _first_tensor(_raw_list(a.input_dims), _raw_list(a.input_type))
            algo = None
            if issuers is not None and op in ("send", "recv"):
                peer = issuers.peer(op, (int(threads[0][i]), int(threads[1][i])), int(ts_ns[i]))
            if splits is not None and i in splits:
                in_splits, out_splits = splits[i]
        if out_n is None and in_n is not None and op in ("allreduce", "broadcast", "alltoall"):
            out_n = in_n
        group = group or world
        size = dtype_size(dtype)
        rows["op"].append(op)
        rows["name"].append(name)
        rows["pg_name"].append(pg_name)
        rows["pg_desc"].append(pg_desc)
        rows["group_size"].append(group)
        rows["seq"].append(seq)
        rows["seq_source"].append(seq_source)
        rows["dtype"].append(dtype)
        rows["in_nelems"].append(in_n)
        rows["out_nelems"].append(out_n)
        rows["in_bytes"].append(_bytes(in_n, size))
        rows["out_bytes"].append(_bytes(out_n, size))
        rows["algo"].append(algo)
        rows["stream"].append(a.stream)
        rows["peer"].append(peer if op in ("send", "recv") else None)
        rows["pg_ranks"].append(pg_ranks)
        rows["in_splits"].append(in_splits if op == "alltoall" else None)
        rows["out_splits"].append(out_splits if op == "alltoall" else None)
    columns: dict[str, list | np.ndarray] = {
        **rows,
        "rank": np.full(len(comm_rows), rank, np.int32),
        "ts": ts_ns[comm_rows],
        "dur": dur_ns[comm_rows],
        "launch_ts": launch_ns[comm_rows],
    }
    return pa.table(columns, schema=COLLECTIVES)


def _peer(a: Args) -> int | None:
    """The peer of a send or receive from a host op's or kernel's args (`Dst Rank` for a send,
    `Src Rank` for a receive: only one of them is present); None when absent or no rank."""
    for v in (a.dst_rank, a.src_rank):
        n = _as_int(v)
        if n is not None and 0 <= n <= INT32_MAX:
            return n
    return None


class _P2pIssuers:
    """The `c10d::send` / `c10d::recv_` ops of a CPU trace per thread: the op that issued a
    `gloo:send` / `gloo:recv` is the latest of its kind on the same thread that starts at or
    before it (the transfer starts inside the op, and may outlast it)."""

    def __init__(
        self, kept: dict[int, Event], ts_ns: np.ndarray, threads: tuple[np.ndarray, np.ndarray]
    ) -> None:
        per: dict[tuple[str, int, int], list[tuple[int, int]]] = defaultdict(list)
        for i, e in kept.items():
            op = P2P_OPS.get(e.name or "")
            if op is not None:
                per[op, int(threads[0][i]), int(threads[1][i])].append((int(ts_ns[i]), i))
        self.kept = kept
        self.per = {k: sorted(v) for k, v in per.items()}
        self.starts = {k: [t for t, _ in v] for k, v in self.per.items()}

    def peer(self, op: str, thread: tuple[int, int], t: int) -> int | None:
        """The peer named by the op issuing the `op` call of `thread` that starts at `t`."""
        key = (op, *thread)
        j = bisect_right(self.starts.get(key, []), t)
        if not j:
            return None
        ci = _raw_list((self.kept[self.per[key][j - 1][1]].args or _NO_ARGS).concrete)
        n = _int_or_none(ci[2]) if ci and len(ci) >= 3 else None
        return n if n is not None and 0 <= n <= INT32_MAX else None


def _ints(v: str | list[int] | None) -> str | None:
    """A list of non-negative integers (a JSON list, or its text as Kineto writes
    `Process Group Ranks` and split sizes: "[0, 1]") as JSON text; None when absent, empty
    ("[]": an even split), longer than MAX_LIST, or anything else."""
    if isinstance(v, str):
        if not v.startswith("[") or len(v) > 16 * MAX_LIST:
            return None
        try:
            v = msgspec.json.decode(v)
        except msgspec.DecodeError:
            return None
    if not isinstance(v, list) or not v or len(v) > MAX_LIST:
        return None
    if not all(type(x) is int and 0 <= x <= INT64_MAX for x in v):
        return None
    return json.dumps(v)


def _alltoall_splits(
    kept: dict[int, Event], comm_rows: np.ndarray, ts_ns: np.ndarray
) -> dict[int, tuple[str | None, str | None]] | None:
    """On a CPU trace, the split sizes (input, output) of each `gloo:all_to_all` row from the
    `c10d::alltoall_base_` that issued it: the k-th issuing op in time order issued the k-th
    call. Only when the counts agree and every pair's shapes do (the call's first tensor is the
    op's output or input); else None."""
    ops = sorted((int(ts_ns[i]), i) for i, e in kept.items() if e.name == ALLTOALL_OP)
    calls = sorted(
        (int(ts_ns[i]), i) for i in comm_rows.tolist() if kept[i].name == "gloo:all_to_all"
    )
    if not calls or len(ops) != len(calls):
        return None
    out = {}
    for (_, o), (_, c) in zip(ops, calls, strict=True):
        oa, ca = kept[o].args or _NO_ARGS, kept[c].args or _NO_ARGS
        dims, ci = _raw_list(oa.input_dims), _raw_list(oa.concrete)
        mine = _raw_list(ca.input_dims)
        if not dims or len(dims) < 2 or not mine or mine[0] not in dims[:2]:
            return None
        if not ci or len(ci) < 5:
            return None
        out[c] = (_ints(ci[4]), _ints(ci[3]))  # input_split_sizes, output_split_sizes
    return out


def _bytes(nelems: int | None, size: int | None) -> int | None:
    """Bytes of `nelems` elements of `size` bytes; None when unknown or beyond int64."""
    if nelems is None or size is None or not 0 <= nelems * size <= INT64_MAX:
        return None
    return nelems * size


def _most_common(values: np.ndarray) -> int | None:
    values = values[values >= 0]
    if len(values) == 0:
        return None
    u, counts = np.unique(values, return_counts=True)
    return int(u[np.argmax(counts)])


def _ranks_row(
    header: Header,
    rank: int,
    rank_source: str,
    time_base: str,
    host_pid: int | None,
    device: int | None,
    world: int | None,
) -> pa.Table:
    dist = header.distributedInfo
    gpu_name = next((p.name for p in header.deviceProperties or [] if p.id == device), None)
    nccl_version = dist.nccl_version if dist and dist.nccl_version != "unknown" else None
    row = {
        "rank": [rank],
        "host": [header.host_name],
        "pid": [host_pid],
        "device": [device],
        "gpu_name": [gpu_name if device is not None else None],
        "world_size": [world],
        "backend": [dist.backend if dist else None],
        "time_base": [time_base],
        "nccl_version": [nccl_version],
        "rank_source": [rank_source],
    }
    return pa.table(row, schema=RANKS)


def _process_groups(dist: DistInfo | None, rank: int) -> pa.Table:
    rows: dict[str, list] = {f.name: [] for f in PROCESS_GROUPS}
    for pg in (dist.pg_config if dist else None) or []:
        ranks = pg.ranks
        if isinstance(ranks, str):
            try:
                ranks = json.loads(ranks)
            except (ValueError, RecursionError):  # not a list as text, or nested past reason
                ranks = None
        rows["rank"].append(rank)
        rows["pg_name"].append(None if pg.pg_name is None else str(pg.pg_name))
        rows["pg_desc"].append(pg.pg_desc)
        rows["pg_size"].append(pg.pg_size)
        rows["ranks"].append(None if ranks is None else json.dumps(ranks))
    return pa.table(rows, schema=PROCESS_GROUPS)
