"""Kineto traces of a GPU pipeline (PP, optionally PP x DP) in the modern layout, with the truth
by construction: every kernel's start and end comes from simulating the schedule below, and the
truth (each stage's compute, each receive's wait, the waiting per rank and step, the step) is
read from that simulation, never from commwall.

Layout (as PyTorch 2.x writes it on NCCL; the GPU helpers of tests/gpu_mesh_traces.py):

* a send / receive not batched: `c10d::send` / `c10d::recv_` op enclosing `record_param_comms`
  (args `Collective name` `send` / `recv`, `In msg nelems`, `Out msg nelems`, `dtype`,
  `Group size`, `Process Group Name`, `Process Group Description`, `Process Group Ranks`,
  `Rank` (the peer in the group), `Dst Rank` / `Src Rank` (the peer, global: PyTorch's
  saveNcclMeta writes `Dst Rank` for a send and `Src Rank` for a receive, from the group's
  ranks), `Seq`) enclosing the `cuLaunchKernelEx` of an `ncclDevKernel_SendRecv` kernel, which
  carries the same collective args;
* batched isend / irecv (`batch_isend_irecv`: ProcessGroupNCCL's coalescing): one
  `c10d::send` / `c10d::recv_` op with its `record_param_comms` per p2p op, none of which
  launches anything, then `nccl:coalesced` enclosing the launch of ONE `ncclDevKernel_SendRecv`
  kernel for the whole group (endCoalescing's ncclGroupEnd). Assumed: that kernel's args name
  no collective and no peer (the ops' record_param_comms have closed when it is launched).

Schedule (per step, device times from the step's start; every rank runs its program in order,
a compute kernel after the p2p kernel before it has ended, as Megatron waits on every p2p
request at once): stage s of p, micro-batch i of m, forward F (F_US, × SLOW on the slow
stage) and backward B (B_US, × SLOW), both × `scale` (0.5 with twice the micro-batches: the
same batch in smaller pieces). GPipe: all forwards (recv activation from s − 1, F,
send to s + 1) then all backwards (recv gradient from s + 1, B, send to s − 1). 1F1B: p − s − 1
warm-up forwards, then one forward and one backward at a time, then the cool-down backwards.
The sends after one compute and the receives before the next form one comm point: batched, one
kernel for all of them (a GPipe point sends forward and receives from behind: two peers); not
batched, one kernel each, sends first. A p2p kernel starts when its rank reaches it and each of
its ops ends XFER_US after both sides have started (NCCL's rendezvous: a receive waits for the
send's kernel, a send for the receive's; XFER_US × `scale`); the kernel ends with its last op. With dp > 1, each
stage's ranks all-reduce their gradients after the last backward (ARED_US after the last
arrives); then every rank joins a small all-reduce of the whole world (NORM_US: the gradient
norm's, as Megatron's clipping does), which closes the step. Ranks: rank = s * dp + d; pipeline d = ranks {s * dp + d}; DP group of stage s =
{s * dp + d}. Steps follow each other GAP_US after the slowest rank's end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpu_mesh_traces import BASE_NS, GEMM, US, _x, write_ranks

FIRST_STEP = 3
F_US, B_US, XFER_US, ARED_US, NORM_US, GAP_US = 100, 200, 10, 30, 10, 40
SLOW = 2.0
SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
STREAM = {"compute": 7, "PP": 20, "DP": 24, "world": 28}
NELEMS = 1 << 18


@dataclass
class Op:
    """One p2p op of a comm point: direction, global peer, and the message (channel, number)."""

    way: str  # 'send' | 'recv'
    peer: int
    key: tuple[int, int, str, int]  # (src, dst, 'act' | 'grad', micro-batch)


@dataclass
class Item:
    """A kernel of a rank's program: compute, a p2p kernel (ops) or the DP all-reduce."""

    kind: str  # 'compute' | 'p2p' | 'allreduce'
    group: str = ""  # an all-reduce's: 'DP' (gradients) or 'world' (the step's closing one)
    dur: int = 0  # compute only, ns
    ops: list[Op] = field(default_factory=list)
    batched: bool = False
    start: int | None = None  # ns from the step's start (simulated)
    end: int | None = None
    waits: list[int] = field(default_factory=list)  # per op: time before its partner started


@dataclass
class Pipe:
    """The job: p stages, m micro-batches, schedule, batching, slow stage, dp replicas."""

    p: int = 2
    m: int = 4
    schedule: str = "gpipe"  # 'gpipe' | '1f1b'
    batched: bool = False
    slow: int | None = None
    dp: int = 1
    steps: int = 3
    scale: float = 1.0  # every micro-batch's compute and transfer × scale (0.5: the 2m variant)
    programs: dict[int, list[Item]] = field(default_factory=dict)
    span: int = 0  # ns: the slowest rank's end in a step

    @property
    def world(self) -> int:
        return self.p * self.dp

    def rank(self, s: int, d: int) -> int:
        return s * self.dp + d

    def stage(self, r: int) -> int:
        return r // self.dp

    def pp_group(self, r: int) -> tuple[str, list[int]]:
        d = r % self.dp
        return str(1 + d), [self.rank(s, d) for s in range(self.p)]

    def dp_group(self, r: int) -> tuple[str, list[int]]:
        s = self.stage(r)
        return str(1 + self.dp + s), [self.rank(s, d) for d in range(self.dp)]

    def groups(self, r: int) -> list[dict]:
        (pn, pr), (dn, dr) = self.pp_group(r), self.dp_group(r)
        out = [
            {"pg_name": "0", "pg_desc": "default_pg", "pg_size": self.world,
             "ranks": list(range(self.world))},
            {"pg_name": pn, "pg_desc": "mesh_pp", "pg_size": len(pr), "ranks": pr},
        ]  # fmt: skip
        if self.dp > 1:
            out.append({"pg_name": dn, "pg_desc": "mesh_dp", "pg_size": len(dr), "ranks": dr})
        return out

    def step_start(self, k: int) -> int:
        return BASE_NS + 10_000 * US + k * (self.span + GAP_US * US)

    # -- truth ------------------------------------------------------------------------------
    def compute_ns(self, r: int) -> int:
        """The rank's compute per step."""
        return sum(it.dur for it in self.programs[r] if it.kind == "compute")

    def wait_ns(self, r: int) -> int:
        """The rank's waiting for its pipeline neighbours per step: per p2p kernel, the time
        until the last of its ops' partners had started (the union of its ops' waits)."""
        return sum(max(it.waits, default=0) for it in self.programs[r] if it.kind == "p2p")

    def recv_waits(self, r: int) -> list[int]:
        """Every receive's time before its send's kernel started, in program order."""
        return [w for it in self.programs[r] if it.kind == "p2p"
                for op, w in zip(it.ops, it.waits, strict=True) if op.way == "recv"]  # fmt: skip

    def step_ns(self) -> int:
        """The step: the slowest rank's program plus the gap to the next step."""
        return self.span + GAP_US * US

    def slowest_stage(self) -> int:
        return max(range(self.p), key=lambda s: self.compute_ns(self.rank(s, 0)))


def _order(pipe: Pipe, s: int) -> list[tuple[str, int]]:
    """The stage's computes in order: ('F' | 'B', micro-batch)."""
    m, p = pipe.m, pipe.p
    if pipe.schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(p - s - 1, m)
    out = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while f < m:
        out += [("F", f), ("B", b)]
        f, b = f + 1, b + 1
    return out + [("B", i) for i in range(b, m)]


def _program(pipe: Pipe, r: int) -> list[Item]:
    s, d = pipe.stage(r), r % pipe.dp
    slow = SLOW if s == pipe.slow else 1.0
    prev = pipe.rank(s - 1, d) if s > 0 else None
    nxt = pipe.rank(s + 1, d) if s < pipe.p - 1 else None
    items: list[Item] = []
    pending: list[Op] = []  # sends of the last compute, not yet issued

    def point(ops: list[Op]) -> None:
        if not ops:
            return
        if pipe.batched:
            items.append(Item("p2p", ops=ops, batched=True))
        else:
            items.extend(Item("p2p", ops=[op]) for op in ops)

    for kind, i in _order(pipe, s):
        recv = []
        if kind == "F" and prev is not None:
            recv = [Op("recv", prev, (prev, r, "act", i))]
        if kind == "B" and nxt is not None:
            recv = [Op("recv", nxt, (nxt, r, "grad", i))]
        point(pending + recv)
        base = F_US if kind == "F" else B_US
        items.append(Item("compute", dur=round(base * slow * pipe.scale * US)))
        pending = []
        if kind == "F" and nxt is not None:
            pending = [Op("send", nxt, (r, nxt, "act", i))]
        if kind == "B" and prev is not None:
            pending = [Op("send", prev, (r, prev, "grad", i))]
    point(pending)
    if pipe.dp > 1:
        items.append(Item("allreduce", group="DP"))
    items.append(Item("allreduce", group="world"))
    return items


def build(pipe: Pipe) -> Pipe:
    """Fills `pipe.programs` with every kernel's simulated start and end (ns from the step's
    start) and `pipe.span`."""
    progs = {r: _program(pipe, r) for r in range(pipe.world)}
    pos = dict.fromkeys(progs, 0)
    now = dict.fromkeys(progs, 0)
    started: dict[tuple, tuple[int, int]] = {}  # (op key, way) -> (rank, start)
    ar: dict[str, dict[int, int]] = {}  # DP group -> rank -> arrival
    left = sum(len(p) for p in progs.values())
    while left:
        moved = False
        for r, prog in progs.items():
            while pos[r] < len(prog):
                it = prog[pos[r]]
                if it.start is None:
                    it.start = now[r]
                    for op in it.ops:
                        started[op.key, op.way] = (r, it.start)
                if it.kind == "compute":
                    it.end = it.start + it.dur
                elif it.kind == "p2p":
                    other = [started.get((op.key, "recv" if op.way == "send" else "send"))
                             for op in it.ops]  # fmt: skip
                    if any(o is None for o in other):
                        break
                    starts = [o[1] for o in other if o is not None]
                    it.waits = [max(t - it.start, 0) for t in starts]
                    xfer = round(XFER_US * pipe.scale * US)
                    it.end = max(max(t, it.start) + xfer for t in starts)
                else:
                    g, members = (pipe.dp_group(r) if it.group == "DP"
                                  else ("0", list(range(pipe.world))))  # fmt: skip
                    ar.setdefault(g, {})[r] = it.start
                    if len(ar[g]) < len(members):
                        break
                    it.waits = [max(ar[g].values()) - it.start]
                    it.end = max(ar[g].values()) + (ARED_US if it.group == "DP" else NORM_US) * US
                now[r] = it.end
                pos[r] += 1
                left -= 1
                moved = True
        if not moved:
            raise RuntimeError("the schedule deadlocks")
    pipe.programs = progs
    pipe.span = max(now.values())
    return pipe


def _events(pipe: Pipe, r: int) -> list[dict]:
    """The rank's trace events (µs relative to BASE_NS)."""
    host, dev = 30_000 + r, r
    evs: list[dict] = []
    n = {"corr": 0, "ext": 0, "p2p": 0}
    pn, pr = pipe.pp_group(r)
    dn, dr = pipe.dp_group(r)
    for k in range(pipe.steps):
        t0 = pipe.step_start(k)
        evs.append(_x("user_annotation", f"ProfilerStep#{FIRST_STEP + k}", host, host,
                      t0 - 30 * US, pipe.step_ns(), {}))  # fmt: skip

    def ids() -> tuple[int, int]:
        n["corr"] += 1
        n["ext"] += 1
        return n["corr"], n["ext"]

    def kernel(name: str, cat: str, ts: int, dur: int, stream: int, args: dict,
               launch_at: int) -> None:  # fmt: skip
        corr, ext = ids()
        evs.append(
            _x(
                cat,
                "cuLaunchKernelEx" if cat == "cuda_driver" else "cudaLaunchKernel",
                host,
                host,
                launch_at,
                2 * US,
                {"correlation": corr, "External id": ext},
            )
        )
        evs.append(_x("kernel", name, dev, stream, ts, dur,
                      {"device": dev, "stream": stream, "correlation": corr,
                       "External id": ext, **args}))  # fmt: skip

    def p2p_args(op: Op, seq: int) -> dict:
        peer_in_group = pr.index(op.peer)
        return {
            "Collective name": op.way,
            "In msg nelems": NELEMS,
            "Out msg nelems": NELEMS,
            "Group size": len(pr),
            "dtype": "BFloat16",
            "In split size": "[]",
            "Out split size": "[]",
            "Process Group Name": pn,
            "Process Group Description": "mesh_pp",
            "Process Group Ranks": json.dumps(pr),
            "Rank": peer_in_group,
            ("Dst Rank" if op.way == "send" else "Src Rank"): op.peer,
            "Seq": seq,
        }

    def host_op(name: str, ts: int, dur: int, args: dict | None = None) -> None:
        _, ext = ids()
        evs.append(_x("cpu_op", name, host, host, ts, dur, {"External id": ext, **(args or {})}))

    for k in range(pipe.steps):
        t0 = pipe.step_start(k)
        for it in pipe.programs[r]:
            ts, dur = t0 + it.start, it.end - it.start
            if it.kind == "compute":
                kernel(GEMM, "cuda_runtime", ts, dur, STREAM["compute"], {}, ts - 5 * US)
            elif it.kind == "allreduce":
                n[it.group] = n.get(it.group, 0) + 1
                gn, gd, gr = ((dn, "mesh_dp", dr) if it.group == "DP"
                              else ("0", "default_pg", list(range(pipe.world))))  # fmt: skip
                args = {"Collective name": "allreduce", "In msg nelems": NELEMS,
                        "Out msg nelems": NELEMS, "Group size": len(gr), "dtype": "BFloat16",
                        "In split size": "[]", "Out split size": "[]",
                        "Process Group Name": gn, "Process Group Description": gd,
                        "Process Group Ranks": json.dumps(gr), "Seq": n[it.group]}  # fmt: skip
                host_op("record_param_comms", ts - 6 * US, 4 * US, args)
                kernel(ALLREDUCE, "cuda_driver", ts, dur, STREAM[it.group], args, ts - 5 * US)
            elif not it.batched:
                op = it.ops[0]
                n["p2p"] += 1
                args = p2p_args(op, n["p2p"])
                c10d = "c10d::send" if op.way == "send" else "c10d::recv_"
                host_op(c10d, ts - 8 * US, 7 * US)
                host_op("record_param_comms", ts - 7 * US, 5 * US, args)
                kernel(SENDRECV, "cuda_driver", ts, dur, STREAM["PP"], args, ts - 5 * US)
            else:
                n["p2p"] += 1  # one p2p seq for the coalesced group
                t = ts - 3 * US - 2 * US * len(it.ops)
                for j, op in enumerate(it.ops):
                    c10d = "c10d::send" if op.way == "send" else "c10d::recv_"
                    host_op(c10d, t + 2 * US * j, 1_500)
                    host_op("record_param_comms", t + 2 * US * j + 200, 1_000,
                            p2p_args(op, n["p2p"]))  # fmt: skip
                host_op("nccl:coalesced", ts - 3 * US, 2_500)
                kernel(SENDRECV, "cuda_driver", ts, dur, STREAM["PP"], {}, ts - 2_500)
    return sorted(evs, key=lambda e: e["ts"])


def write(pipe: Pipe, out: Path) -> list[Path]:
    """One `rank<r>.pt.trace.json` per rank in `out`."""
    return write_ranks(out, pipe.world, pipe.groups, lambda r: _events(pipe, r))
