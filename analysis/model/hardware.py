"""Known links and defaults: line rates, achievable bus bandwidths (docs/model.md), latency priors.

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
    """A link generation: per-direction line rate and the ring busbw others measured on it
    (None where no measured figure is known to us)."""

    name: str
    line_Bps: float
    achievable_Bps: float | None


#: NVLink4 (H100/H200 SXM): 18 links × 25 GB/s per direction; ring busbw ~370 GB/s measured.
NVLINK4 = LinkSpec("NVLink4", 450e9, 370e9)

#: Common fabrics, per-direction line rates (GB = 1e9 B). NVLink: links × per-link rate of the
#: generation (V100 SXM2 6 × 25, A100 SXM 12 × 25, H100/H200 SXM 18 × 25, B200 18 × 50 GB/s).
#: PCIe x16 after encoding overhead (Gen3 8 GT/s → 15.75 GB/s, doubling per generation). NICs:
#: the signalling rate ÷ 8 (InfiniBand HDR 200 Gb/s, NDR 400, XDR 800; Ethernet/RoCE 100 to
#: 800 Gb/s). Achievable ring busbw only where nccl-tests figures were published (NVLink3
#: ~230: 8 × A100 SXM over NVSwitch, e.g. 235 GB/s at 8 GiB in tests/data/nccl_tests; NVLink4
#: ~370, NDR ~47, HDR ~24 GB/s per NIC).
LINKS: dict[str, LinkSpec] = {
    s.name: s
    for s in (
        LinkSpec("NVLink2", 150e9, None),
        LinkSpec("NVLink3", 300e9, 230e9),
        NVLINK4,
        LinkSpec("NVLink5", 900e9, None),
        LinkSpec("PCIe Gen3 x16", 15.75e9, None),
        LinkSpec("PCIe Gen4 x16", 31.5e9, None),
        LinkSpec("PCIe Gen5 x16", 63e9, None),
        LinkSpec("InfiniBand HDR 200 Gb/s", 25e9, 24e9),
        LinkSpec("InfiniBand NDR 400 Gb/s", 50e9, 47e9),
        LinkSpec("InfiniBand XDR 800 Gb/s", 100e9, None),
        LinkSpec("Ethernet/RoCE 100 Gb/s", 12.5e9, None),
        LinkSpec("Ethernet/RoCE 200 Gb/s", 25e9, None),
        LinkSpec("Ethernet/RoCE 400 Gb/s", 50e9, None),
        LinkSpec("Ethernet/RoCE 800 Gb/s", 100e9, None),
    )
}

#: GPU name pattern → (link of SXM parts inside one node, PCIe generation of PCIe cards).
_GPUS = (
    (r"\bV100\b", "NVLink2", "PCIe Gen3 x16"),
    (r"\bA100\b", "NVLink3", "PCIe Gen4 x16"),
    (r"\bH(100|200)\b", "NVLink4", "PCIe Gen5 x16"),
    (r"\bB200\b", "NVLink5", None),
)


def nvlink_of(gpu_name: str | None) -> LinkSpec | None:
    """The NVLink of an SXM GPU whose link figures we know (H100, H200), or None (PCIe and NVL
    cards, H800's reduced NVLink, other generations); kept for callers that want only links
    with a measured achievable figure."""
    spec = intra_node_link(gpu_name)
    return spec if spec is NVLINK4 else None


def intra_node_link(gpu_name: str | None) -> LinkSpec | None:
    """The link between GPUs of one node from the GPU's name: the NVLink generation of SXM
    parts (V100, A100, H100/H200, B200), the PCIe generation of PCIe cards; None when the
    name says neither (H800/H20 reduced NVLink, NVL cards, unknown parts)."""
    if not gpu_name or re.search(r"\bNVL\b|\bH(800|20)\b", gpu_name):
        return None
    for pattern, nvlink, pcie in _GPUS:
        if re.search(pattern, gpu_name):
            name = pcie if "PCIe" in gpu_name else nvlink
            return LINKS[name] if name else None
    return None


def link_for_peak(text: str) -> LinkSpec:
    """A `--link-peak` value: a name or unambiguous part of one from LINKS ('NDR', 'NVLink3')
    or a bandwidth with units ('50GB/s', '400Gbps', per direction)."""
    from commwall.analysis.model.units import parse_bandwidth

    hits = [s for name, s in LINKS.items() if text.lower() in name.lower()]
    if len(hits) == 1:
        return hits[0]
    try:
        return LinkSpec(f"given ({text})", parse_bandwidth(text), None)
    except ValueError as e:
        known = ", ".join(LINKS)
        raise ValueError(f"--link-peak {text!r}: not a bandwidth ({e}) nor one of: {known}") from e
