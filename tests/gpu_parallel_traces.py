"""Kineto traces in the modern GPU layout (tests/gpu_mesh_traces.py) of a fully sharded data
parallel job and of a mixture-of-experts job, with the truth by construction: every kernel's
start and end comes from simulating the schedule below, and the truth (each call's group, each
rank's wait per step, the step, the all-to-alls' bytes per rank pair) is read from that
simulation and the routing table, never from commwall.

Layout: as tests/gpu_mesh_traces.py (a `record_param_comms` with the process group's args
enclosing the launch of the NCCL kernel, which carries the same args), with the names PyTorch
2.x writes for these collectives on NCCL:

* FSDP2 (`fully_shard` on a 1-d DeviceMesh named `dp_shard`): parameters gathered by
  `_allgather_base` (`ncclDevKernel_AllGather_RING_LL`: In msg nelems the shard, Out msg
  nelems the shard x ranks), gradients reduce-scattered by `_reduce_scatter_base`
  (`ncclDevKernel_ReduceScatter_Sum_f32_RING_LL`: In msg nelems the whole, Out the shard), all
  in the group `mesh_dp_shard` on its NCCL stream;
* expert parallel (a DeviceMesh dimension `ep`): token dispatch and combine by
  `all_to_all_single`, recorded as `all_to_all` with `In split size` / `Out split size` the
  rows sent to / received from each rank of the group; NCCL runs it as grouped sends and
  receives, so the kernel is `ncclDevKernel_SendRecv`.

Simulation (per step; every step the same, starting together GAP_US after the slowest rank's
end): a rank has a compute stream and the group's NCCL stream, each running its kernels in
program order. A kernel starts when its stream is free, when its host issued it (`issue`: the
start or end of an earlier kernel of the rank, as FSDP2 prefetches the next all-gather when a
layer's compute starts) and after the kernels it needs (`deps`) ended. A collective ends on
every rank of its group together, its transfer time after the last rank arrived (started its
kernel); a rank's *wait* in it is the last arrival minus its own.

FSDP (`Fsdp`, L layers, `world` ranks, the compute of rank `slow` x SLOW): forward all-gather
0 at the step's start, then per layer i: all-gather i+1 issued when F(i) starts, F(i) after
all-gather i; backward (parameters resharded after forward): all-gather L-1 when the forward
ends, then per layer i from the last: all-gather i-1 issued when B(i) starts, B(i) after
all-gather i, reduce-scatter i issued when B(i) ends; the optimizer after reduce-scatter 0.

MoE (`Moe`, L MoE layers forward then backward, `world` ranks in one `ep` group): per layer
attention, dispatch all-to-all, experts, combine all-to-all (the next layer's attention after
it). Routing: every rank sends HOT_FACTOR x BASE_ROWS token rows to rank `hot` and BASE_ROWS
to every other rank (itself included): in the dispatch, the hot rank receives 3x the mean of
the rows the ranks receive from the others. The combine sends every row back. A rank's expert
compute is EXPERT_US x the rows it received / the mean rows received, so the hot rank computes
longest and the others wait for it in the combine. An all-to-all's transfer takes
A2A_NS_PER_ROW x the most rows one rank of the instance sends or receives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpu_mesh_traces import BASE_NS, GEMM, US, Call, _x, write_ranks

FIRST_STEP = 7
GAP_US = 40
F_US, B_US, OPT_US, AG_US, RS_US = 100, 200, 30, 30, 40
SLOW = 2.0
ATTN_US, EXPERT_US = 60, 80
BASE_ROWS, HOT_FACTOR, HIDDEN = 128, 9, 1024
A2A_NS_PER_ROW = 20
SHARD = 1 << 18  # elements of one layer's parameter shard
KERNEL = {
    "allgather": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "reduce_scatter": "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "alltoall": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
}  # fmt: skip
#: The `Collective name` record_param_comms writes for each op.
COLL_NAME = {"allgather": "_allgather_base", "reduce_scatter": "_reduce_scatter_base",
             "alltoall": "all_to_all"}  # fmt: skip
STREAM = {"compute": 7, "comm": 24}


@dataclass
class Item:
    """A kernel of a rank's program (times ns from the step's start, simulated)."""

    name: str
    kind: str  # 'compute' | 'allgather' | 'reduce_scatter' | 'alltoall'
    dur: int = 0  # compute only
    issue: tuple[str, str] | None = None  # (item, 'start' | 'end'): when the host issues it
    deps: list[str] = field(default_factory=list)  # items that must have ended
    xfer: int = 0  # a collective's transfer after the last arrival
    in_nelems: int = 0
    out_nelems: int = 0
    in_splits: list[int] = field(default_factory=list)  # all-to-all: rows to each rank
    out_splits: list[int] = field(default_factory=list)  # rows from each rank
    start: int | None = None
    end: int | None = None
    wait: int = 0  # a collective's: last arrival - own arrival

    @property
    def stream(self) -> str:
        return "compute" if self.kind == "compute" else "comm"


@dataclass
class Job:
    """A job of `world` ranks in one process group (`pg_desc`), `steps` steps."""

    world: int = 4
    steps: int = 3
    pg_name: str = "1"
    pg_desc: str = ""
    role: str = ""  # the role commwall should give the group
    programs: dict[int, list[Item]] = field(default_factory=dict)
    span: int = 0

    def program(self, r: int) -> list[Item]:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- truth ------------------------------------------------------------------------------
    def step_ns(self) -> int:
        """The step: the slowest rank's end plus the gap to the next step."""
        return self.span + GAP_US * US

    def step_start(self, k: int) -> int:
        return BASE_NS + 10_000 * US + k * self.step_ns()

    def colls(self, r: int) -> list[Item]:
        return [it for it in self.programs[r] if it.kind != "compute"]

    def wait_ns(self, r: int) -> int:
        """The rank's wait per step: over its calls, the last arrival minus its own."""
        return sum(it.wait for it in self.colls(r))

    @property
    def calls(self) -> dict[int, list[Call]]:
        """Every call of every step as gpu_mesh_traces.Call (absolute ns); `role` is the
        dimension key (FSDP split into 'FSDP all-gather' and 'FSDP reduce-scatter')."""
        out: dict[int, list[Call]] = {}
        for r in self.programs:
            mine = self.colls(r)
            out[r] = [
                Call(self.key(it), self.pg_name, list(range(self.world)), k * len(mine) + j,
                     self.step_start(k) + it.start, self.step_start(k) + it.end)  # type: ignore[operator]
                for k in range(self.steps) for j, it in enumerate(mine)
            ]  # fmt: skip
        return out

    @property
    def compute(self) -> dict[int, list[tuple[int, int]]]:
        """Every compute kernel's interval (absolute ns)."""
        return {
            r: [(self.step_start(k) + it.start, self.step_start(k) + it.end)  # type: ignore[operator]
                for k in range(self.steps) for it in prog if it.kind == "compute"]
            for r, prog in self.programs.items()
        }  # fmt: skip

    def key(self, it: Item) -> str:
        return self.role


@dataclass
class Fsdp(Job):
    """FSDP2 over `world` ranks, `layers` layers; rank `slow` computes SLOW x (None: none)."""

    layers: int = 3
    slow: int | None = None
    pg_desc: str = "mesh_dp_shard"
    role: str = "FSDP"

    def key(self, it: Item) -> str:
        return "FSDP all-gather" if it.kind == "allgather" else "FSDP reduce-scatter"

    def program(self, r: int) -> list[Item]:
        f = SLOW if r == self.slow else 1.0
        n, full = self.layers, SHARD * self.world

        def ag(name: str, issue: tuple[str, str] | None) -> Item:
            return Item(name, "allgather", issue=issue, xfer=AG_US * US, in_nelems=SHARD,
                        out_nelems=full)  # fmt: skip

        def comp(name: str, us: float, deps: list[str]) -> Item:
            return Item(name, "compute", dur=round(us * f * US), deps=deps)

        items = [ag("agf0", None)]
        for i in range(n):
            if i + 1 < n:
                items.append(ag(f"agf{i + 1}", (f"F{i}", "start")))
            items.append(comp(f"F{i}", F_US, [f"agf{i}"]))
        items.append(ag(f"agb{n - 1}", (f"F{n - 1}", "end")))
        for i in reversed(range(n)):
            if i > 0:
                items.append(ag(f"agb{i - 1}", (f"B{i}", "start")))
            items.append(comp(f"B{i}", B_US, [f"agb{i}"]))
            items.append(Item(f"rs{i}", "reduce_scatter", issue=(f"B{i}", "end"),
                              xfer=RS_US * US, in_nelems=full, out_nelems=SHARD))  # fmt: skip
        items.append(comp("opt", OPT_US, ["rs0"]))
        return items


@dataclass
class Moe(Job):
    """Expert parallel over `world` ranks, `layers` MoE layers; rank `hot` gets HOT_FACTOR x
    the rows of the others from every rank."""

    layers: int = 2
    hot: int = 1
    pg_desc: str = "mesh_ep"
    role: str = "EP"

    def rows(self, src: int, dst: int) -> int:
        """Token rows rank `src` dispatches to rank `dst`."""
        return BASE_ROWS * (HOT_FACTOR if dst == self.hot else 1)

    def received_rows(self, r: int) -> int:
        """Rows rank `r` receives in one dispatch (its own included)."""
        return sum(self.rows(s, r) for s in range(self.world))

    def pair_bytes(self) -> dict[tuple[int, int], int]:
        """Bytes each rank sends each other rank (itself aside) over all all-to-alls of the
        traces: per layer, forward and backward, a dispatch (rows(src, dst)) and a combine
        (rows(dst, src) back)."""
        n = 2 * self.layers * self.steps  # dispatches (and as many combines)
        return {(s, d): n * (self.rows(s, d) + self.rows(d, s)) * HIDDEN * 2
                for s in range(self.world) for d in range(self.world) if s != d}  # fmt: skip

    def program(self, r: int) -> list[Item]:
        mean = sum(self.received_rows(d) for d in range(self.world)) / self.world
        send = [self.rows(r, d) for d in range(self.world)]
        recv = [self.rows(s, r) for s in range(self.world)]
        most = max(max(sum(self.rows(s, d) for s in range(self.world)),
                       sum(self.rows(d, s) for s in range(self.world)))
                   for d in range(self.world))  # fmt: skip
        xfer = A2A_NS_PER_ROW * most
        items: list[Item] = []
        prev: list[str] = []
        for phase, scale in (("f", 1.0), ("b", 2.0)):
            for i in range(self.layers):
                p = f"{phase}{i}"
                items.append(Item(f"attn{p}", "compute", dur=round(ATTN_US * scale * US),
                                  deps=prev))  # fmt: skip
                for name, ins, outs, after in (
                    (f"dispatch{p}", send, recv, f"attn{p}"),
                    (f"combine{p}", recv, send, f"expert{p}"),
                ):
                    items.append(
                        Item(
                            name,
                            "alltoall",
                            issue=(after, "end"),
                            xfer=xfer,
                            in_nelems=sum(ins) * HIDDEN,
                            out_nelems=sum(outs) * HIDDEN,
                            in_splits=ins,
                            out_splits=outs,
                        )  # fmt: skip
                    )
                    if name.startswith("dispatch"):
                        us = EXPERT_US * scale * self.received_rows(r) / mean
                        items.append(Item(f"expert{p}", "compute", dur=round(us * US),
                                          deps=[name]))  # fmt: skip
                prev = [f"combine{p}"]
        return items


def build(job: Job) -> Job:
    """Fills `job.programs` with every kernel's simulated start and end (ns from the step's
    start) and every call's wait, and `job.span`."""
    progs = {r: job.program(r) for r in range(job.world)}
    by_name = {r: {it.name: it for it in p} for r, p in progs.items()}
    before: dict[tuple[int, str], Item | None] = {}  # the previous kernel of the same stream
    for r, prog in progs.items():
        last: dict[str, Item | None] = {"compute": None, "comm": None}
        for it in prog:
            before[r, it.name], last[it.stream] = last[it.stream], it
    arrivals: dict[str, dict[int, int]] = {}
    left = sum(len(p) for p in progs.values())
    while left:
        moved = False
        for r, prog in progs.items():
            for it in prog:
                if it.start is None:
                    prev = before[r, it.name]
                    at = [0 if prev is None else prev.end]
                    if it.issue is not None:
                        ref = by_name[r][it.issue[0]]
                        at.append(ref.start if it.issue[1] == "start" else ref.end)
                    at += [by_name[r][d].end for d in it.deps]
                    if any(t is None for t in at):
                        continue
                    it.start = max(t for t in at if t is not None)
                    moved = True
                    if it.kind == "compute":
                        it.end = it.start + it.dur
                        left -= 1
                        continue
                    arrivals.setdefault(it.name, {})[r] = it.start
                if it.end is None:
                    got = arrivals.get(it.name, {})
                    if len(got) < job.world:
                        continue
                    it.end = max(got.values()) + it.xfer
                    it.wait = max(got.values()) - it.start
                    left -= 1
                    moved = True
        if not moved:
            raise RuntimeError("the schedule deadlocks")
    job.programs = progs
    job.span = max(it.end or 0 for p in progs.values() for it in p)
    return job


def _events(job: Job, r: int) -> list[dict]:
    """The rank's trace events (µs relative to BASE_NS)."""
    host, dev = 40_000 + r, r
    evs: list[dict] = []
    corr = 0
    ranks = list(range(job.world))
    colls = job.colls(r)
    for k in range(job.steps):
        t0 = job.step_start(k)
        evs.append(_x("user_annotation", f"ProfilerStep#{FIRST_STEP + k}", host, host,
                      t0 - 20 * US, job.step_ns(), {}))  # fmt: skip
        for it in job.programs[r]:
            ts, dur = t0 + it.start, it.end - it.start  # type: ignore[operator]
            # the host issues the kernel before it starts (at its issue time, at the latest)
            launch = ts - 5 * US
            corr += 1
            args: dict = {}
            if it.kind == "compute":
                name, stream = GEMM, STREAM["compute"]
            else:
                name, stream = KERNEL[it.kind], STREAM["comm"]
                seq = k * len(colls) + colls.index(it)
                args = {
                    "Collective name": COLL_NAME[it.kind],
                    "In msg nelems": it.in_nelems,
                    "Out msg nelems": it.out_nelems,
                    "Group size": job.world,
                    "dtype": "Float" if it.kind == "reduce_scatter" else "BFloat16",
                    "In split size": json.dumps(it.in_splits),
                    "Out split size": json.dumps(it.out_splits),
                    "Process Group Name": job.pg_name,
                    "Process Group Description": job.pg_desc,
                    "Process Group Ranks": json.dumps(ranks),
                    "Seq": seq,
                }
                evs.append(_x("cpu_op", "record_param_comms", host, host, launch - 1 * US,
                              4 * US, {"External id": corr, **args}))  # fmt: skip
            evs.append(_x("cuda_runtime", "cudaLaunchKernel", host, host, launch, 2 * US,
                          {"correlation": corr, "External id": corr}))  # fmt: skip
            evs.append(_x("kernel", name, dev, stream, ts, dur,
                          {"device": dev, "stream": stream, "correlation": corr,
                           "External id": corr, **args}))  # fmt: skip
    return sorted(evs, key=lambda e: e["ts"])


def groups(job: Job) -> list[dict]:
    """Every rank's pg_config: the default group and the job's group (the same ranks)."""
    ranks = list(range(job.world))
    return [
        {"pg_name": "0", "pg_desc": "default_pg", "pg_size": job.world, "ranks": ranks},
        {"pg_name": job.pg_name, "pg_desc": job.pg_desc, "pg_size": job.world, "ranks": ranks},
    ]


def write(job: Job, out: Path) -> list[Path]:
    """One `rank<r>.pt.trace.json` per rank in `out`."""
    return write_ranks(out, job.world, lambda _r: groups(job), lambda r: _events(job, r))
