"""A `Prediction` as a JSON-able dict (ms, GB/s, bytes), for the CLI and the dashboard alike."""

from __future__ import annotations

from typing import Any

from commwall.analysis.model.nccl_tuning import VERSION
from commwall.analysis.model.scenario import Prediction
from commwall.analysis.model.units import GiB

MS = 1e3


def _step(p: Prediction) -> dict[str, Any] | None:
    st = p.step
    if st is None:
        return None
    return {
        "tau_comp_ms": st.compute_s * MS,
        "tau_comm_ms": st.comm_s * MS,
        "eta": st.eta,
        "grad_accum": st.grad_accum,
        "overlap_ms": st.overlap_s * MS,
        "exposed_comm_ms": st.exposed_comm_s * MS,
        "step_ms": st.step_s * MS,
        "gamma": st.gamma,
        "comm_overhead": st.comm_overhead,
        "gpu_efficiency": st.gpu_efficiency,
        "verdict": st.verdict,
        "reason": st.reason,
    }


def assumptions(p: Prediction) -> list[str]:
    """The assumptions behind the numbers, in words."""
    s, t = p.scenario, p.scenario.topology
    out = [
        "GB = 1e9 B, GiB = 2^30 B; link speeds are per direction (400 Gb/s = 50 GB/s)",
        "gradients are all-reduced once per optimizer step, in buckets, latency paid per bucket",
    ]
    if t.gpus_per_node == 1:
        out.append("one GPU per node: every hop crosses the NIC (the calculator's assumption)")
    else:
        out.append(
            f"{t.gpus_per_node} GPUs and {t.nics} NICs per node; the NVLink figure given is "
            "bidirectional, half of it per direction is used"
        )
    if s.grad_accum > 1:
        out.append("with accumulation, communication overlaps only the last micro-batch")
    out.append(f"NCCL's model: NCCL {VERSION} constants, {s.arch} GPUs, {s.cpu} CPUs")
    return out


def prediction_dict(p: Prediction) -> dict[str, Any]:
    """Inputs, per-algorithm all-reduce time per step, NCCL's model, the step model, the
    minimum NIC bandwidth for the target overhead, and the assumptions."""
    s, t = p.scenario, p.scenario.topology
    allreduce = {a: x.total_s * MS for a, x in p.algorithms.items()}
    nccl = None
    if p.nccl is not None:
        allreduce["nccl"] = p.nccl.time_s * MS
        nccl = {
            "version": VERSION,
            "allreduce_ms": p.nccl.time_s * MS,
            "choices": [
                {
                    "bytes": size,
                    "count": n,
                    "algorithm": c.algorithm,
                    "protocol": c.protocol,
                    "ms_each": c.time_s * MS,
                }
                for size, n, c in p.nccl.choices
            ],
        }
    return {
        "inputs": {
            "gpus": t.n_gpus,
            "gpus_per_node": t.gpus_per_node,
            "nodes": t.n_nodes,
            "nics_per_node": t.nics,
            "link_GBps": t.net.bandwidth_Bps / 1e9,
            "link_alpha_us": t.net.alpha_s * 1e6,
            "nvlink_GBps": None if t.nvlink is None else t.nvlink.bandwidth_Bps / 1e9,
            "nvlink_alpha_us": None if t.nvlink is None else t.nvlink.alpha_s * 1e6,
            "bucket_bytes": s.bucket_bytes,
            "compression": s.compression,
            "grad_accum": s.grad_accum,
            "overlap": s.eta,
            "compute_ms": None if s.compute_s is None else s.compute_s * MS,
            "target_overhead": s.target_overhead,
        },
        "gradient_bytes": s.gradient_bytes,
        "gradient_GB": s.gradient_bytes / 1e9,
        "gradient_GiB": s.gradient_bytes / GiB,
        "wire_bytes": p.wire_bytes,
        "collectives_per_step": p.n_collectives,
        "allreduce_ms": allreduce,
        "algorithms": {
            a: {
                "allreduce_ms": x.total_s * MS,
                "latency_ms": x.latency_s * MS,
                "bandwidth_ms": x.bandwidth_s * MS,
            }
            for a, x in p.algorithms.items()
        },
        "nccl": nccl,
        "algorithm": p.chosen,
        "comm_ms": p.comm_s * MS,
        "step": _step(p),
        "min_link_GBps": None if p.min_link_Bps is None else p.min_link_Bps / 1e9,
        "assumptions": assumptions(p),
    }


def predicted_reason(model: dict[str, Any]) -> str | None:
    """The predicted verdict's reason as a reader should see it: whole when the fit is
    calibrated; else only its first clause (the exposed share) and that its advice is withheld,
    since a fit whose held-out error is too large, or unknown, is no ground to act on. None when
    there is no predicted verdict."""
    predicted = model.get("predicted") or {}
    reason = predicted.get("reason")
    if not predicted.get("verdict") or not reason:
        return None
    status = str(model.get("status") or "")
    if not status or status == "calibrated":
        return str(reason)
    first = str(reason).split(";")[0].split(",")[0]
    if first == str(reason):  # nothing but the share: no advice to withhold
        return first
    return f"{first}; its advice is withheld: the fit is not calibrated ({status})"
