"""Nsight Systems SQLite exports → the canonical tables (ranks, activities, steps, collectives)
and `nsys_gpus`. A pure function of the file; see docs/nsys.md.

The GPU work (kernels, memcpy, memset, CUDA graphs) of each process that has some is the
timeline of one rank (nsys_ranks). As for Kineto traces: a kernel is comm when its name matches
the communication regex, else compute; memcpy/memset are memory; CUDA runtime/driver calls and
NVTX ranges are other. A device event's `pid` is its device and `tid` its stream (Kineto's
convention); its `launch_ts` is the start of the runtime call with the same correlation id in
the same process. Times are `TARGET_INFO_SESSION_START_TIME.utcEpochNs` + the export's offsets.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest import classify
from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nsys import gpus as nsys_gpus
from commwall.ingest.formats.nsys import nvtx as nsys_nvtx
from commwall.ingest.formats.nsys import ranks as nsys_ranks
from commwall.ingest.formats.nsys import steps as nsys_steps
from commwall.ingest.formats.nsys.collectives import Context, collectives
from commwall.ingest.formats.nsys.db import Export
from commwall.ingest.formats.nsys.source import sqlite_file
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.schema import ACTIVITIES, MAX_NS, NEGATIVE_DURATION, RANKS, TIME_RANGE

FORMAT = "nsys"
PID_MASK = 0xFFFFFF
#: Largest device id stored (ranks.device is int32).
DEVICE_MAX = 2**31 - 1
I64, I32, STR = pa.int64(), pa.int32(), pa.string()
_KEYS = [
    ("proc", I64),
    ("device", I64),
    ("stream", I64),
    ("corr", I64),
    ("start", I64),
    ("end", I64),
]
#: GPU work as read: the common columns plus three table-specific ones (names, copy kinds).
RAW_DEVICE = pa.schema([*_KEYS, ("a", I64), ("b", I64), ("c", I64)])
DEVICE = pa.schema([*_KEYS, ("name", STR), ("cat", STR)])
RUNTIME = pa.schema(
    [
        ("proc", I64),
        ("tid", I64),
        ("corr", I64),
        ("start", I64),
        ("end", I64),
        ("event_class", I64),
        ("name_id", I64),
    ]
)
#: Table → (activities cat, its three specific columns).
DEVICE_TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("kernel", ("demangledName", "shortName", "mangledName")),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("gpu_memcpy", ("copyKind", "srcKind", "dstKind")),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("gpu_memset", ("memKind", "memKind", "memKind")),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": ("cuda_graph", ("graphId", "graphId", "graphId")),
}
#: Tables this parser reads when present; absent ones are listed in the file's detail.
WANTED = (
    *list(DEVICE_TABLES)[:3],
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "TARGET_INFO_SESSION_START_TIME",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SYSTEM_ENV",
    "META_DATA_EXPORT",
    "PROCESSES",
)
_API_VERSION = re.compile(r"_v\d+$")


def parse(path: str | Path, opts: ParseOptions | None = None) -> Parsed:
    """Parse one nsys export (`.sqlite`, `.sqlite.gz`, or a `.nsys-rep`/`.qdrep` report when
    `nsys` is on PATH) into the store's tables."""
    path, opts = Path(path), opts or ParseOptions()
    with sqlite_file(path, opts.max_bytes) as db, Export(db, shown=path) as ex:
        return _parse(ex, path, opts)


def _parse(ex: Export, path: Path, opts: ParseOptions) -> Parsed:
    step_re = nsys_steps.compile_regex(path, opts.step_regex)
    meta = _pairs(ex, "META_DATA_EXPORT", "name", "value")
    base, time_base = _time_base(ex, meta)
    device = _device_work(ex)
    if device.num_rows == 0:
        raise IngestError(
            path,
            "Nsight Systems export without GPU work (no kernel, memcpy "
            "or memset rows): nothing to analyse",
        )
    runtime, nvtx = _runtime(ex), nsys_nvtx.read(ex)
    procs = _processes(ex, device)
    ranks = nsys_ranks.assign(path, procs, nsys_ranks.gather(ex, nvtx), opts.rank_map, opts.rank)
    runtime = _with_rank(runtime, ranks)
    ranges = _with_rank(nvtx.ranges, ranks)
    device = _with_rank(_with_launch(device, runtime), ranks)
    for table, what in ((device, "GPU work"), (runtime, "CUDA API calls"), (nvtx.ranges, "NVTX")):
        _check_times(path, table, base, what)
    clamped = sum(map(_ends_before_start, (device, runtime, ranges)))
    kinds = _kinds(device, classify.comm_regex(opts.comm_patterns))
    activities = pa.concat_tables(
        [
            _device_activities(device, kinds, base),
            _runtime_activities(ex, runtime, base),
            _nvtx_activities(ranges, base),
        ]
    ).sort_by([("rank", "ascending"), ("ts", "ascending")])
    comm = device.filter(pc.equal(kinds, classify.COMM))
    world = {r.rank: r.world_size for r in ranks.values()}
    colls = collectives(comm, base, Context(nvtx), world)
    steps = nsys_steps.steps(ranges, step_re, base)
    gpus = nsys_gpus.read(ex)
    nccl = colls.num_rows > 0 or nvtx.nccl_domain != "absent"
    tables = {
        "ranks": _ranks_table(procs, ranks, gpus, time_base, nccl),
        "activities": activities,
        "steps": steps,
        "collectives": colls,
        "nsys_gpus": gpus,
    }
    counts = Counter(device["cat"].to_pylist())
    detail = _detail(ex, meta, base, time_base, counts, runtime, nvtx, procs, ranks)
    detail.update(steps=steps.num_rows, collectives=colls.num_rows)
    if clamped:
        detail["clamped_events"], detail["clamped_reason"] = clamped, NEGATIVE_DURATION
    if steps.num_rows == 0:
        detail["notes"].insert(
            0, "no NVTX step ranges (ProfilerStep#N, or --step-range): whole-report totals only"
        )
    return Parsed(format=FORMAT, tables=tables, detail=detail)


def _pairs(ex: Export, table: str, key: str, value: str) -> dict[str, str]:
    """Two columns of a small table as a dict of strings (empty when absent); rows with a NULL
    in either are left out."""
    t = ex.table(table)
    if t is None or not {key, value} <= ex.columns(t):
        return {}
    cols = ex.pick(t, key, value, text=(key, value))
    rows = ex.rows(f'SELECT {cols} FROM "{t}"')
    return {str(k): str(v) for k, v in rows if k is not None and v is not None}


def _ends_before_start(table: pa.Table) -> int:
    """Rows of `table` whose end precedes their start (stored with duration 0)."""
    if table.num_rows == 0:
        return 0
    return pc.sum(pc.less(table["end"], table["start"])).as_py() or 0


def _check_times(path: Path, table: pa.Table, base: int, what: str) -> None:
    """IngestError unless every start and end of `table` (plus `base`) is a time within the
    store's range: one clock writes them all, so one value outside, or none, means a corrupt
    export."""
    for col in ("start", "end"):
        if col not in table.column_names or table.num_rows == 0:
            continue
        if missing := table[col].null_count:
            raise IngestError(path, f"{what}: {missing:,} rows without a {col} time (corrupt)")
        lo, hi = pc.min_max(table[col]).values()
        lo, hi = lo.as_py(), hi.as_py()
        if lo is not None and not (0 <= lo + base and hi + base <= MAX_NS):
            raise IngestError(
                path,
                f"{what}: {col} times {lo:,}..{hi:,} ns (+{base:,}) fall outside {TIME_RANGE}",
            )


def _time_base(ex: Export, meta: dict[str, str]) -> tuple[int, str]:
    """(ns to add to export times, time_base): the session start; 0 when the export is already
    normalised to UTC (`--ts-normalize`) or has no session start (`unknown`)."""
    if meta.get("EXPORT_PARAM_TIME_NORMALIZE", "").lower() == "true":
        return 0, "session"
    t = ex.table("TARGET_INFO_SESSION_START_TIME")
    if t is None or "utcEpochNs" not in ex.columns(t):
        return 0, "unknown"
    rows = ex.rows(f'SELECT "utcEpochNs" FROM "{t}" WHERE "utcEpochNs" IS NOT NULL LIMIT 1')
    if not rows:
        return 0, "unknown"
    v = rows[0][0]
    if type(v) is not int or not 0 <= v <= MAX_NS:
        shown = repr(v)[:40]
        raise IngestError(ex.shown, f"{t}.utcEpochNs is {shown}, not a time within {TIME_RANGE}")
    return v, "session"


def _device_work(ex: Export) -> pa.Table:
    """Kernels, memcpy, memset and CUDA graph launches as DEVICE rows."""
    parts = [DEVICE.empty_table()]
    for table, (cat, extra) in DEVICE_TABLES.items():
        t = ex.table(table)
        if t is None:
            continue
        cols = ex.pick(t, "deviceId", "streamId", "correlationId", "start", "end", *extra)
        raw = ex.read(
            f'SELECT "globalPid" >> 24, {cols} FROM "{t}" WHERE "globalPid" IS NOT NULL',
            RAW_DEVICE,
        )
        keys = raw.select([n for n, _ in _KEYS])
        names = _names(ex, cat, raw)
        parts.append(
            keys.append_column("name", names).append_column("cat", pa.repeat(cat, len(raw)))
        )
    return pa.concat_tables(parts)


def _names(ex: Export, cat: str, raw: pa.Table) -> pa.Array:
    """Names in Kineto's style: demangled kernel names, `Memcpy HtoD (Pinned -> Device)`,
    `Memset (Device)`, `CUDA graph <id>`."""
    if cat == "kernel":
        a, b, c = (ex.strings(raw[k].combine_chunks()) for k in ("a", "b", "c"))
        return pc.coalesce(a, b, c, pa.scalar("kernel"))
    triples = list(zip(*(raw[k].to_pylist() for k in ("a", "b", "c")), strict=True))
    copy = _pairs(ex, "ENUM_CUDA_MEMCPY_OPER", "id", "name")
    mem = _pairs(ex, "ENUM_CUDA_MEM_KIND", "id", "label")
    labels = {}
    for t in set(triples):
        kind, src, dst = (str(x) for x in t)
        if cat == "cuda_graph":
            labels[t] = f"CUDA graph {kind}"
        elif cat == "gpu_memset":
            labels[t] = f"Memset ({mem[kind]})" if kind in mem else "Memset"
        elif kind not in copy:
            labels[t] = "Memcpy"
        elif src in mem and dst in mem:
            labels[t] = f"Memcpy {_short_copy(copy[kind])} ({mem[src]} -> {mem[dst]})"
        else:
            labels[t] = f"Memcpy {_short_copy(copy[kind])}"
    return pa.array([labels[t] for t in triples], STR)


def _short_copy(enum_name: str) -> str:
    """`CUDA_MEMCPY_KIND_HTOD` → `HtoD`, `CUDA_MEMCPY_KIND_UVM_DTOH` → `UVM DtoH`."""
    s = enum_name.removeprefix("CUDA_MEMCPY_KIND_").replace("_", " ")
    return re.sub(r"([A-Z])TO([A-Z])", r"\1to\2", s)


def _runtime(ex: Export) -> pa.Table:
    """CUDA runtime and driver calls as RUNTIME rows."""
    t = ex.table("CUPTI_ACTIVITY_KIND_RUNTIME")
    if t is None:
        return RUNTIME.empty_table()
    cols = ex.pick(t, "correlationId", "start", "end", "eventClass", "nameId")
    return ex.read(
        f'SELECT "globalTid" >> 24, "globalTid" & {PID_MASK}, {cols} '
        f'FROM "{t}" WHERE "globalTid" IS NOT NULL',
        RUNTIME,
    )


def _with_rank(t: pa.Table, ranks: dict[int, nsys_ranks.RankOf]) -> pa.Table:
    """`t` with a rank column from its proc; rows of processes without a rank are dropped."""
    keys = pa.array(sorted(ranks), I64)
    values = pa.array([ranks[k].rank for k in sorted(ranks)], I32)
    r = values.take(pc.index_in(t["proc"], value_set=keys))
    return t.append_column("rank", r).filter(pc.is_valid(r))


def _with_launch(device: pa.Table, runtime: pa.Table) -> pa.Table:
    """Adds launch_start and launch_tid: the runtime call with the same (process, correlation
    id); null when the call is not in the export."""
    calls = (
        runtime.filter(pc.is_valid(runtime["corr"]))
        .group_by(["proc", "corr"], use_threads=False)
        .aggregate([("start", "min"), ("tid", "min")])
        .rename_columns(["proc", "corr", "launch_start", "launch_tid"])
    )
    return device.join(calls, keys=["proc", "corr"], join_type="left outer", use_threads=False)


def _kinds(device: pa.Table, comm_re: re.Pattern[str]) -> pa.Array:
    """classify_gpu of every GPU activity (once per distinct cat and name); CUDA graphs
    (opaque) count as compute."""
    key = pc.binary_join_element_wise(device["cat"], pc.fill_null(device["name"], ""), "\x1f")
    distinct = pc.unique(key)
    kinds = []
    for k in distinct.to_pylist():
        cat, name = k.split("\x1f", 1)
        graph = cat == "cuda_graph"
        kinds.append(classify.COMPUTE if graph else classify.classify_gpu(cat, name, comm_re))
    return pa.array(kinds, STR).take(pc.index_in(key, value_set=distinct))


def _activities(**cols: pa.Array | pa.ChunkedArray) -> pa.Table:
    """An activities table from named columns: absent ones are null, `dur` is clipped at 0."""
    n = len(cols["ts"])
    cols["dur"] = pc.max_element_wise(cols["dur"], 0)
    arrays = [
        pc.cast(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type) for f in ACTIVITIES
    ]
    return pa.table(arrays, schema=ACTIVITIES)


def _device_activities(device: pa.Table, kinds: pa.Array, base: int) -> pa.Table:
    start = device["start"]
    return _activities(
        rank=device["rank"],
        ts=pc.add(start, base),
        dur=pc.subtract(device["end"], start),
        kind=kinds,
        cat=device["cat"],
        name=device["name"],
        pid=device["device"],
        tid=device["stream"],
        stream=device["stream"],
        correlation=device["corr"],
        launch_ts=pc.add(pc.coalesce(device["launch_start"], start), base),
    )


def _runtime_activities(ex: Export, runtime: pa.Table, base: int) -> pa.Table:
    classes = _pairs(ex, "ENUM_NSYS_EVENT_CLASS", "name", "id")
    given = classes.get("TRACE_PROCESS_EVENT_CUDA_DRIVER", "")
    driver = int(given) if given.isascii() and given.isdigit() and len(given) < 10 else 1
    is_driver = pc.equal(runtime["event_class"], driver).fill_null(False)
    names = ex.strings(runtime["name_id"].combine_chunks())
    ts = pc.add(runtime["start"], base)
    n = runtime.num_rows
    return _activities(
        rank=runtime["rank"],
        ts=ts,
        dur=pc.subtract(runtime["end"], runtime["start"]),
        kind=pa.repeat(classify.OTHER, n),
        cat=pc.if_else(is_driver, "cuda_driver", "cuda_runtime"),
        name=pc.replace_substring_regex(names, _API_VERSION.pattern, ""),
        pid=pc.bit_wise_and(runtime["proc"], PID_MASK),
        tid=runtime["tid"],
        correlation=runtime["corr"],
        launch_ts=ts,
    )


def _nvtx_activities(ranges: pa.Table, base: int) -> pa.Table:
    """NVTX ranges: cat `nvtx` (default domain) or `nvtx:<domain>`."""
    ts = pc.add(ranges["start"], base)
    return _activities(
        rank=ranges["rank"],
        ts=ts,
        dur=pc.subtract(ranges["end"], ranges["start"]),
        kind=pa.repeat(classify.OTHER, ranges.num_rows),
        cat=pc.coalesce(pc.binary_join_element_wise("nvtx:", ranges["domain"], ""), "nvtx"),
        name=ranges["name"],
        pid=pc.bit_wise_and(ranges["proc"], PID_MASK),
        tid=ranges["tid"],
        launch_ts=ts,
    )


def _processes(ex: Export, device: pa.Table) -> list[nsys_ranks.Process]:
    """The processes with GPU work, with their host and most used device."""
    hosts: dict[int, str] = {}
    t = ex.table("TARGET_INFO_SYSTEM_ENV")
    if t is not None and {"globalVid", "name", "value"} <= ex.columns(t):
        q = f'SELECT "globalVid" >> 48, {ex.pick(t, "value", text=("value",))} FROM "{t}" '
        q += "WHERE name = 'Hostname'"
        hosts = {vm: str(h) for vm, h in ex.rows(q)}
    only = next(iter(hosts.values())) if len(set(hosts.values())) == 1 else None
    counts = (
        device.group_by(["proc", "device"], use_threads=False)
        .aggregate([("start", "count")])
        .sort_by([("proc", "ascending"), ("device", "ascending")])
    )
    top: dict[int, tuple[int | None, int]] = {}  # proc → (most used device, its count)
    for proc, dev, n in zip(*(counts[c].to_pylist() for c in counts.column_names), strict=True):
        if dev is not None and not 0 <= dev <= DEVICE_MAX:
            dev = None  # a device id no GPU has (corrupt row): no device
        if proc not in top or n > top[proc][1]:
            top[proc] = (dev, n)
    return [
        nsys_ranks.Process(proc, proc & PID_MASK, hosts.get(proc >> 24, only), dev)
        for proc, (dev, _) in sorted(top.items())
    ]


def _ranks_table(
    procs: list[nsys_ranks.Process],
    ranks: dict[int, nsys_ranks.RankOf],
    gpus: pa.Table,
    time_base: str,
    nccl: bool,
) -> pa.Table:
    gpu_names = dict(zip(gpus["device"].to_pylist(), gpus["name"].to_pylist(), strict=True))
    rows: dict[str, list] = {f.name: [] for f in RANKS}
    for p in sorted(procs, key=lambda q: ranks[q.proc].rank):
        r = ranks[p.proc]
        row = {
            "rank": r.rank,
            "host": p.host,
            "pid": p.pid,
            "device": p.device,
            "gpu_name": gpu_names.get(p.device),
            "world_size": r.world_size,
            "backend": "nccl" if nccl else None,
            "time_base": time_base,
            "rank_source": r.source,
        }
        for f in RANKS.names:
            rows[f].append(row.get(f))
    return pa.table(rows, schema=RANKS)


def _detail(
    ex: Export,
    meta: dict[str, str],
    base: int,
    time_base: str,
    counts: Counter,
    runtime: pa.Table,
    nvtx: nsys_nvtx.Nvtx,
    procs: list[nsys_ranks.Process],
    ranks: dict[int, nsys_ranks.RankOf],
) -> dict:
    """Facts about the file for `files.detail`: versions, time base, counts, what is missing."""
    notes = []
    if "DERIVED_WINDOW_NS" in meta:
        notes.append(f"time slice {meta['DERIVED_WINDOW_NS']} ns of {meta.get('DERIVED_FROM')}")
    if counts["cuda_graph"]:
        notes.append(
            "CUDA graphs traced whole (--cuda-graph-trace=graph): their kernels are absent and "
            "each graph launch counts as one compute interval"
        )
    if nvtx.nccl_domain != "absent" and not nvtx.payloads:
        notes.append("no NCCL payloads (export with --include-blobs=true for sizes and ranks)")
    if meta.get("EXPORT_PARAM_TIME_SHIFT", "0") not in ("0", ""):
        notes.append(f"exported with --ts-shift={meta['EXPORT_PARAM_TIME_SHIFT']}: kept in times")
    if time_base == "unknown":
        notes.append("no session start time: timestamps are offsets, not epoch ns")
    names = _pairs(ex, "PROCESSES", "pid", "name")
    return {
        "time_base": time_base,
        "session_start_ns": base,
        "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
        "export_schema": meta.get("EXPORT_SCHEMA_VERSION"),
        "rows": {
            "kernels": counts["kernel"],
            "memcpy": counts["gpu_memcpy"],
            "memset": counts["gpu_memset"],
            "cuda_graphs": counts["cuda_graph"],
            "runtime_calls": runtime.num_rows,
            "nvtx_ranges": nvtx.ranges.num_rows,
        },
        "missing_tables": [t for t in WANTED if ex.table(t) is None],
        "processes": [
            {
                "pid": p.pid,
                "name": names.get(str(p.pid)),
                "device": p.device,
                "rank": ranks[p.proc].rank,
                "rank_source": ranks[p.proc].source,
            }
            for p in procs
        ],
        "rank_source": ", ".join(sorted({r.source for r in ranks.values()})),
        "nccl_domain": nvtx.nccl_domain,
        "nccl_payloads": len(nvtx.payloads),
        "unclosed_nvtx_ranges": nvtx.unclosed,
        "notes": notes,
    }
