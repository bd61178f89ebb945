"""Achievable bus bandwidth of common links (decimal GB/s), to compare measured busbw with.

Measured nccl-tests figures, not line rates (see the MODEL notes): NVLink4 ring ~370, NVLS ~480,
400 Gb/s NDR ~47 per NIC, 200 Gb/s HDR ~24 per NIC.
"""

from __future__ import annotations

LINK_PEAKS_GBPS: dict[str, float] = {
    "NVLink4 (H100 SXM), ring all-reduce": 370.0,
    "NVLink4 with NVLS (H100 SXM)": 480.0,
    "InfiniBand NDR 400 Gb/s, per NIC": 47.0,
    "InfiniBand HDR 200 Gb/s, per NIC": 24.0,
}
