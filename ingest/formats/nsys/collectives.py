"""Collective rows of an nsys export: one per communication kernel, named from its context.

A kernel's context is the NVTX ranges open on the thread that launched it, at the launch (the
CUDA runtime call with the same correlation id): PyTorch's `nccl:<op>` range (NVTX mode of the
profiler) names the op; else NCCL's own API range (`ncclAllReduce`, ...; for a group, the
calls between `ncclGroupStart` and the `ncclGroupEnd` that launches); else the kernel name.
Message sizes and group sizes come from NCCL payloads when the export has them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.collective_names import kernel_algo, kernel_op, normalize_op
from commwall.ingest.formats.nsys.nvtx import NCCL, Nvtx
from commwall.ingest.schema import COLLECTIVES

SIZE = "message size [bytes]"
COMM_ID = "nccl communicator id"
NRANKS = "no. of ranks"
#: Largest values the collectives table holds (group_size int32, bytes int64).
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
#: How far back on a thread to look for a group's calls.
GROUP_LOOKBACK = 8192
Described = tuple[str, int | None, int | None, int | None]


@lru_cache(maxsize=4096)
def _op(name: str) -> str:
    """The op an NVTX range names: `nccl:all_reduce, op_id = 7` → allreduce (PyTorch),
    `ncclAllReduce` → allreduce, `ncclSend` → send (NCCL); `unknown` otherwise."""
    if name.startswith("nccl:"):
        return normalize_op(name.split(",")[0])
    return normalize_op(name.removeprefix("nccl"))


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    name: str
    nccl_api: bool
    payload: dict[str, int] | None


class _Thread:
    """One thread's ranges sorted by start, each with its parent (the innermost range open when
    it starts), so that the ranges open at a time are found by walking up from the last one
    started."""

    def __init__(self, ranges: list[_Range]) -> None:
        self.ranges = sorted(ranges, key=lambda x: (x.start, -x.end))
        self.starts = [x.start for x in self.ranges]
        self.parent: list[int] = []
        stack: list[int] = []
        for i, x in enumerate(self.ranges):
            while stack and self.ranges[stack[-1]].end < x.start:
                stack.pop()
            self.parent.append(stack[-1] if stack else -1)
            stack.append(i)

    def open_at(self, t: int) -> list[int]:
        """Indices of the ranges open at `t`, innermost first."""
        out, i = [], bisect_right(self.starts, t) - 1
        while i >= 0:
            if self.ranges[i].end >= t:
                out.append(i)
            i = self.parent[i]
        return out

    def group_calls(self, i: int) -> list[_Range]:
        """The NCCL calls of the group that `ncclGroupEnd` range `i` closes (back to its
        matching `ncclGroupStart`)."""
        depth, calls = 0, []
        for x in reversed(self.ranges[max(0, i - GROUP_LOOKBACK) : i]):
            if not x.nccl_api:
                continue
            if x.name == "ncclGroupEnd":
                depth += 1
            elif x.name == "ncclGroupStart":
                if depth == 0:
                    break
                depth -= 1
            else:
                calls.append(x)
        return calls


class Context:
    """The communication-related NVTX ranges (PyTorch `nccl:*` and the NCCL domain) per
    thread, with their payloads."""

    def __init__(self, nvtx: Nvtx) -> None:
        r = nvtx.ranges
        keep = pc.or_(
            pc.starts_with(r["name"], "nccl:").fill_null(False),
            pc.equal(r["domain"], NCCL).fill_null(False),
        )
        r = r.filter(keep)
        per: dict[tuple[int, int], list[_Range]] = defaultdict(list)
        cols = [r[c].to_pylist() for c in ("proc", "tid", "start", "end", "name", "domain")]
        for proc, tid, start, end, name, dom in zip(*cols, strict=True):
            payload = nvtx.payloads.get((proc, tid, start))
            # a NCCL-domain range may have lost its text: it still marks the call, unnamed
            per[(proc, tid)].append(_Range(start, end, name or "", dom == NCCL, payload))
        self.threads = {k: _Thread(v) for k, v in per.items()}
        self.nranks = {
            p[COMM_ID]: p[NRANKS] for p in nvtx.payloads.values() if COMM_ID in p and NRANKS in p
        }

    def describe(self, proc: int, tid: int | None, t: int | None) -> Described:
        """(op, in_bytes, out_bytes, group_size) of a kernel launched at `t` by thread
        (proc, tid): the op from the innermost PyTorch `nccl:*` range, else from the innermost
        NCCL API range (a group: its calls); `unknown` when no range tells."""
        th = self.threads.get((proc, tid)) if t is not None and tid is not None else None
        if th is None or t is None:
            return "unknown", None, None, None
        open_ = th.open_at(t)
        torch = [th.ranges[i].name for i in open_ if th.ranges[i].name.startswith("nccl:")]
        api = next((i for i in open_ if th.ranges[i].nccl_api), None)
        calls: list[_Range] = []
        if api is not None:
            x = th.ranges[api]
            calls = th.group_calls(api) if x.name == "ncclGroupEnd" else [x]
        ops = {_op(x.name) for x in calls} - {"unknown"}
        op = _op(torch[0]) if torch else "unknown"
        if op == "unknown" and ops == {"send", "recv"}:
            op = "sendrecv"
        elif op == "unknown" and len(ops) == 1:
            op = ops.pop()
        sized = [(_op(x.name), x.payload) for x in calls if x.payload]
        sent = [p[SIZE] for o, p in sized if SIZE in p and o != "recv"]
        recv = [p[SIZE] for o, p in sized if SIZE in p and o == "recv"]
        comms = [p[COMM_ID] for _, p in sized if COMM_ID in p]
        group = self.nranks.get(comms[0]) if comms else None
        if group is not None and not 1 <= group <= INT32_MAX:
            group = None  # a payload decoded from corrupt bytes: no group size
        return op, _bytes(sent), _bytes(recv), group


def _bytes(sizes: list[int]) -> int | None:
    """The bytes of a call's payload sizes, None when there are none or their sum cannot be
    right (negative or beyond int64: a payload decoded from corrupt bytes)."""
    total = sum(sizes) if sizes else None
    return total if total is not None and 0 <= total <= INT64_MAX else None


def collectives(comm: pa.Table, base: int, ctx: Context, world: dict[int, int | None]) -> pa.Table:
    """One collectives row per communication kernel. `comm` holds the kernels (rank, proc,
    start, end, launch_start, launch_tid, name, stream; session ns), `base` makes times
    absolute, `world` maps a rank to its world size (the group size when no payload tells)."""
    ops, ins, outs, groups = [], [], [], []
    cols = ("rank", "proc", "launch_tid", "launch_start", "name")
    for rank, proc, tid, t, name in zip(*(comm[c].to_pylist() for c in cols), strict=True):
        op, in_b, out_b, group = ctx.describe(proc, tid, t)
        op = kernel_op(name) if op == "unknown" else op
        if out_b is None and in_b is not None and op in ("allreduce", "broadcast", "alltoall"):
            out_b = in_b
        ops.append(op)
        ins.append(in_b)
        outs.append(out_b)
        groups.append(group or world.get(rank))
    n, start = comm.num_rows, comm["start"]
    names = comm["name"].to_pylist()
    algos = {name: kernel_algo(name) for name in set(names)}
    data = {
        "rank": comm["rank"],
        "ts": pc.add(start, base),
        "dur": pc.max_element_wise(pc.subtract(comm["end"], start), 0),
        "launch_ts": pc.add(pc.coalesce(comm["launch_start"], start), base),
        "op": pa.array(ops, pa.string()),
        "name": comm["name"],
        "group_size": pa.array(groups, pa.int32()),
        "in_bytes": pa.array(ins, pa.int64()),
        "out_bytes": pa.array(outs, pa.int64()),
        "algo": pa.array([algos[x] for x in names], pa.string()),
        "stream": comm["stream"],
    }
    arrays = [
        pc.cast(data[f.name], f.type) if f.name in data else pa.nulls(n, f.type)
        for f in COLLECTIVES
    ]
    return pa.table(arrays, schema=COLLECTIVES).sort_by(
        [("rank", "ascending"), ("ts", "ascending")]
    )
