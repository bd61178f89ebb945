"""PyTorch profiler (Kineto) chrome traces → canonical Arrow tables. A pure function of the file.

Handles both timestamp conventions (absolute epoch µs; `baseTimeNanoseconds` + relative µs),
both `distributedInfo` shapes, string pids/tids, legacy categories, GPU traces with NCCL
kernels of every naming era, and CPU-only (gloo) traces. See KINETO notes in the README.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from math import prod
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa

from ingest import classify
from ingest.collective_names import kernel_algo, kernel_op, normalize_op
from ingest.dtypes import dtype_size
from ingest.errors import IngestError
from ingest.parsed import Parsed
from ingest.schema import ACTIVITIES, COLLECTIVES, PROCESS_GROUPS, RANKS, STEPS
from ingest.sources import DEFAULT_MAX_BYTES, read_bytes

FORMAT = "kineto"
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
RANK_IN_NAME = re.compile(r"(?:rank|worker)[_\-.]?(\d+)", re.IGNORECASE)
EPOCH_US_MIN = 1e15  # absolute epoch µs are ~1.5e15 and later; relative ones are far smaller
DROPPED_CATS = frozenset({"python_function", "Trace"})

Id = int | str | None
Num = int | float | None


class Args(msgspec.Struct, gc=False):
    """The event args commwall uses; everything else is skipped by the decoder."""

    external_id: int | None = msgspec.field(name="External id", default=None)
    legacy_external_id: int | None = msgspec.field(name="external id", default=None)
    correlation: int | None = None
    device: int | None = None
    stream: int | None = None
    coll_name: str | None = msgspec.field(name="Collective name", default=None)
    in_nelems: int | None = msgspec.field(name="In msg nelems", default=None)
    out_nelems: int | None = msgspec.field(name="Out msg nelems", default=None)
    group_size: int | None = msgspec.field(name="Group size", default=None)
    dtype: str | None = None
    pg_name: str | int | None = msgspec.field(name="Process Group Name", default=None)
    pg_desc: str | None = msgspec.field(name="Process Group Description", default=None)
    seq: int | None = msgspec.field(name="Seq", default=None)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b"null"))
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=msgspec.Raw(b"null"))
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=msgspec.Raw(b"null"))


class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: Id = None
    tid: Id = None
    ts: Num = None
    dur: Num = None
    args: Args | None = None


class PGConfig(msgspec.Struct):
    pg_name: str | int | None = None
    pg_desc: str | None = None
    pg_size: int | None = None
    ranks: list[int] | str | None = None


class DistInfo(msgspec.Struct):
    rank: int | str | None = None
    world_size: int | str | None = None
    backend: str | None = None
    nccl_version: str | None = None
    pg_config: list[PGConfig] | None = None


class DeviceProp(msgspec.Struct):
    id: int | None = None
    name: str | None = None


class Trace(msgspec.Struct):
    traceEvents: list[Event] | None = None  # noqa: N815 (Kineto's key)
    distributedInfo: DistInfo | None = None  # noqa: N815
    baseTimeNanoseconds: int | None = None  # noqa: N815
    deviceProperties: list[DeviceProp] | None = None  # noqa: N815
    host_name: str | None = None


_TRACE = msgspec.json.Decoder(Trace)
_EVENTS = msgspec.json.Decoder(list[Event])


def looks_like_kineto(head: bytes) -> bool:
    """Content sniff: a JSON object with Kineto keys, or a bare JSON array of events."""
    h = head.lstrip()
    if h[:1] == b"[":
        return b'"ph"' in h[:4096]
    return h[:1] == b"{" and any(
        k in h for k in (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"')
    )


def decode(path: Path, data: bytes) -> Trace:
    """Typed decode of the trace; IngestError naming the file and the problem otherwise."""
    first = data.lstrip()[:1]
    try:
        if first == b"[":
            return Trace(traceEvents=_EVENTS.decode(data))
        if first != b"{":
            raise IngestError(path, "not JSON (content does not start with '{' or '[')")
        trace = _TRACE.decode(data)
    except msgspec.ValidationError as e:
        raise IngestError(path, f"not a valid Kineto trace: {e}") from e
    except msgspec.DecodeError as e:
        raise IngestError(path, f"not valid JSON: {e}") from e
    if trace.traceEvents is None:
        raise IngestError(path, "JSON but not a Kineto trace: no 'traceEvents' array")
    return trace


def _to_ns(values: list) -> np.ndarray:
    """µs (int or float) → int64 ns, exact for integer epoch µs and to ~1 ns for floats."""
    a = np.asarray(values, dtype=np.float64)
    whole = np.floor(a)
    return whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000).astype(np.int64)


def _int_or_none(v: Id) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    return None


def _raw_list(raw: msgspec.Raw) -> list | None:
    try:
        v = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return v if isinstance(v, list) else None


def _first_tensor(dims: list | None, types: list | None) -> tuple[int | None, str | None]:
    """Elements and dtype of the first tensor input (Input Dims/Input type), if any."""
    if not dims or not isinstance(dims[0], list) or not dims[0]:
        return None, None
    d = dims[0]
    if not all(isinstance(x, int) for x in d):
        return None, None
    t = types[0] if types and isinstance(types[0], str) else None
    return prod(d), t


def _rank_of(path: Path, dist: DistInfo | None, rank: int | None) -> tuple[int, str]:
    if dist is not None and _int_or_none(dist.rank) is not None:
        return _int_or_none(dist.rank), "distributedInfo"  # type: ignore[return-value]
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


class _Columns:
    """Column lists for the activities table, filled event by event."""

    def __init__(self) -> None:
        self.ts: list = []
        self.dur: list = []
        self.kind: list[str] = []
        self.cat: list[str | None] = []
        self.name: list[str | None] = []
        self.pid: list[int | None] = []
        self.tid: list[int | None] = []
        self.stream: list[int | None] = []
        self.corr: list[int | None] = []
        self.ext: list[int | None] = []


def parse(
    path: str | Path,
    rank: int | None = None,
    comm_patterns: tuple[str, ...] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Parsed:
    """Parse one Kineto trace file into the store's tables (ranks, process_groups, activities,
    steps, collectives). `rank` is used only when neither distributedInfo nor the file name
    tells the rank; `comm_patterns` extend the communication-kernel regex."""
    path = Path(path)
    trace = decode(path, read_bytes(path, max_bytes))
    events = trace.traceEvents or []
    xs = [e for e in events if e.ph == "X" and e.cat not in DROPPED_CATS and e.ts is not None]
    if not xs:
        raise IngestError(path, f"trace has no complete ('X') events ({len(events)} events)")
    del events
    for e in xs:
        if e.cat in classify.LEGACY_CATS:
            e.cat = classify.LEGACY_CATS[e.cat]
        if e.args is not None and e.args.external_id is None:
            e.args.external_id = e.args.legacy_external_id

    dist = trace.distributedInfo
    rank_value, rank_source = _rank_of(path, dist, rank)
    base = trace.baseTimeNanoseconds
    if base is not None:
        time_base = "base_ns"
    elif float(xs[0].ts) > EPOCH_US_MIN:  # type: ignore[arg-type]
        time_base, base = "epoch_us", 0
    else:
        time_base, base = "unknown", 0

    ts_ns = _to_ns([e.ts for e in xs]) + base
    dur_ns = np.maximum(_to_ns([e.dur or 0 for e in xs]), 0)

    gpu = any(e.cat in classify.DEVICE_CATS for e in xs)
    step_idx = [i for i, e in enumerate(xs) if e.name and STEP_RE.match(e.name)]
    step_idx = [i for i in step_idx if xs[i].cat != "gpu_user_annotation"]
    main_threads = {(xs[i].pid, xs[i].tid) for i in step_idx}
    if not main_threads:
        main_threads = {(e.pid, e.tid) for e in xs if e.pid == e.tid and e.pid is not None}
    comm_re = classify.comm_regex(comm_patterns)

    c = _Columns()
    for e in xs:
        cat = e.cat or ""
        name = e.name or ""
        if gpu:
            kind = classify.classify_gpu(cat, name, comm_re)
        else:
            kind = classify.classify_cpu(cat, name, (e.pid, e.tid) in main_threads)
        a = e.args
        c.kind.append(kind)
        c.cat.append(e.cat)
        c.name.append(e.name)
        c.pid.append(_int_or_none(e.pid))
        c.tid.append(_int_or_none(e.tid))
        if a is None:
            c.stream.append(None)
            c.corr.append(None)
            c.ext.append(None)
        else:
            c.stream.append(a.stream)
            c.corr.append(a.correlation)
            c.ext.append(a.external_id)

    launch_ns = _launch_times(xs, ts_ns, gpu)
    activities = pa.table(
        {
            "rank": pa.array(np.full(len(xs), rank_value, np.int32)),
            "ts": pa.array(ts_ns),
            "dur": pa.array(dur_ns),
            "kind": pa.array(c.kind, pa.string()),
            "cat": pa.array(c.cat, pa.string()),
            "name": pa.array(c.name, pa.string()),
            "pid": pa.array(c.pid, pa.int64()),
            "tid": pa.array(c.tid, pa.int64()),
            "stream": pa.array(c.stream, pa.int64()),
            "correlation": pa.array(c.corr, pa.int64()),
            "external_id": pa.array(c.ext, pa.int64()),
            "launch_ts": pa.array(launch_ns),
        },
        schema=ACTIVITIES,
    )

    steps = _steps(xs, step_idx, ts_ns, dur_ns, rank_value)
    world = _int_or_none(dist.world_size) if dist else None
    collectives = _collectives(xs, ts_ns, dur_ns, launch_ns, c.kind, gpu, rank_value, world)
    ranks = _ranks_row(trace, xs, rank_value, rank_source, time_base, gpu, step_idx, world)
    pgs = _process_groups(dist, rank_value)
    detail = {
        "time_base": time_base,
        "trace_kind": "gpu" if gpu else "cpu",
        "events": len(xs),
        "steps": steps.num_rows,
        "collectives": collectives.num_rows,
        "rank_source": rank_source,
    }
    tables = {
        "ranks": ranks,
        "process_groups": pgs,
        "activities": activities,
        "steps": steps,
        "collectives": collectives,
    }
    return Parsed(format=FORMAT, tables=tables, detail=detail)


def _launch_times(xs: list[Event], ts_ns: np.ndarray, gpu: bool) -> np.ndarray:
    """For device events: the start of the runtime call with the same correlation id (or their
    own start when none is found); for host events: their own start."""
    launch = ts_ns.copy()
    if not gpu:
        return launch
    by_corr: dict[int, int] = {}
    for i, e in enumerate(xs):
        if e.cat in classify.LAUNCH_CATS and e.args is not None and e.args.correlation is not None:
            by_corr[e.args.correlation] = int(ts_ns[i])
    for i, e in enumerate(xs):
        if e.cat in classify.DEVICE_CATS and e.args is not None:
            t = by_corr.get(e.args.correlation)  # type: ignore[arg-type]
            if t is not None:
                launch[i] = t
    return launch


def _steps(
    xs: list[Event], step_idx: list[int], ts_ns: np.ndarray, dur_ns: np.ndarray, rank: int
) -> pa.Table:
    seen: dict[int, int] = {}
    for i in step_idx:
        n = int(STEP_RE.match(xs[i].name).group(1))  # type: ignore[union-attr, arg-type]
        seen.setdefault(n, i)
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

    def __init__(self, xs: list[Event], ts_ns: np.ndarray, dur_ns: np.ndarray) -> None:
        per: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)
        for i, e in enumerate(xs):
            n = e.name or ""
            if n == "record_param_comms" or n.startswith("nccl:"):
                if e.cat == "gpu_user_annotation":
                    continue
                per[(e.pid, e.tid)].append((int(ts_ns[i]), int(ts_ns[i] + dur_ns[i]), i))
        self.per = {k: sorted(v) for k, v in per.items()}
        self.starts = {k: [s for s, _, _ in v] for k, v in self.per.items()}

    def enclosing(self, thread: tuple, t: int) -> list[int]:
        """Indices of the ops on `thread` that contain time `t`, innermost last."""
        ops = self.per.get(thread)
        if not ops:
            return []
        j = bisect_right(self.starts[thread], t)
        return [i for s, e, i in ops[max(0, j - 8) : j] if s <= t <= e]


def _collectives(
    xs: list[Event],
    ts_ns: np.ndarray,
    dur_ns: np.ndarray,
    launch_ns: np.ndarray,
    kinds: list[str],
    gpu: bool,
    rank: int,
    world: int | None,
) -> pa.Table:
    rows: dict[str, list] = {f.name: [] for f in COLLECTIVES}
    host = _HostOps(xs, ts_ns, dur_ns) if gpu else None
    launcher: dict[int, tuple] = {}
    if gpu:
        for e in xs:
            if e.cat in classify.LAUNCH_CATS and e.args and e.args.correlation is not None:
                launcher[e.args.correlation] = (e.pid, e.tid)
    for i, e in enumerate(xs):
        if kinds[i] != classify.COMM:
            continue
        a = e.args or Args()
        name = e.name or ""
        op = normalize_op(a.coll_name) if a.coll_name else "unknown"
        in_n, out_n, dtype = a.in_nelems, a.out_nelems, a.dtype
        pg_name = None if a.pg_name is None else str(a.pg_name)
        pg_desc, group, seq = a.pg_desc, a.group_size, a.seq
        seq_source = "Seq" if seq is not None else None
        if gpu:
            thread = launcher.get(a.correlation)  # type: ignore[arg-type]
            for j in host.enclosing(thread, int(launch_ns[i])) if thread and host else []:
                h = xs[j]
                ha = h.args or Args()
                if h.name == "record_param_comms":
                    if op == "unknown" and ha.coll_name:
                        op = normalize_op(ha.coll_name)
                    in_n = in_n if in_n is not None else ha.in_nelems
                    out_n = out_n if out_n is not None else ha.out_nelems
                    dtype = dtype or ha.dtype
                    pg_name = pg_name or (None if ha.pg_name is None else str(ha.pg_name))
                    pg_desc = pg_desc or ha.pg_desc
                    group = group or ha.group_size
                    if seq is None and ha.seq is not None:
                        seq, seq_source = ha.seq, "Seq"
                    if seq is None:
                        ci = _raw_list(ha.concrete)
                        if ci and len(ci) == 8 and str(ci[1]).isdigit():
                            seq, seq_source = int(ci[1]), "concrete_inputs"
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
            n, t = _first_tensor(_raw_list(a.input_dims), _raw_list(a.input_type))
            in_n, dtype = n, t
            algo = None
        if out_n is None and in_n is not None and op in ("allreduce", "broadcast", "alltoall"):
            out_n = in_n
        group = group or world
        size = dtype_size(dtype)
        rows["rank"].append(rank)
        rows["ts"].append(int(ts_ns[i]))
        rows["dur"].append(int(dur_ns[i]))
        rows["launch_ts"].append(int(launch_ns[i]))
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
        rows["in_bytes"].append(None if in_n is None or size is None else in_n * size)
        rows["out_bytes"].append(None if out_n is None or size is None else out_n * size)
        rows["algo"].append(algo)
        rows["stream"].append(a.stream)
    return pa.table(rows, schema=COLLECTIVES)


def _ranks_row(
    trace: Trace,
    xs: list[Event],
    rank: int,
    rank_source: str,
    time_base: str,
    gpu: bool,
    step_idx: list[int],
    world: int | None,
) -> pa.Table:
    dist = trace.distributedInfo
    device = None
    gpu_name = None
    if gpu:
        devs = Counter(
            _int_or_none(e.pid) for e in xs if e.cat in classify.DEVICE_CATS and e.pid is not None
        )
        device = devs.most_common(1)[0][0] if devs else None
        for p in trace.deviceProperties or []:
            if p.id == device:
                gpu_name = p.name
    if step_idx:
        pid = _int_or_none(xs[step_idx[0]].pid)
    else:
        pids = Counter(_int_or_none(e.pid) for e in xs if e.cat == "cpu_op")
        pid = pids.most_common(1)[0][0] if pids else None
    nccl_version = dist.nccl_version if dist and dist.nccl_version != "unknown" else None
    row = {
        "rank": [rank],
        "host": [trace.host_name],
        "pid": [pid],
        "device": [device],
        "gpu_name": [gpu_name],
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
            except ValueError:
                ranks = None
        rows["rank"].append(rank)
        rows["pg_name"].append(None if pg.pg_name is None else str(pg.pg_name))
        rows["pg_desc"].append(pg.pg_desc)
        rows["pg_size"].append(pg.pg_size)
        rows["ranks"].append(None if ranks is None else json.dumps(ranks))
    return pa.table(rows, schema=PROCESS_GROUPS)
