"""NCCL's own (uncalibrated) tuning model applied to a run's topology (docs/model.md).

The run says how many ranks, nodes and GPUs per node it had (trace hosts or NCCL's
communicator lines) and which GPU (its architecture picks NCCL's constants and its intra-node
link, see `hardware.intra_node_link`); the NIC speed is never in a trace or an NCCL log, so
runs across nodes need it given (`link_peak`). NCCL's model covers all-reduce, all-gather and
reduce-scatter; other ops get no NCCL prediction.
"""

from __future__ import annotations

import re

import numpy as np

from commwall.analysis.model.collectives import Link, Topology
from commwall.analysis.model.hardware import LinkSpec
from commwall.analysis.model.nccl_tuning import NcclTopo, nccl_predict, nccl_topo

#: Ops NCCL's tuning model predicts.
NCCL_OPS = ("allreduce", "allgather", "reduce_scatter")
_ARCHS = (("V100", "volta"), ("A100", "ampere"), ("H100", "hopper"), ("H200", "hopper"))


def arch_of(gpu_name: str | None) -> str | None:
    """NCCL's architecture family of a GPU name (None for unknown or non-NVIDIA devices)."""
    for pattern, arch in (*_ARCHS, ("B200", "blackwell")):
        if gpu_name and re.search(rf"\b{pattern}\b", gpu_name):
            return arch
    return None


def run_topo(
    facts: dict, intra: LinkSpec | None, net: LinkSpec | None, n: int | None = None
) -> NcclTopo | str:
    """What NCCL's tuner would see on the run, or 'not available: reason'."""
    arch = arch_of(facts.get("gpu"))
    if arch is None:
        return f"not available: no NVIDIA GPU architecture known ({facts.get('gpu') or 'no GPU'})"
    n = n or facts.get("n_ranks")
    nodes, per = facts.get("n_nodes") or 1, facts.get("gpus_per_node")
    if not n or n < 2 or n % nodes:
        return f"not available: {n} ranks on {nodes} node(s)"
    per = per if per and per * nodes == n else n // nodes
    if nodes == 1:
        if intra is None or not intra.name.startswith("NVLink"):
            return "not available: the GPUs' NVLink is not known (PCIe is not modelled)"
        return nccl_topo(Topology(n, Link(intra.line_Bps), n, Link(intra.line_Bps)), arch)
    if net is None:
        return "not available: the NIC speed is not in the trace or logs (give --link-peak)"
    nvlink = Link(intra.line_Bps) if intra is not None and per > 1 else None
    if per > 1 and nvlink is None:
        return "not available: the GPUs' NVLink is not known"
    return nccl_topo(Topology(n, Link(net.line_Bps), per, nvlink), arch)


def nccl_times(topo: NcclTopo, op: str, sizes: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """NCCL's predicted time (s) and its choice 'Algo/Proto' for each message size; NaN and ''
    for ops NCCL's model does not cover."""
    times, picks = np.full(len(sizes), np.nan), [""] * len(sizes)
    if op not in NCCL_OPS:
        return times, picks
    # a run repeats a few message sizes thousands of times: predict each size once
    unique, where = np.unique(np.asarray(sizes, dtype=float), return_inverse=True)
    times_u, picks_u = np.full(len(unique), np.nan), [""] * len(unique)
    for i, size in enumerate(unique):
        choices = nccl_predict(op, int(size), topo)
        if choices:
            times_u[i] = choices[0].time_s
            picks_u[i] = f"{choices[0].algorithm}/{choices[0].protocol}"
    return times_u[where], [picks_u[i] for i in where]
