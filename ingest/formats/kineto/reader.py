"""PyTorch profiler (Kineto) chrome traces → canonical Arrow tables. A pure function of the file.

Handles both timestamp conventions (absolute epoch µs; `baseTimeNanoseconds` + relative µs),
both `distributedInfo` shapes, string pids/tids, legacy categories, GPU traces with NCCL
kernels of every naming era, and CPU-only (gloo) traces. See KINETO notes in the README.

The file is decoded into columns by columns.py (events.py reads the bytes), times are placed by
timeline.py, and the collectives table is read from the args by comm_args.py; this module
tells the rank and time base, classifies the rows and builds the other tables.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest import classify
from commwall.ingest.errors import IngestError
from commwall.ingest.formats.kineto import events as kineto_events
from commwall.ingest.formats.kineto import p2p_batches
from commwall.ingest.formats.kineto.columns import decode
from commwall.ingest.formats.kineto.comm_args import INT32_MAX, collectives_table, int_or_none
from commwall.ingest.formats.kineto.events import DistInfo, Event, Header, Id
from commwall.ingest.formats.kineto.timeline import (
    blocking,
    enclosing,
    first_time,
    in_range,
    launch_times,
    to_ns,
)
from commwall.ingest.parsed import Parsed
from commwall.ingest.schema import (
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
EPOCH_US_MIN = 1e15  # absolute epoch µs are ~1.5e15 and later; relative ones are far smaller


def looks_like_kineto(head: bytes) -> bool:
    """Content sniff: a JSON object with Kineto keys, or a bare JSON array of events."""
    h = head.removeprefix(kineto_events.BOM).lstrip()
    if h[:1] == b"[":
        return b'"ph"' in h[:4096]
    return h[:1] == b"{" and any(
        k in h for k in (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"')
    )


def _count(path: Path, v: Id, what: str) -> int | None:
    """A rank or world size (the decoder bounds integers; a string is checked here)."""
    n = int_or_none(v)
    if n is not None and not 0 <= n <= INT32_MAX:
        raise IngestError(path, f"{what} {v!r} is out of range (0 to {INT32_MAX:,})")
    return n


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


def _np(col: pa.ChunkedArray) -> np.ndarray:
    """An integer column as numpy, nulls as -1."""
    return pc.fill_null(col, -1).to_numpy()


KINDS = pa.array([classify.OTHER, classify.COMPUTE, classify.COMM, classify.MEMORY])


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
    chunks = decode(trace, comm_re, jobs)
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
    elif first_time(ts_us) > EPOCH_US_MIN:
        time_base, base = "epoch_us", 0
    else:
        time_base, base = "unknown", 0
    ok = in_range(ts_us, dur_us, base)
    dropped = len(ok) - int(np.count_nonzero(ok))
    clamped = int(np.count_nonzero(negative & ok))
    del negative
    if dropped:
        chunks.keep(ok)
        ts_us, dur_us, kept = ts_us[ok], dur_us[ok], chunks.kept
        if chunks.n == 0:
            raise IngestError(path, f"no event has a time within {TIME_RANGE} ({dropped} events)")
    ts_ns = to_ns(ts_us) + base
    dur_ns = to_ns(dur_us)
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
            kind[enclosing(ts_ns, dur_ns, pid_np, tid_np, wait, kind == compute)] = other
        for way, op_re in classify.HOST_P2P.items():  # blocking sends and receives
            ops = cat_is({"cpu_op"}) & on_main & name_matches(op_re)
            if ops.any():
                moved = name_matches(classify.HOST_P2P_TRANSFER[way])
                dur_ns = blocking(ts_ns, dur_ns, pid_np, tid_np, ops, moved)
                kind[ops] = comm
                wait |= ops
    is_launch = cat_is(classify.LAUNCH_CATS)
    launch_ns, launch_row = launch_times(_np(corr), ts_ns, is_device, is_launch)
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
        collectives = collectives_table(
            kept, comm_rows, ts_ns, dur_ns, launch_ns, launch_row, threads, gpu, rank_value, world
        )
        if gpu:  # one SendRecv kernel of batched sends and receives: a row per send / receive
            collectives = p2p_batches.expand(
                collectives, kept, comm_rows, ts_ns, dur_ns, launch_row, threads
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
