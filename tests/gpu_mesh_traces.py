"""Kineto traces in the modern GPU layout for a data-parallel x tensor-parallel mesh, with the
truth by construction: every collective's process group, arrival and end.

Layout (as PyTorch 2.x writes it on NCCL): per rank a host thread with `ProfilerStep#N`
annotations and, for every collective, a `record_param_comms` op (args `Collective name`,
`In msg nelems`, `Out msg nelems`, `Group size`, `dtype`, `In split size`, `Out split size`,
`Process Group Name`, `Process Group Description`, `Process Group Ranks`, `Seq`) enclosing the
`cudaLaunchKernel` of its NCCL kernel; the kernel on the device carries the same collective args
and the launch's `correlation`. GEMM kernels run on the compute stream, each group's NCCL
kernels on a stream of their own. `distributedInfo.pg_config` lists the rank's groups.

Mesh: `dp` x `tp` ranks, rank = d * tp + t; TP groups {d*tp .. d*tp + tp - 1} (`mesh_tp`), DP
groups {t, t + tp, ...} (`mesh_dp`). Every all-reduce has the same size, so only the group
tells a TP call from a DP call. Each step (times in µs from the step's start, `SCHEDULE`):

    compute   [0, 100)  (rank LATE_EARLY: [0, 80): it enters its first TP all-reduce 20 µs
                         early and waits for its TP peer)
    TP #1     [end of that compute, 150)
    compute   [150, 250)
    DP #1     [200, 300)   half hidden under compute
    TP #2     [300, 340)
    DP #2     [340, 400)
    TP #3     [360, 380)   inside DP #2, on its own stream
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BASE_NS = 1_760_000_000_000_000_000
STEP_NS = 1_000_000  # one step every ms
FIRST_STEP = 5
LAUNCH_LEAD_NS = 5_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
STREAM = {"compute": 7, "TP": 20, "DP": 24}
NELEMS = 1 << 20
EARLY_NS = 20_000  # how early rank LATE_EARLY enters TP #1
US = 1_000


@dataclass
class Call:
    """One collective call of a rank: its group's role, name, ranks, seq and interval (ns)."""

    role: str
    pg_name: str
    ranks: list[int]
    seq: int
    ts: int
    end: int


@dataclass
class Mesh:
    """The job: dp x tp ranks, `steps` steps; `early` is the rank that enters TP #1 early."""

    dp: int = 2
    tp: int = 2
    steps: int = 2
    early: int = 2
    calls: dict[int, list[Call]] = field(default_factory=dict)
    compute: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def world(self) -> int:
        return self.dp * self.tp

    def tp_group(self, r: int) -> tuple[str, list[int]]:
        d = r // self.tp
        return str(1 + self.tp + d), [d * self.tp + t for t in range(self.tp)]

    def dp_group(self, r: int) -> tuple[str, list[int]]:
        t = r % self.tp
        return str(1 + t), [d * self.tp + t for d in range(self.dp)]

    def groups(self, r: int) -> list[dict]:
        """The rank's pg_config: the default group, then its DP and TP groups."""
        (dn, dr), (tn, tr) = self.dp_group(r), self.tp_group(r)
        return [
            {"pg_name": "0", "pg_desc": "default_pg", "pg_size": self.world,
             "ranks": list(range(self.world))},
            {"pg_name": dn, "pg_desc": "mesh_dp", "pg_size": len(dr), "ranks": dr},
            {"pg_name": tn, "pg_desc": "mesh_tp", "pg_size": len(tr), "ranks": tr},
        ]  # fmt: skip

    def step_start(self, s: int) -> int:
        return BASE_NS + 10 * STEP_NS + s * STEP_NS


def build(mesh: Mesh) -> Mesh:
    """Fills `mesh.calls` and `mesh.compute` (ns, absolute) from the schedule."""
    for r in range(mesh.world):
        calls, comp = [], []
        for s in range(mesh.steps):
            t0 = mesh.step_start(s)
            first = 80 * US if r == mesh.early else 100 * US
            comp += [(t0, t0 + first), (t0 + 150 * US, t0 + 250 * US)]
            tn, tr = mesh.tp_group(r)
            dn, dr = mesh.dp_group(r)
            for role, (a, b), k in (
                ("TP", (first, 150 * US), 0),
                ("DP", (200 * US, 300 * US), 0),
                ("TP", (300 * US, 340 * US), 1),
                ("DP", (340 * US, 400 * US), 1),
                ("TP", (360 * US, 380 * US), 2),
            ):
                name, ranks = (tn, tr) if role == "TP" else (dn, dr)
                seq = s * (3 if role == "TP" else 2) + k
                calls.append(Call(role, name, ranks, seq, t0 + a, t0 + b))
        mesh.calls[r], mesh.compute[r] = calls, comp
    return mesh


def _us(ns: int) -> float:
    return round(ns / 1e3, 3)


def _x(cat: str, name: str, pid: int, tid: int, ts: int, dur: int, args: dict) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
            "ts": _us(ts - BASE_NS), "dur": _us(dur), "args": args}  # fmt: skip


def events(mesh: Mesh, r: int) -> list[dict]:
    """The rank's trace events (times relative to BASE_NS, in µs)."""
    host, dev = 20_000 + r, r
    evs: list[dict] = []
    corr = ext = 0
    for s in range(mesh.steps):
        t0 = mesh.step_start(s)
        evs.append(_x("user_annotation", f"ProfilerStep#{FIRST_STEP + s}", host, host,
                      t0 - 50 * US, 500 * US, {}))  # fmt: skip

    def launch(ts: int, dur: int, name: str, stream: int, args: dict, host_op: bool) -> None:
        nonlocal corr, ext
        corr += 1
        ext += 1
        t = ts - LAUNCH_LEAD_NS
        if host_op:
            evs.append(_x("cpu_op", "record_param_comms", host, host, t - 1_000, 4_000,
                          {"External id": ext, **args}))  # fmt: skip
        evs.append(_x("cuda_runtime", "cudaLaunchKernel", host, host, t, 2_000,
                      {"correlation": corr, "External id": ext}))  # fmt: skip
        evs.append(_x("kernel", name, dev, stream, ts, dur,
                      {"device": dev, "stream": stream, "correlation": corr,
                       "External id": ext, **args}))  # fmt: skip

    for a, b in mesh.compute[r]:
        launch(a, b - a, GEMM, STREAM["compute"], {}, False)
    for c in mesh.calls[r]:
        args = {
            "Collective name": "allreduce",
            "In msg nelems": NELEMS,
            "Out msg nelems": NELEMS,
            "Group size": len(c.ranks),
            "dtype": "BFloat16",
            "In split size": "[]",
            "Out split size": "[]",
            "Process Group Name": c.pg_name,
            "Process Group Description": "mesh_tp" if c.role == "TP" else "mesh_dp",
            "Process Group Ranks": json.dumps(c.ranks),
            "Seq": c.seq,
        }
        launch(c.ts, c.end - c.ts, NCCL, STREAM[c.role], args, True)
    return sorted(evs, key=lambda e: e["ts"])


def write(mesh: Mesh, out: Path) -> list[Path]:
    """One `rank<r>.pt.trace.json` per rank in `out`."""
    return write_ranks(out, mesh.world, mesh.groups, lambda r: events(mesh, r))


def write_ranks(
    out: Path,
    world: int,
    groups: Callable[[int], list[dict]],
    events_of: Callable[[int], list[dict]],
) -> list[Path]:
    """One `rank<r>.pt.trace.json` per rank of `world` in `out` (modern layout, one H100 node):
    rank r's process groups `groups(r)` and its events `events_of(r)`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(world):
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": world,
                                "pg_config": groups(r), "nccl_version": "2.21.5"},
            "host_name": "node0",
            "baseTimeNanoseconds": BASE_NS,
            "deviceProperties": [{"id": r, "name": "NVIDIA H100"}],
            "traceEvents": events_of(r),
        }  # fmt: skip
        path = out / f"rank{r}.pt.trace.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths
