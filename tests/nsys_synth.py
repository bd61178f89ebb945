"""Synthetic traces for the nsys tests: one list of intervals written both as Kineto JSON traces
and as an nsys-shaped SQLite export, so the ground truth is known and the same in both formats.

The nsys side has only the tables and columns the parser reads (and nsys writes): StringIds,
CUPTI_ACTIVITY_KIND_{KERNEL,MEMCPY,RUNTIME}, NVTX_EVENTS, TARGET_INFO_*, META_DATA_*, PROCESSES,
ENUM_*; optionally NCCL NVTX ranges with extended payloads laid out as NCCL 2.25 declares them.
Times are ns relative to `Spec.base_ns` (absolute epoch ns).
"""

from __future__ import annotations

import json
import random
import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path

VM = 1 << 48
SESSION_OFFSET_NS = 10_000_000_000  # nsys times start this long after the session start
COMM_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_KERNELS = ("void gemm_kernel<float>(float*, int)", "void elementwise_kernel<128>(int)")
MEMCPY = "Memcpy DtoD (Device -> Device)"
NCCL_DOMAIN_ID = 1
COMM_INIT_SCHEMA, ALLREDUCE_SCHEMA = 16777218, 16777223
#: NVTX_PAYLOAD_SCHEMA_ENTRIES rows as NCCL 2.25 registers them (domainId, schemaId, idx, type,
#: name, offset): u64 communicator id first (offset NULL), ints, size_t message size.
SCHEMA_ENTRIES = [
    (COMM_INIT_SCHEMA, 0, 18, "NCCL communicator ID", None),
    (COMM_INIT_SCHEMA, 1, 5, "No. of ranks", 8),
    (COMM_INIT_SCHEMA, 2, 5, "Rank", 12),
    (COMM_INIT_SCHEMA, 3, 5, "CUDA device", 16),
    (ALLREDUCE_SCHEMA, 0, 18, "NCCL communicator ID", None),
    (ALLREDUCE_SCHEMA, 1, 22, "Message size [bytes]", 8),
    (ALLREDUCE_SCHEMA, 2, 16777232, "Reduction operation", 16),
]
COMM_ID = 0xC0FFEE
LONG_RANGE = "user range "  # text of the long NVTX ranges of write_nsys(long_text=...)


@dataclass
class Op:
    """One GPU activity: `kind` kernel | memcpy; launched by the host at [launch, launch_end)."""

    rank: int
    kind: str
    name: str
    start: int
    end: int
    stream: int
    launch: int
    launch_end: int
    corr: int
    size: int = 0


@dataclass
class Spec:
    """Ranks, their GPU activities and step windows (host ranges), in relative ns."""

    ranks: int
    ops: list[Op] = field(default_factory=list)
    steps: list[tuple[int, int, int, int]] = field(default_factory=list)  # rank, n, start, end
    base_ns: int = 1_760_000_000_000_000_000


class _Host:
    """One rank's host thread launching work onto streams 7 (compute, memcpy) and 13 (comm)."""

    def __init__(self, spec: Spec, rank: int, rng: random.Random) -> None:
        self.spec, self.rank, self.rng = spec, rank, rng
        self.t, self.corr = 1_000_000 + rng.randrange(50_000), 100
        self.free = {7: self.t, 13: self.t}  # when each stream is next idle

    def launch(self, kind: str, name: str, stream: int, dur: int, size: int = 0) -> None:
        start = max(self.free[stream], self.t + self.rng.randrange(3_000, 8_000))
        op = Op(
            self.rank,
            kind,
            name,
            start,
            start + dur,
            stream,
            self.t,
            self.t + 4_000,
            self.corr,
            size,
        )
        self.spec.ops.append(op)
        self.free[stream] = start + dur + self.rng.randrange(0, 15_000)
        self.t, self.corr = self.t + self.rng.randrange(6_000, 30_000), self.corr + 1


def make_spec(seed: int = 0, ranks: int = 2, steps: int = 3) -> Spec:
    """Random but plausible training steps: per step 4–8 compute kernels on stream 7, all-reduce
    kernels on stream 13 that may or may not overlap them, one memcpy; each kernel starts after
    its launch and after the previous one on its stream; the host waits for the GPU at the end
    of most steps (so GPU work sometimes spills into the next step)."""
    rng = random.Random(seed)
    spec = Spec(ranks)
    for r in range(ranks):
        h = _Host(spec, r, rng)
        for n in range(1, steps + 1):
            step_start = h.t
            h.t += 5_000
            for i in range(rng.randrange(4, 9)):
                h.launch("kernel", rng.choice(COMPUTE_KERNELS), 7, rng.randrange(30_000, 400_000))
                if i == 1 or rng.random() < 0.2:
                    size = rng.choice((1 << 20, 1 << 24))
                    h.launch("kernel", COMM_KERNEL, 13, rng.randrange(50_000, 500_000), size)
            h.launch("memcpy", MEMCPY, 7, rng.randrange(5_000, 40_000))
            if rng.random() < 0.7:
                h.t = max(h.t, *h.free.values()) + 2_000
            spec.steps.append((r, n, step_start, h.t))
            h.t += rng.randrange(1_000, 10_000)
    return spec


def _us(ns: int) -> float:
    return ns / 1000


def write_kineto(spec: Spec, out: Path) -> list[Path]:
    """One modern-format Kineto trace per rank (`rank<r>.pt.trace.json`)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(spec.ranks):
        pid = 1000 + r
        ev: list[dict] = [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{n}",
                "pid": pid,
                "tid": pid,
                "ts": _us(s),
                "dur": _us(e - s),
            }
            for rr, n, s, e in spec.steps
            if rr == r
        ]
        for o in (o for o in spec.ops if o.rank == r):
            call = "cudaLaunchKernel" if o.kind == "kernel" else "cudaMemcpyAsync"
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": call,
                    "pid": pid,
                    "tid": pid,
                    "ts": _us(o.launch),
                    "dur": _us(o.launch_end - o.launch),
                    "args": {"correlation": o.corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel" if o.kind == "kernel" else "gpu_memcpy",
                    "name": o.name,
                    "pid": r,
                    "tid": o.stream,
                    "ts": _us(o.start),
                    "dur": _us(o.end - o.start),
                    "args": {"correlation": o.corr, "device": r, "stream": o.stream},
                }
            )
        trace = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": spec.ranks},
            "baseTimeNanoseconds": spec.base_ns,
            "deviceProperties": [{"id": r, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": ev,
        }
        p = out / f"rank{r}.pt.trace.json"
        p.write_text(json.dumps(trace))
        paths.append(p)
    return paths


def _padded(text: str, n: int) -> str:
    return text + "x" * (n - len(text)) if n else text


def _blob(schema: int, payload: bytes) -> bytes:
    """An NVTX extended-payload blob: 32-byte header (domain, schema, size, offset), payload."""
    return struct.pack("<4Q", NCCL_DOMAIN_ID, schema, len(payload), 32) + payload


class _Db:
    def __init__(self, path: Path) -> None:
        self.con = sqlite3.connect(path)
        self.strings: dict[str, int] = {}

    def sid(self, s: str) -> int:
        return self.strings.setdefault(s, len(self.strings) + 1)

    def table(self, name: str, cols: str, rows: list[tuple]) -> None:
        self.con.execute(f"CREATE TABLE {name} ({cols})")
        if rows:
            marks = ", ".join("?" * len(rows[0]))
            self.con.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)


def write_nsys(
    spec: Spec,
    path: Path,
    *,
    ranks: list[int] | None = None,
    device_of: dict[int, int] | None = None,
    payloads: bool = False,
    torch_ranges: bool = False,
    env_rank: bool = False,
    kernel_table: str = "CUPTI_ACTIVITY_KIND_KERNEL",
    without: tuple[str, ...] = (),
    normalized: bool = False,
    long_text: int = 0,
) -> Path:
    """An nsys-shaped export holding `ranks` (default all) as processes 1000 + rank on device
    `device_of[rank]` (default: the rank). `payloads` adds NCCL domain ranges with payload
    blobs (communicator init giving the rank, all-reduce message sizes); `torch_ranges` adds
    PyTorch's `nccl:all_reduce` ranges; `env_rank` records RANK in the captured environment;
    `without` leaves tables out; `normalized` writes epoch times, as `--ts-normalize=true`;
    `long_text` > 0 makes a crafted export: a user NVTX range `LONG_RANGE` + that many "x"
    around every step (its text inline, as nsys writes NVTX text), and host, GPU and process
    names padded to that many characters."""
    off = spec.base_ns if normalized else SESSION_OFFSET_NS
    ranks = list(range(spec.ranks)) if ranks is None else ranks
    device_of = device_of or {r: r for r in ranks}
    db = _Db(path)
    kern, mcpy, rt, nvtx = [], [], [], []
    for o in (o for o in spec.ops if o.rank in ranks):
        gpid = VM | (1000 + o.rank) << 24
        tid = gpid | (1000 + o.rank)
        s, e = o.start + off, o.end + off
        ls, le = o.launch + off, o.launch_end + off
        if o.kind == "kernel":
            short = o.name.split("(")[0].split()[-1].split("<")[0]
            kern.append(
                (s, e, device_of[o.rank], 1, o.stream, o.corr, gpid, db.sid(o.name), db.sid(short))
            )
            rt.append((ls, le, 0, tid, o.corr, db.sid("cudaLaunchKernel_v7000")))
        else:
            mcpy.append((s, e, device_of[o.rank], o.stream, o.corr, gpid, 1 << 20, 8, 2, 2))
            rt.append((ls, le, 0, tid, o.corr, db.sid("cudaMemcpyAsync_v3020")))
        if o.name.startswith("nccl") and torch_ranges:
            nvtx.append(
                (ls - 2_000, le + 2_000, 59, "nccl:all_reduce, op_id = 7", tid, None, None, 0, None)
            )
        if o.name.startswith("nccl") and payloads:
            blob = _blob(ALLREDUCE_SCHEMA, struct.pack("<QQI4x", COMM_ID, o.size, 0))
            nvtx.append(
                (ls - 1_000, le + 1_000, 59, "ncclAllReduce", tid, None, None, NCCL_DOMAIN_ID, blob)
            )
    for r, n, s, e in spec.steps:
        if r in ranks:
            tid = VM | (1000 + r) << 24 | (1000 + r)
            nvtx.append(
                (
                    s + off,
                    e + off,
                    59,
                    None,
                    tid,
                    None,
                    db.sid(f"ProfilerStep#{n}"),
                    0,
                    None,
                )
            )
            if long_text:
                text = LONG_RANGE + "x" * long_text
                nvtx.append((s + off, e + off, 59, text, tid, None, None, 0, None))
    if payloads:
        for r in ranks:
            tid = VM | (1000 + r) << 24 | (1000 + r)
            init = struct.pack("<Qiii4x", COMM_ID, spec.ranks, r, device_of[r])
            nvtx.append(
                (
                    100,
                    200,
                    59,
                    "ncclCommInitRank",
                    tid,
                    None,
                    None,
                    NCCL_DOMAIN_ID,
                    _blob(COMM_INIT_SCHEMA, init),
                )
            )
            nvtx.append((50, None, 75, "NCCL", tid, None, None, NCCL_DOMAIN_ID, None))
    tables = {
        kernel_table: (
            "start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, "
            "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
            "demangledName INTEGER, shortName INTEGER",
            kern,
        ),
        "CUPTI_ACTIVITY_KIND_MEMCPY": (
            "start INTEGER, end INTEGER, deviceId INTEGER, "
            "streamId INTEGER, correlationId INTEGER, "
            "globalPid INTEGER, bytes INTEGER, copyKind INTEGER, "
            "srcKind INTEGER, dstKind INTEGER",
            mcpy,
        ),
        "CUPTI_ACTIVITY_KIND_RUNTIME": (
            "start INTEGER, end INTEGER, eventClass INTEGER, "
            "globalTid INTEGER, correlationId INTEGER, "
            "nameId INTEGER",
            rt,
        ),
        "NVTX_EVENTS": (
            "start INTEGER, end INTEGER, eventType INTEGER, text TEXT, "
            "globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
            "domainId INTEGER, binaryData TEXT",
            nvtx,
        ),
        "TARGET_INFO_SESSION_START_TIME": (
            "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
            [(spec.base_ns - SESSION_OFFSET_NS, "", "")],
        ),
        "META_DATA_EXPORT": (
            "name TEXT, value TEXT",
            [
                ("EXPORT_PRODUCT_VERSION", "synthetic"),
                ("EXPORT_SCHEMA_VERSION", "3.16.1"),
                ("EXPORT_PARAM_TIME_NORMALIZE", str(normalized).lower()),
            ],
        ),
        "META_DATA_CAPTURE": (
            "name TEXT, value TEXT",
            [("PROCESS_0:ENVIRONMENT_VARIABLE", f'RANK="{r}"') for r in ranks if env_rank],
        ),
        "PROCESSES": (
            "globalPid INTEGER, pid INTEGER, name TEXT",
            [(VM | (1000 + r) << 24, 1000 + r, _padded("python3", long_text)) for r in ranks],
        ),
        "TARGET_INFO_GPU": (
            "vmId INTEGER, id INTEGER, name TEXT, smCount INTEGER",
            [(VM, device_of[r], _padded("NVIDIA H100 80GB HBM3", long_text), 132) for r in ranks],
        ),
        "TARGET_INFO_SYSTEM_ENV": (
            "globalVid INTEGER, devStateName TEXT, name TEXT, nameEnum INTEGER, value TEXT",
            [(VM, "Local", "Hostname", 619, _padded("synthhost", long_text))],
        ),
        "ENUM_CUDA_MEMCPY_OPER": (
            "id INTEGER, name TEXT, label TEXT",
            [(8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device")],
        ),
        "ENUM_CUDA_MEM_KIND": (
            "id INTEGER, name TEXT, label TEXT",
            [(2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device")],
        ),
    }
    if payloads:
        tables["NVTX_PAYLOAD_SCHEMA_ENTRIES"] = (
            "domainId INTEGER, schemaId INTEGER, idx INTEGER, flags INTEGER, type INTEGER, "
            "name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER",
            [
                (NCCL_DOMAIN_ID, s, i, None, t, n, None, None, off)
                for s, i, t, n, off in SCHEMA_ENTRIES
            ],
        )
    for name, (cols, rows) in tables.items():
        if name not in without and (rows or name.startswith(("TARGET", "META"))):
            db.table(name, cols, rows)
    db.table(
        "StringIds", "id INTEGER PRIMARY KEY, value TEXT", [(i, s) for s, i in db.strings.items()]
    )
    db.con.commit()
    db.con.close()
    return path


# Ground-truth helpers: plain-Python interval algebra, independent of the store.


def union(intervals: list[tuple[int, int]]) -> list[list[int]]:
    """Disjoint union of [start, end) intervals."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        elif e > s:
            out.append([s, e])
    return out


def length(u: list[list[int]]) -> int:
    return sum(e - s for s, e in u)


def overlap(a: list[list[int]], b: list[list[int]]) -> int:
    """Length of the intersection of two disjoint unions (two pointers)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
