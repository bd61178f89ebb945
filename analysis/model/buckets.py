"""Gradient buckets: how many collectives a step makes, and their summed cost (docs/model.md).

DDP packs gradients into buckets of `bucket_cap_mb` (25 MiB = 25·1024·1024 B by default) and
launches one all-reduce per bucket, so latency is paid per bucket. Every bucket but the last
is full (parameters are never split, so real counts can be lower; count them from a trace
when there is one).
"""

from __future__ import annotations

from commwall.analysis.model.collectives import Cost, Topology, collective_cost
from commwall.analysis.model.nccl_tuning import NcclChoice, NcclTopo, nccl_predict
from commwall.analysis.model.units import MiB

DDP_BUCKET_BYTES = 25 * MiB


def bucket_sizes(total_bytes: float, cap_bytes: float | None) -> list[tuple[float, int]]:
    """(size, count) of the buckets of `total_bytes`: full buckets of `cap_bytes` and the
    remainder; one bucket when `cap_bytes` is None or 0."""
    if total_bytes <= 0:
        return []
    if not cap_bytes or cap_bytes >= total_bytes:
        return [(total_bytes, 1)]
    full = int(total_bytes // cap_bytes)
    rest = total_bytes - full * cap_bytes
    sizes = [(cap_bytes, full)]
    if rest > cap_bytes * 1e-9:
        sizes.append((rest, 1))
    return sizes


def n_collectives(total_bytes: float, cap_bytes: float | None) -> int:
    """Collectives per step: ⌈M / cap⌉."""
    return sum(n for _, n in bucket_sizes(total_bytes, cap_bytes))


def step_cost(
    op: str,
    algorithm: str,
    total_bytes: float,
    cap_bytes: float | None,
    t: Topology,
    compression: float = 1.0,
) -> Cost | None:
    """Summed α-β cost of the step's `op` collectives; each bucket travels as size/compression
    bytes. None when the algorithm does not apply."""
    if collective_cost(op, algorithm, 0.0, t) is None:
        return None
    total = Cost(0.0, 0.0)
    for size, count in bucket_sizes(total_bytes, cap_bytes):
        cost = collective_cost(op, algorithm, size / compression, t)
        if cost is None:  # applicability depends on op and topology, not on the size
            return None
        total = total + cost * count
    return total


def nccl_step(
    op: str,
    total_bytes: float,
    cap_bytes: float | None,
    t: NcclTopo,
    compression: float = 1.0,
    fp8: bool = False,
) -> list[tuple[float, int, NcclChoice]]:
    """NCCL's choice for each bucket size: (size on the wire, count, choice)."""
    out = []
    for size, count in bucket_sizes(total_bytes, cap_bytes):
        wire = size / compression
        out.append((wire, count, nccl_predict(op, int(round(wire)), t, fp8)[0]))
    return out
