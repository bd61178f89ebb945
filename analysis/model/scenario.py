"""A training scenario, its predicted step, what-ifs and sweeps (pure functions).

A `Scenario` is everything the model needs: the gradient bytes synchronised per optimizer
step, the topology, compute time per micro-batch and overlap. `predict` evaluates every
algorithm, NCCL's model and the step model; `vary` makes a what-if; `sweep` tabulates one knob
for plotting.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from commwall.analysis.model.buckets import DDP_BUCKET_BYTES, n_collectives, nccl_step, step_cost
from commwall.analysis.model.collectives import ALGORITHMS, IN_NETWORK, Link, Topology
from commwall.analysis.model.hardware import (
    DEFAULT_NET_ALPHA_S,
    DEFAULT_NVLINK_ALPHA_S,
    DEFAULT_NVLINK_BIDIR_Bps,
)
from commwall.analysis.model.nccl_tuning import NcclChoice, nccl_topo
from commwall.analysis.model.step import DEFAULT_TARGET_OVERHEAD, StepModel, max_comm_for_overhead
from commwall.analysis.model.step import step_model as _step_model
from commwall.analysis.model.units import dtype_bytes, parse_bandwidth, parse_bytes, parse_count

OP = "allreduce"


@dataclass(frozen=True)
class Scenario:
    """Data-parallel gradient sync: `gradient_bytes` all-reduced per optimizer step over
    `topology`, in buckets of `bucket_bytes` (None: one collective), `compression`× fewer bytes
    on the wire. `compute_s` is τ_comp per micro-batch (None: unknown, no step model), `eta`
    the overlap efficiency, `grad_accum` micro-batches per step. `algorithm` is a name of
    ALGORITHMS, "best" (fastest α-β algorithm; in-network ones only if `in_network`) or
    "nccl" (NCCL's own model for `arch` and `cpu`)."""

    gradient_bytes: float
    topology: Topology
    compute_s: float | None = None
    eta: float = 0.0
    grad_accum: int = 1
    compression: float = 1.0
    bucket_bytes: float | None = DDP_BUCKET_BYTES
    algorithm: str = "best"
    in_network: bool = False
    target_overhead: float = DEFAULT_TARGET_OVERHEAD
    arch: str = "hopper"
    cpu: str = "intel"

    def __post_init__(self) -> None:
        if self.algorithm not in (*ALGORITHMS, "best", "nccl"):
            raise ValueError(f"unknown algorithm {self.algorithm!r}")
        if self.gradient_bytes < 0 or self.compression <= 0:
            raise ValueError("gradient_bytes must be >= 0 and compression > 0")


@dataclass(frozen=True)
class AlgorithmTime:
    """Per-step communication time of one algorithm (s), split into latency and bandwidth."""

    algorithm: str
    latency_s: float
    bandwidth_s: float

    @property
    def total_s(self) -> float:
        """latency + bandwidth."""
        return self.latency_s + self.bandwidth_s


@dataclass(frozen=True)
class NcclStep:
    """NCCL's prediction for the step: total time (s) and its choice per bucket size."""

    time_s: float
    choices: tuple[tuple[float, int, NcclChoice], ...]


@dataclass(frozen=True)
class Prediction:
    """What the model predicts for a scenario."""

    scenario: Scenario
    wire_bytes: float
    n_collectives: int
    algorithms: dict[str, AlgorithmTime]
    nccl: NcclStep | None
    chosen: str
    comm_s: float
    step: StepModel | None
    min_link_Bps: float | None


def algorithm_times(s: Scenario) -> dict[str, AlgorithmTime]:
    """Per-step α-β time of every algorithm that applies to the scenario."""
    out = {}
    for name in ALGORITHMS:
        c = step_cost(OP, name, s.gradient_bytes, s.bucket_bytes, s.topology, s.compression)
        if c is not None:
            out[name] = AlgorithmTime(name, c.latency_s, c.bandwidth_s)
    return out


def nccl_prediction(s: Scenario) -> NcclStep | None:
    """NCCL's model for the scenario (None on one GPU or with no bytes)."""
    if s.topology.n_gpus < 2 or s.gradient_bytes <= 0:
        return None
    t = nccl_topo(s.topology, s.arch, s.cpu)
    choices = nccl_step(OP, s.gradient_bytes, s.bucket_bytes, t, s.compression)
    return NcclStep(sum(c.time_s * n for _, n, c in choices), tuple(choices))


def _choose(s: Scenario, times: dict[str, AlgorithmTime], nccl: NcclStep | None) -> str:
    if s.algorithm == "nccl":
        return "nccl" if nccl is not None else "ring"
    if s.algorithm != "best":
        if s.algorithm not in times:
            raise ValueError(f"{s.algorithm} does not apply to this topology")
        return s.algorithm
    usable = {a: t for a, t in times.items() if s.in_network or a not in IN_NETWORK}
    return min(usable, key=lambda a: usable[a].total_s)


def comm_time(s: Scenario) -> float:
    """τ_comm per optimizer step (s) with the scenario's algorithm."""
    times = algorithm_times(s)
    nccl = nccl_prediction(s) if s.algorithm == "nccl" else None
    chosen = _choose(s, times, nccl)
    return nccl.time_s if chosen == "nccl" and nccl else times[chosen].total_s


def predict(s: Scenario) -> Prediction:
    """Every algorithm's time, NCCL's model, the chosen algorithm's τ_comm, the step model and
    the NIC bandwidth that would meet the target overhead."""
    times = algorithm_times(s)
    nccl = nccl_prediction(s)
    chosen = _choose(s, times, nccl)
    comm = nccl.time_s if chosen == "nccl" and nccl else times[chosen].total_s
    step = None
    if s.compute_s is not None:
        step = _step_model(s.compute_s, comm, s.eta, s.grad_accum, s.target_overhead)
    return Prediction(
        scenario=s,
        wire_bytes=s.gradient_bytes / s.compression,
        n_collectives=n_collectives(s.gradient_bytes, s.bucket_bytes),
        algorithms=times,
        nccl=nccl,
        chosen=chosen,
        comm_s=comm,
        step=step,
        min_link_Bps=min_link_bandwidth(s) if s.compute_s is not None else None,
    )


#: What-if knobs `vary` understands.
KNOBS = (
    "link_Bps",
    "nvlink_Bps",
    "n_nodes",
    "n_gpus",
    "eta",
    "grad_accum",
    "compression",
    "bucket_bytes",
    "compute_s",
)


def vary(s: Scenario, knob: str, value: float) -> Scenario:
    """The scenario with one knob changed: `link_Bps` / `nvlink_Bps` (per-direction bandwidth,
    latency unchanged), `n_nodes` or `n_gpus` (same GPUs per node), or a Scenario field."""
    t = s.topology
    if knob == "link_Bps":
        return replace(s, topology=replace(t, net=replace(t.net, bandwidth_Bps=float(value))))
    if knob == "nvlink_Bps":
        if t.nvlink is None:
            raise ValueError("the scenario has no intra-node link")
        return replace(s, topology=replace(t, nvlink=replace(t.nvlink, bandwidth_Bps=value)))
    if knob == "n_nodes":
        return replace(s, topology=replace(t, n_gpus=int(value) * t.gpus_per_node))
    if knob == "n_gpus":
        return replace(s, topology=replace(t, n_gpus=int(value)))
    if knob == "grad_accum":
        return replace(s, grad_accum=int(value))
    if knob == "eta":
        return replace(s, eta=value)
    if knob == "compression":
        return replace(s, compression=value)
    if knob == "bucket_bytes":
        return replace(s, bucket_bytes=value)
    if knob == "compute_s":
        return replace(s, compute_s=value)
    raise ValueError(f"unknown knob {knob!r}; known: {', '.join(KNOBS)}")


def sweep(s: Scenario, knob: str, values: Iterable[float]) -> pd.DataFrame:
    """One row per value of `knob`: algorithm, comm_ms, exposed_comm_ms, step_ms (per
    optimizer step), step_ms_per_micro_batch, comm_overhead, gpu_efficiency, gamma, verdict
    (step columns NaN/None without compute time)."""
    rows = []
    for v in values:
        p = predict(vary(s, knob, v))
        st = p.step
        rows.append(
            {
                knob: v,
                "algorithm": p.chosen,
                "comm_ms": p.comm_s * 1e3,
                "exposed_comm_ms": st.exposed_comm_s * 1e3 if st else math.nan,
                "step_ms": st.step_s * 1e3 if st else math.nan,
                "step_ms_per_micro_batch": st.step_s * 1e3 / st.grad_accum if st else math.nan,
                "comm_overhead": st.comm_overhead if st else math.nan,
                "gpu_efficiency": st.gpu_efficiency if st else math.nan,
                "gamma": st.gamma if st else math.nan,
                "verdict": st.verdict if st else None,
            }
        )
    return pd.DataFrame(rows)


def min_link_bandwidth(s: Scenario) -> float | None:
    """The smallest per-direction NIC bandwidth (bytes/s) at which comm_overhead meets the
    target; None when latency (or the intra-node link) alone exceeds it. Bisection in log
    space: τ_comm never grows with bandwidth."""
    if s.compute_s is None:
        raise ValueError("the scenario has no compute time")
    limit = max_comm_for_overhead(s.compute_s, s.eta, s.grad_accum, s.target_overhead)
    if comm_time(vary(s, "link_Bps", 1e30)) > limit:
        return None
    lo, hi = 1e3, 1e6
    while comm_time(vary(s, "link_Bps", hi)) > limit:
        lo, hi = hi, hi * 1e3
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if comm_time(vary(s, "link_Bps", mid)) <= limit else (mid, hi)
        if hi / lo < 1 + 1e-9:
            break
    return hi


def calculator(
    params: str | float,
    dtype: str,
    gpus: int,
    link: str | float,
    gpus_per_node: int = 1,
    nvlink: str | float | None = None,
    nics_per_node: int | None = None,
    alpha_net_s: float = DEFAULT_NET_ALPHA_S,
    alpha_nvlink_s: float = DEFAULT_NVLINK_ALPHA_S,
    bucket: str | float | None = DDP_BUCKET_BYTES,
    **options: Any,
) -> Scenario:
    """A scenario from calculator inputs with units: `params` (7e9, 7B), gradient `dtype`,
    `link` the per-GPU NIC speed per direction (400Gbps). `nvlink` is the vendor's
    bidirectional NVLink figure (900GB/s, the default with several GPUs per node); the model
    uses half of it per direction. Other keywords are Scenario fields."""
    grad = parse_count(params) * dtype_bytes(dtype)
    net = Link(parse_bandwidth(link), alpha_net_s)
    intra = None
    if gpus_per_node > 1:
        bidir = parse_bandwidth(nvlink) if nvlink is not None else DEFAULT_NVLINK_BIDIR_Bps
        intra = Link(bidir / 2, alpha_nvlink_s)
    topo = Topology(gpus, net, gpus_per_node, intra, nics_per_node)
    cap = parse_bytes(bucket) if bucket is not None else None
    return Scenario(grad, topo, bucket_bytes=cap or None, **options)
