"""NCCL's own cost model (`src/graph/tuning.cc`, `src/enqueue.cc`, NCCL 2.30.7-1; docs/model.md).

For every enabled (algorithm, protocol) NCCL predicts `time[µs] = lat + nBytes / (1000·algBw)`
and runs the argmin. Modelled here: Ring, Tree and PAT with the LL, LL128 and Simple protocols.
NVLS and CollNet are not: their bandwidths come from NCCL's topology search, which this module
does not replicate (the α-β `nvls` and `sharp` algorithms cover them). Latencies are µs,
bandwidths GB/s (decimal) per channel, as in NCCL.
"""

from __future__ import annotations

from dataclasses import dataclass

from commwall.analysis.model.collectives import Topology

VERSION = "2.30.7-1"
PROTOCOLS = ("LL", "LL128", "Simple")
ARCHS = ("volta", "ampere", "hopper", "blackwell")
_CC = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}

#: baseLat[algorithm] = (LL, LL128, Simple), µs.
BASE_LAT = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4), "PAT": (8.0, 8.0, 8.0)}
#: hwLat[hardware][algorithm] = (LL, LL128, Simple), µs.
HW_LAT = {
    "nvlink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4), "PAT": (0.0, 0.0, 4.0)},
    "pci": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7), "PAT": (0.0, 0.0, 4.0)},
    "net": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0), "PAT": (0.0, 0.0, 14.0)},
}
#: Per-channel caps, GB/s, by architecture for [1, 2, >= 3 nodes].
LL_MAX_BWS = {
    "volta": (39.0, 39.0, 20.4),
    "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0),
    "blackwell": (282.0, 90.0, 70.0),
}
PER_CH_MAX_RING_LL128_BWS = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 36.7),
    "blackwell": (40.0, 40.0, 40.0),
}
PER_CH_MAX_TREE_LL128_BWS = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
PER_CH_MAX_TREE_BWS = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
#: Tree all-reduce bandwidth correction by i = log2(nBytes >> 6), 0 <= i < 23.
TREE_CORRECTION = {
    "LL": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1),
    "LL128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8,
               .9, .9),
}  # fmt: skip
#: Network post overhead per CPU vendor, µs.
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
#: NCCL's NVLink bandwidth per link (`topo.h` SMxx_NVLINK_BW) and the line rate per link per
#: direction of that NVLink generation, GB/s.
NVLINK_BW = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}
NVLINK_LINE_PER_LINK = {"volta": 25.0, "ampere": 25.0, "hopper": 25.0, "blackwell": 50.0}
#: sm90 inter-node speed ladder of the topology search (`search.cc`), GB/s per channel.
INTER_LADDER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0)


@dataclass(frozen=True)
class NcclTopo:
    """What NCCL's tuner knows of a communicator: ranks, nodes, channels and the per-channel
    bandwidths its topology search found (GB/s), GPU architecture, CPU vendor."""

    n_ranks: int
    n_nodes: int
    bw_intra_GBps: float
    bw_inter_GBps: float
    n_channels: int = 2
    arch: str = "hopper"
    cpu: str = "intel"
    intra_hw: str = "nvlink"
    latency_inter_us: float = 0.0
    plain_tree_pattern: bool = False
    protocols: tuple[str, ...] = PROTOCOLS

    def __post_init__(self) -> None:
        if self.arch not in ARCHS or self.cpu not in NET_OVERHEAD_US:
            raise ValueError(f"arch must be one of {ARCHS}, cpu one of {tuple(NET_OVERHEAD_US)}")
        if self.n_ranks < 2 or self.n_nodes < 1 or self.n_ranks % self.n_nodes:
            raise ValueError(f"{self.n_ranks} ranks do not fill {self.n_nodes} nodes")

    @property
    def ppn(self) -> int:
        """Ranks per node."""
        return self.n_ranks // self.n_nodes


@dataclass(frozen=True)
class NcclChoice:
    """NCCL's prediction for one (algorithm, protocol): latency (µs, after per-size
    corrections), algorithm bandwidth (GB/s, after corrections) and time (s)."""

    algorithm: str
    protocol: str
    latency_us: float
    algbw_GBps: float
    time_s: float


def _log2i(n: int) -> int:
    """NCCL's log2i: floor(log2 n), 0 for n <= 1."""
    return max(int(n).bit_length() - 1, 0)


def _applies(op: str, algo: str, proto: str, t: NcclTopo) -> bool:
    if proto not in t.protocols:
        return False
    if algo == "Ring":
        return op in ("allreduce", "allgather", "reduce_scatter")
    if algo == "Tree":
        return op == "allreduce"
    return op in ("allgather", "reduce_scatter") and proto == "Simple" and t.ppn == 1


def _nsteps(op: str, n: int) -> int:
    return 2 * (n - 1) if op == "allreduce" else n - 1


def _bus_bw(op: str, algo: str, proto: str, t: NcclTopo) -> float:
    """Bus bandwidth of (algo, proto), GB/s: nChannels × per-channel bandwidth, refined."""
    nodes, nch, i = t.n_nodes, t.n_channels, min(t.n_nodes - 1, 2)
    ll_row = t.arch if nodes == 1 else ("ampere" if t.cpu == "amd" else "volta")
    ll_max = LL_MAX_BWS[ll_row][i]
    bus = nch * (t.bw_intra_GBps if nodes <= 2 else t.bw_inter_GBps)
    if algo == "Ring" and proto == "LL":
        bus = min(ll_max, bus * 0.5)
    if algo == "Ring" and proto == "LL128":
        bus = min(bus * 0.92, nch * PER_CH_MAX_RING_LL128_BWS[t.arch][i])
    if algo == "Tree":
        bus = min(bus * 0.92, nch * PER_CH_MAX_TREE_BWS[t.arch][i])
        if proto == "LL":
            bus = min(bus / 3.8, ll_max)
        if proto == "LL128":
            ll128 = 7 / 9 if nodes == 1 else 120 / 128
            bus = min(bus * ll128, nch * PER_CH_MAX_TREE_LL128_BWS[t.arch][i])
        if t.plain_tree_pattern:
            bus *= 0.85
    if algo == "PAT":
        bus *= 0.75
    return bus


def _latency(op: str, algo: str, proto: str, t: NcclTopo) -> float:
    """Latency of (algo, proto), µs: base + per-step hardware latencies."""
    k, nodes = PROTOCOLS.index(proto), t.n_nodes
    intra = HW_LAT[t.intra_hw][algo][k]
    inter = HW_LAT["net"]["Tree" if t.ppn == 1 else algo][k] + t.latency_inter_us
    if proto == "Simple":
        inter += t.latency_inter_us
    lat = BASE_LAT[algo][k]
    if algo == "Ring":
        if nodes > 1:
            intra = max(intra, NET_OVERHEAD_US[t.cpu] * (3 if proto == "Simple" else 1))
        n_inter = 0 if nodes == 1 else _nsteps(op, nodes)
        return lat + (_nsteps(op, t.n_ranks) - n_inter) * intra + n_inter * inter
    if algo == "Tree":
        return lat + 2 * ((t.ppn - 1) * intra + _log2i(nodes) * inter)
    return lat + _log2i(nodes) * inter / 3.5 + t.n_ranks * 2.8


def tuning_table(op: str, t: NcclTopo) -> dict[tuple[str, str], tuple[float, float]]:
    """NCCL's table for `op` (`ncclTopoTuneModel`): (algorithm, protocol) → (latency µs,
    algorithm bandwidth GB/s), before the per-size corrections of `nccl_time`. Bus to
    algorithm bandwidth: Ring n/nsteps, Tree 1/2, PAT 1."""
    ratio = {"Ring": t.n_ranks / _nsteps(op, t.n_ranks), "Tree": 0.5, "PAT": 1.0}
    return {
        (a, p): (_latency(op, a, p, t), _bus_bw(op, a, p, t) * ratio[a])
        for a in ("Tree", "Ring", "PAT")
        for p in PROTOCOLS
        if _applies(op, a, p, t)
    }


def nccl_time(
    op: str, algo: str, proto: str, nbytes: int, t: NcclTopo, fp8: bool = False
) -> NcclChoice | None:
    """NCCL's predicted time of one `op` of `nbytes` (`ncclTopoGetAlgoTime`); None when NCCL
    would not consider that (algorithm, protocol). nbytes is the buffer for all-reduce and the
    total for all-gather and reduce-scatter. `fp8`: FP8 reductions on rings of more than 8
    ranks are priced ×1024 so that NCCL avoids them."""
    entry = tuning_table(op, t).get((algo, proto))
    if entry is None:
        return None
    lat, bw = entry
    i = _log2i(nbytes >> 6)
    if algo == "Tree" and op == "allreduce" and i < 23:
        bw *= TREE_CORRECTION[proto][i]
    plateau = nbytes // (t.n_channels * t.n_ranks) >= 64
    if algo == "Ring" and proto == "Simple" and t.n_nodes > 1 and op == "allreduce" and plateau:
        lat *= 1.9 if _CC[t.arch] < 80 else 1.4
    time_us = lat + nbytes / (1000 * bw)
    if fp8 and algo == "Ring" and t.n_ranks > 8 and op in ("allreduce", "reduce_scatter"):
        time_us *= 1024
    return NcclChoice(algo, proto, lat, bw, time_us * 1e-6)


def nccl_predict(op: str, nbytes: int, t: NcclTopo, fp8: bool = False) -> list[NcclChoice]:
    """Every (algorithm, protocol) NCCL considers for `op` of `nbytes`, fastest first: the
    first is NCCL's choice."""
    table = tuning_table(op, t)
    choices = [nccl_time(op, a, p, nbytes, t, fp8) for a, p in table]
    return sorted((c for c in choices if c is not None), key=lambda c: c.time_s)


def _ladder(bw_GBps: float) -> float:
    """The fastest rung of the search ladder a link of `bw_GBps` sustains (itself below it)."""
    return next((s for s in INTER_LADDER if s <= bw_GBps), bw_GBps)


def _nvlink_GBps(t: Topology, arch: str) -> float:
    """NCCL's NVLink bandwidth: per-link `SMxx_NVLINK_BW` × the links the per-direction
    bandwidth of `t.nvlink` implies (450 GB/s on Hopper → 18 × 20.6 = 370.8 GB/s)."""
    return t.intra.bandwidth_Bps / 1e9 / NVLINK_LINE_PER_LINK[arch] * NVLINK_BW[arch]


def nccl_topo(t: Topology, arch: str = "hopper", cpu: str = "intel") -> NcclTopo:
    """An approximation of what NCCL's topology search finds on `t`. Within one node: NCCL's
    NVLink bandwidth shared by 16 channels. Across nodes: one channel per NIC at the ladder
    speed of the NIC, duplicated (×2 channels at half speed) when that speed is >= 25 GB/s,
    capped by NCCL's NVLink bandwidth when nodes hold several GPUs; one ring speed serves
    both levels."""
    if t.n_nodes == 1:
        bw = _nvlink_GBps(t, arch) / 16
        return NcclTopo(t.n_gpus, 1, bw, bw, 16, arch, cpu)
    speed = _ladder(t.net.bandwidth_Bps / 1e9)
    dup = 2 if speed >= 25.0 else 1
    n_ch = t.nics * dup
    bw = speed / dup
    if t.gpus_per_node > 1:
        bw = min(bw, _nvlink_GBps(t, arch) / n_ch)
    return NcclTopo(t.n_gpus, t.n_nodes, bw, bw, n_ch, arch, cpu)
