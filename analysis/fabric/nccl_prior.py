"""NCCL's own tuning model, uncalibrated, on the fabric of an nccl-tests table (docs/model.md):
its GPU's architecture and NVLink, its ranks and nodes, and the NIC's speed where given. Inside
one node of Hopper (or later) SXM GPUs, more than 2 of them, the node is taken as an NVSwitch
board and NCCL's NVLS (NVLink SHARP) is on, as NCCL enables it by default there."""

from __future__ import annotations

from dataclasses import replace

from commwall.analysis.fabric.tables import Table
from commwall.analysis.model.hardware import LinkSpec, intra_node_link
from commwall.analysis.model.nccl_run import run_topo
from commwall.analysis.model.nccl_tuning import NcclTopo, nccl_predict, with_nvls

#: Ops NCCL's tuning model prices (send/recv and all-to-all run outside it).
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")


def table_topo(t: Table, link_peak: LinkSpec | None) -> NcclTopo | str:
    """What NCCL's tuner would see on the table's fabric, or 'not available: reason'."""
    if t.op not in OPS:
        return f"not available: NCCL's tuning model does not price {t.op or 'an unknown op'}"
    if t.n_nodes is None:
        return "not available: the number of nodes is not known (give --nodes)"
    facts = {
        "gpu": t.gpu,
        "n_ranks": t.n_ranks,
        "n_nodes": t.n_nodes,
        "gpus_per_node": t.gpus_per_node,
    }
    intra = intra_node_link(t.gpu)
    if intra is None and t.n_nodes == 1 and link_peak is not None:
        intra = link_peak
    topo = run_topo(facts, intra, link_peak if t.n_nodes > 1 else None)
    return topo if isinstance(topo, str) else with_nvls(topo)


def fabric_topo(t: Table, link_peak: LinkSpec | None = None) -> NcclTopo | None:
    """What NCCL's tuner would see on the table's fabric whatever the table's op (send/recv and
    all-to-all included), or None where it is not known: what a prediction carried across ops
    asks NCCL's model (does the all-reduce run NVLS there?)."""
    topo = table_topo(replace(t, op="allreduce"), link_peak)
    return None if isinstance(topo, str) else topo


def nccl_time_us(op: str, size: int, topo: NcclTopo) -> tuple[float, str] | None:
    """NCCL's predicted time (µs) of `op` of `size` bytes and its choice 'Algo/Proto'."""
    choices = nccl_predict(op, size, topo)
    if not choices:
        return None
    return choices[0].time_s * 1e6, f"{choices[0].algorithm}/{choices[0].protocol}"
