"""Synthetic multi-rank GPU runs with a known straggler, clock offsets and bus bandwidth.

`simulate(Scenario)` plays a bulk-synchronous training loop on one true clock: every rank computes
(one kernel), launches a blocking collective, and the collective ends on all ranks
`transfer` after the last rank arrived (plus a small per-rank end jitter). The straggler spends
`delay_us` more per collective, in its compute kernel (mode 'compute') or idle before the launch
(mode 'late'). Each host's clock then runs `clock_offsets_us[host]` ahead of the true clock.
`transfer = alpha + busbw_factor(op, n) x bytes / busbw` (nccl-tests model, cost_model.md §4), so the
bus bandwidth is known too.

Two outputs of one simulation: `write_kineto` writes one Kineto JSON trace per rank (for the normal
ingest path), `store_tables` / `insert_run` give the store's rows directly (for property tests and
benchmarks, where writing and parsing JSON would dominate; a test checks both paths store the
same collectives). `Sim.truth()` is the ground truth both are checked against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from commwall.ingest.schema import ACTIVITIES, COLLECTIVES, RANKS, STEPS

BASE_NS = 1_750_000_000_000_000_000  # baseTimeNanoseconds of every file
T0_NS = 1_000_000_000  # true time of the first step, relative to BASE_NS
OPS = ("allreduce", "allgather", "reduce_scatter")
KERNEL = {
    "allreduce": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    "allgather": "ncclDevKernel_AllGather_RING_LL",
    "reduce_scatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
}
COLL_NAME = {
    "allreduce": "allreduce",
    "allgather": "_allgather_base",
    "reduce_scatter": "_reduce_scatter_base",
}
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
NELEMS = (1 << 20, 1 << 22, 1 << 24, 1 << 25)  # bf16 elements: 2, 8, 32, 64 MB
ELEM = 2
STREAM_COMPUTE, STREAM_COMM = 7, 21
LAUNCH_LEAD_NS = 5_000  # the host launches each kernel 5 µs before it starts
STEP_GAP_NS = 50_000  # host work between steps


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests bus bandwidth factor (cost_model.md §4)."""
    return 2 * (n - 1) / n if op == "allreduce" else (n - 1) / n


@dataclass(frozen=True)
class Scenario:
    """What to simulate. Ranks are processes 0..n-1 relabelled by `rank_of` (default identity);
    process p lives on host p // ranks_per_host. Times in µs unless named otherwise."""

    hosts: int = 2
    ranks_per_host: int = 4
    steps: int = 3
    collectives_per_step: int = 6
    straggler: int | None = None  # process index
    delay_us: float = 300.0
    mode: str = "compute"  # compute | late
    clock_offsets_us: tuple[float, ...] = ()  # per host; missing hosts: 0
    with_seq: bool = True
    busbw_GBps: float = 100.0
    alpha_us: float = 10.0
    compute_us: float = 800.0
    compute_noise: float = 0.05
    end_jitter_ns: int = 500
    rank_of: tuple[int, ...] = ()
    first_step: int = 2
    seed: int = 0

    @property
    def world(self) -> int:
        """Number of ranks."""
        return self.hosts * self.ranks_per_host


@dataclass
class Sim:
    """A simulated run: per (process, collective) true times in ns and per-collective facts."""

    scn: Scenario
    ops: list[str]
    nelems: np.ndarray  # (K,) nominal elements per collective (msg_elems gives in, out, S)
    compute_start: np.ndarray  # (R, K)
    compute_dur: np.ndarray  # (R, K)
    arrive: np.ndarray  # (R, K) start of the collective kernel
    end: np.ndarray  # (R, K)
    offsets_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per host

    def rank(self, p: int) -> int:
        """Rank label of process p."""
        return self.scn.rank_of[p] if self.scn.rank_of else p

    def host(self, p: int) -> str:
        """Host name of process p."""
        return f"node{p // self.scn.ranks_per_host:03d}"

    def clock(self, p: int) -> int:
        """Offset of process p's clock from the true clock, ns."""
        return int(self.offsets_ns[p // self.scn.ranks_per_host])

    def truth(self) -> dict:
        """Ground truth: the straggler's rank, each host's clock offset relative to the host of
        rank 0 (ns), the simulated bus bandwidth, counts."""
        ref = self.clock(next(p for p in range(self.scn.world) if self.rank(p) == 0))
        s = self.scn.straggler
        first_procs = range(0, self.scn.world, self.scn.ranks_per_host)
        return {
            "straggler_rank": None if s is None else self.rank(s),
            "straggler_host": None if s is None else self.host(s),
            "mode": self.scn.mode,
            "offsets_ns": {self.host(p): self.clock(p) - ref for p in first_procs},
            "busbw_GBps": self.scn.busbw_GBps,
            "collectives": len(self.ops),
            "steps": list(range(self.scn.first_step, self.scn.first_step + self.scn.steps)),
        }


def simulate(scn: Scenario) -> Sim:
    """Play the training loop of `scn` on the true clock."""
    rng = np.random.default_rng(scn.seed)
    n, k_total = scn.world, scn.steps * scn.collectives_per_step
    ops = [OPS[k % len(OPS)] for k in range(k_total)]
    nelems = np.array([NELEMS[(k // len(OPS)) % len(NELEMS)] for k in range(k_total)], np.int64)
    noise = rng.uniform(-scn.compute_noise, scn.compute_noise, (n, k_total))
    compute = np.rint(scn.compute_us * 1e3 * (1 + noise)).astype(np.int64)
    idle = np.full((n, k_total), 2_000, np.int64)
    if scn.straggler is not None:
        target = compute if scn.mode == "compute" else idle
        target[scn.straggler] += int(scn.delay_us * 1e3)
    start = np.empty((n, k_total), np.int64)
    arrive = np.empty_like(start)
    end = np.empty_like(start)
    t = np.full(n, T0_NS, np.int64)
    for k in range(k_total):
        if k and k % scn.collectives_per_step == 0:
            t = t + STEP_GAP_NS
        start[:, k] = t
        arrive[:, k] = t + compute[:, k] + idle[:, k]
        size = msg_elems(ops[k], int(nelems[k]), n)[2] * ELEM
        xfer = scn.alpha_us * 1e3 + busbw_factor(ops[k], n) * size / scn.busbw_GBps
        end[:, k] = (
            arrive[:, k].max() + int(round(xfer)) + rng.integers(0, scn.end_jitter_ns + 1, n)
        )
        t = end[:, k]
    offs = np.zeros(scn.hosts, np.int64)
    offs[: len(scn.clock_offsets_us)] = np.rint(np.array(scn.clock_offsets_us) * 1e3)
    return Sim(scn, ops, nelems, start, compute, arrive, end, offs)


def msg_elems(op: str, nelems: int, n: int) -> tuple[int, int, int]:
    """(in, out, S) elements of a call moving about `nelems`: all-gather gathers n inputs of
    nelems // n, reduce-scatter scatters n outputs of nelems // n; S as cost_model.md §4."""
    part = nelems // n
    if op == "allgather":
        return part, part * n, part * n
    if op == "reduce_scatter":
        return part * n, part, part * n
    return nelems, nelems, nelems


def _coll_args(sim: Sim, k: int) -> dict:
    n = sim.scn.world
    in_n, out_n, _ = msg_elems(sim.ops[k], int(sim.nelems[k]), n)
    args = {
        "Collective name": COLL_NAME[sim.ops[k]],
        "In msg nelems": in_n,
        "Out msg nelems": out_n,
        "Group size": n,
        "dtype": "BFloat16",
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
    }
    if sim.scn.with_seq:
        args["Seq"] = k
    return args


def _steps_of(sim: Sim, p: int) -> list[tuple[int, int, int]]:
    """(step number, host start, host end) on process p's true clock."""
    cps = sim.scn.collectives_per_step
    out = []
    for s in range(sim.scn.steps):
        ks = range(s * cps, (s + 1) * cps)
        lo = int(sim.compute_start[p, ks[0]]) - LAUNCH_LEAD_NS - 10_000
        hi = int(sim.end[p, ks[-1]]) + 10_000
        out.append((sim.scn.first_step + s, lo, hi))
    return out


def _us(t_ns: int) -> float:
    return round(t_ns / 1e3, 3)


def _x(cat: str, name: str, pid: int, tid: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def kineto_events(sim: Sim, p: int) -> list[dict]:
    """The Kineto trace events of process p, on its own clock relative to BASE_NS."""
    off = sim.clock(p)
    host_pid, dev = 10_000 + p, p % sim.scn.ranks_per_host
    evs: list[dict] = []
    corr = 0

    def launch_and_kernel(t: int, dur: int, name: str, stream: int, args: dict) -> None:
        nonlocal corr
        corr += 1
        launch = _us(t - LAUNCH_LEAD_NS + off)
        evs.append(_x("cuda_runtime", "cudaLaunchKernel", host_pid, host_pid, launch, 3.0))
        evs[-1]["args"] = {"correlation": corr}
        evs.append(_x("kernel", name, dev, stream, _us(t + off), _us(dur)))
        evs[-1]["args"] = {"device": dev, "stream": stream, "correlation": corr, **args}

    for step, lo, hi in _steps_of(sim, p):
        name = f"ProfilerStep#{step}"
        evs.append(_x("user_annotation", name, host_pid, host_pid, _us(lo + off), _us(hi - lo)))
    for k in range(len(sim.ops)):
        c0, cd = int(sim.compute_start[p, k]), int(sim.compute_dur[p, k])
        launch_and_kernel(c0, cd, GEMM, STREAM_COMPUTE, {})
        a, e = int(sim.arrive[p, k]), int(sim.end[p, k])
        launch_and_kernel(a, e - a, KERNEL[sim.ops[k]], STREAM_COMM, _coll_args(sim, k))
    return evs


def write_kineto(sim: Sim, out: Path) -> list[Path]:
    """One `rank<r>.pt.trace.json` per rank in `out`; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    n = sim.scn.world
    paths = []
    for p in range(n):
        r = sim.rank(p)
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": n},
            "host_name": sim.host(p),
            "baseTimeNanoseconds": BASE_NS,
            "deviceProperties": [{"id": p % sim.scn.ranks_per_host, "name": "NVIDIA H100"}],
            "traceEvents": kineto_events(sim, p),
        }
        path = out / f"rank{r}.pt.trace.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def store_tables(sim: Sim) -> dict[str, pa.Table]:
    """The rows ingest would store for this run (ranks, steps, collectives, activities), built
    directly with numpy for large scenarios; columns as ingest/schema.py, without run/file ids.
    Activities hold the compute and communication kernels."""
    scn, n, k_total = sim.scn, sim.scn.world, len(sim.ops)
    procs = np.arange(n)
    ranks = np.array([sim.rank(p) for p in procs], np.int32)
    offs = np.array([sim.clock(p) for p in procs], np.int64)[:, None] + BASE_NS
    rows_rank = np.repeat(ranks, k_total)
    ts_c = (sim.arrive + offs).ravel()
    dur_c = (sim.end - sim.arrive).ravel()
    args = [_coll_args(sim, k) for k in range(k_total)]
    in_n = np.tile([a["In msg nelems"] for a in args], n)
    out_n = np.tile([a["Out msg nelems"] for a in args], n)
    collectives = pa.table(
        {
            "rank": rows_rank,
            "ts": ts_c,
            "dur": dur_c,
            "launch_ts": ts_c - LAUNCH_LEAD_NS,
            "op": np.tile(sim.ops, n),
            "name": np.tile([KERNEL[o] for o in sim.ops], n),
            "pg_name": ["0"] * (n * k_total),
            "pg_desc": ["default_pg"] * (n * k_total),
            "group_size": np.full(n * k_total, n, np.int32),
            "seq": np.tile(np.arange(k_total), n) if scn.with_seq else [None] * (n * k_total),
            "seq_source": ["Seq" if scn.with_seq else None] * (n * k_total),
            "dtype": ["BFloat16"] * (n * k_total),
            "in_nelems": in_n,
            "out_nelems": out_n,
            "in_bytes": in_n * ELEM,
            "out_bytes": out_n * ELEM,
            "algo": ["RING"] * (n * k_total),
            "stream": np.full(n * k_total, STREAM_COMM),
            "peer": pa.nulls(n * k_total, pa.int32()),
            "pg_ranks": pa.nulls(n * k_total, pa.string()),
            "in_splits": pa.nulls(n * k_total, pa.string()),
            "out_splits": pa.nulls(n * k_total, pa.string()),
        },
        schema=COLLECTIVES,
    )
    ts_k = (sim.compute_start + offs).ravel()
    dur_k = sim.compute_dur.ravel()
    kinds = ["compute"] * (n * k_total) + ["comm"] * (n * k_total)
    activities = pa.table(
        {
            "rank": np.concatenate([rows_rank, rows_rank]),
            "ts": np.concatenate([ts_k, ts_c]),
            "dur": np.concatenate([dur_k, dur_c]),
            "kind": kinds,
            "cat": ["kernel"] * (2 * n * k_total),
            "name": [GEMM] * (n * k_total) + collectives.column("name").to_pylist(),
            "pid": np.tile(np.repeat(procs % scn.ranks_per_host, k_total), 2),
            "tid": np.repeat([STREAM_COMPUTE, STREAM_COMM], n * k_total),
            "stream": np.repeat([STREAM_COMPUTE, STREAM_COMM], n * k_total),
            "correlation": [None] * (2 * n * k_total),
            "external_id": [None] * (2 * n * k_total),
            "launch_ts": np.concatenate([ts_k, ts_c]) - LAUNCH_LEAD_NS,
        },
        schema=ACTIVITIES,
    )
    st = [(p, s, lo + int(offs[p, 0]), hi - lo) for p in procs for s, lo, hi in _steps_of(sim, p)]
    steps = pa.table(
        {
            "rank": [int(ranks[p]) for p, *_ in st],
            "step": [s for _, s, _, _ in st],
            "ts": [t for _, _, t, _ in st],
            "dur": [d for *_, d in st],
        },
        schema=STEPS,
    )
    ranks_t = pa.table(
        {
            "rank": ranks,
            "host": [sim.host(p) for p in procs],
            "pid": 10_000 + procs,
            "device": (procs % scn.ranks_per_host).astype(np.int32),
            "gpu_name": ["NVIDIA H100"] * n,
            "world_size": np.full(n, n, np.int32),
            "backend": ["nccl"] * n,
            "time_base": ["base_ns"] * n,
            "nccl_version": [None] * n,
            "rank_source": ["synthetic"] * n,
        },
        schema=RANKS,
    )
    return {"ranks": ranks_t, "steps": steps, "collectives": collectives, "activities": activities}


def insert_run(con: duckdb.DuckDBPyConnection, name: str, sim: Sim) -> int:
    """Store `sim` as a new run `name` of the open store `con` (rows as `store_tables`, one
    file id per rank); returns its run_id."""
    rid = con.execute("SELECT nextval('run_id_seq')").fetchone()[0]
    con.execute("INSERT INTO runs (run_id, name) VALUES (?, ?)", [rid, name])
    for table, rows in store_tables(sim).items():
        con.register("_synthetic_rows", rows)
        con.execute(
            f"INSERT INTO {table} BY NAME SELECT ? AS run_id, rank AS file_id, * "
            "FROM _synthetic_rows",
            [rid],
        )
        con.unregister("_synthetic_rows")
    return rid


def small_runs(db: Path, names: str = "abc") -> Path:
    """A store file `db` holding one small generated run per letter of `names` (2 ranks on one
    host, 2 steps, a seed per run, so that no two are alike), runs 1, 2, … in that order."""
    from commwall.ingest import store

    with store.connect(db) as con:
        for i, name in enumerate(names):
            insert_run(con, name, simulate(Scenario(hosts=1, ranks_per_host=2, steps=2, seed=i)))
    return db
