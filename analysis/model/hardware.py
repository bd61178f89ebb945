"""Known links and defaults: line rates, achievable bus bandwidths (MODEL.md §5), latency priors.

Line rates are per direction (NVLink's "900 GB/s" is the bidirectional aggregate of 450 GB/s
each way). Achievable figures are nccl-tests ring busbw measured by others, not guarantees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Default per-hop latencies: NCCL 2.30's hwLat for Ring/Simple (NET 14 µs, NVLink 3.4 µs).
DEFAULT_NET_ALPHA_S = 14e-6
DEFAULT_NVLINK_ALPHA_S = 3.4e-6
#: NVLink4 (H100/H200 SXM) as vendors quote it: bidirectional aggregate, bytes/s.
DEFAULT_NVLINK_BIDIR_Bps = 900e9


@dataclass(frozen=True)
class LinkSpec:
    """A link generation: per-direction line rate and the ring busbw others measured on it."""

    name: str
    line_Bps: float
    achievable_Bps: float


#: NVLink4 (H100/H200 SXM): 18 links × 25 GB/s per direction; ring busbw ~370 GB/s measured.
NVLINK4 = LinkSpec("NVLink4", 450e9, 370e9)


def nvlink_of(gpu_name: str | None) -> LinkSpec | None:
    """The NVLink of an SXM GPU whose link figures we know (H100, H200), or None (PCIe and NVL
    cards, H800's reduced NVLink, other generations)."""
    if not gpu_name or re.search(r"PCIe|\bNVL\b", gpu_name):
        return None
    if re.search(r"\bH(100|200)\b", gpu_name):
        return NVLINK4
    return None
