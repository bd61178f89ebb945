"""NCCL's own cost model (`src/graph/tuning.cc`, `src/enqueue.cc`, NCCL 2.30.7-1; docs/model.md).

For every enabled (algorithm, protocol) NCCL predicts `time[µs] = lat + nBytes / (1000·algBw)`
and runs the argmin. Modelled here: Ring, Tree and PAT with the LL, LL128 and Simple protocols,
and NVLS (NVLink SHARP, `src/tuning/nvls.cc`) inside one NVSwitch node, with the channels and
bandwidths of NCCL's NVLS search (`src/graph/search.cc`, see `with_nvls`). NVLS Tree and CollNet
are not (across nodes their bandwidths need the NICs' SHARP support; the α-β `nvls` and `sharp`
algorithms cover them). Latencies are µs, bandwidths GB/s (decimal) per channel, as in NCCL.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commwall.analysis.model.collectives import Topology

VERSION = "2.30.7-1"
PROTOCOLS = ("LL", "LL128", "Simple")
ARCHS = ("volta", "ampere", "hopper", "blackwell")
_CC = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}

#: baseLat[algorithm] = (LL, LL128, Simple), µs.
BASE_LAT = {
    "Tree": (6.8, 14.0, 8.4),
    "Ring": (6.6, 14.0, 8.4),
    "PAT": (8.0, 8.0, 8.0),
    "NVLS": (0.0, 0.0, 0.0),
}
#: hwLat[hardware][algorithm] = (LL, LL128, Simple), µs.
HW_LAT = {
    "nvlink": {
        "Tree": (0.6, 1.25, 4.0),
        "Ring": (0.6, 1.9, 3.4),
        "PAT": (0.0, 0.0, 4.0),
        "NVLS": (0.0, 0.0, 25.0),
    },
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
#: Intra-node speed ladders of the search (`sm90SpeedArrayIntra`, `sm100SpeedArrayIntra`), GB/s.
INTRA_LADDER = {
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
#: `nvlsEfficiency` per architecture (`src/tuning/nvls.cc`; 0: no NVLS before Hopper).
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
#: `NCCL_MAX_NVLS_ARITY`: NVLS channels (heads) at most.
NVLS_MAX_ARITY = 32


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
    #: NCCL's NVLS graph: channels (0: NVLS off) and its per-channel bwIntra / bwInter, GB/s.
    nvls_channels: int = 0
    nvls_bw_intra_GBps: float = 0.0
    nvls_bw_inter_GBps: float = 0.0

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
        return op in ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")
    if algo == "Tree":
        return op == "allreduce"
    if algo == "NVLS":
        return (
            op in ("allreduce", "allgather", "reduce_scatter")
            and proto == "Simple"
            and t.nvls_channels >= 2
            and t.n_nodes == 1
            and NVLS_EFFICIENCY[t.arch] > 0
        )
    return op in ("allgather", "reduce_scatter") and proto == "Simple" and t.ppn == 1


def _nsteps(op: str, n: int) -> int:
    """NCCL's ring steps: all-reduce 2(n−1); reduce-scatter, all-gather n−1; broadcast and
    reduce (a pipelined chain) n."""
    if op in ("broadcast", "reduce"):
        return n
    return 2 * (n - 1) if op == "allreduce" else n - 1


def _nvls_bus_bw(op: str, t: NcclTopo) -> float:
    """NVLS bus bandwidth, GB/s (`ncclTuningNvlsModelInit`): per channel bwIntra ×
    nvlsEfficiency × (nCh−1)/nCh, ×2 for all-reduce (the switch reduces: each byte crosses a
    GPU's link once each way), ×(ppn−1)/ppn for all-gather and reduce-scatter; capped by
    bwInter; × nCh."""
    nch = t.nvls_channels
    intra = t.nvls_bw_intra_GBps * NVLS_EFFICIENCY[t.arch] * (nch - 1) / nch
    intra *= 2.0 if op == "allreduce" else (t.ppn - 1) / t.ppn
    return min(intra, t.nvls_bw_inter_GBps) * nch


def _bus_bw(op: str, algo: str, proto: str, t: NcclTopo) -> float:
    """Bus bandwidth of (algo, proto), GB/s: nChannels × per-channel bandwidth, refined."""
    if algo == "NVLS":
        return _nvls_bus_bw(op, t)
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
    if algo == "NVLS":  # one node: hwLat[NVLink][NVLS] alone (baseLat 0)
        return BASE_LAT[algo][k] + HW_LAT["nvlink"][algo][k]
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
    algorithm bandwidth: Ring and NVLS n/nsteps, Tree 1/2, PAT 1."""
    ring = t.n_ranks / _nsteps(op, t.n_ranks)
    ratio = {"Ring": ring, "NVLS": ring, "Tree": 0.5, "PAT": 1.0}
    return {
        (a, p): (_latency(op, a, p, t), _bus_bw(op, a, p, t) * ratio[a])
        for a in ("Tree", "Ring", "PAT", "NVLS")
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


def nvls_speedup(op: str, nbytes: int, t: NcclTopo) -> float:
    """How much faster NCCL's choice runs `op` of `nbytes` than its best choice without NVLS
    (1.0 where NVLS is off or not chosen): the factor by which NVLink SHARP beats the bytes a
    ring or tree puts on the links."""
    choices = nccl_predict(op, nbytes, t)
    plain = next((c for c in choices if c.algorithm != "NVLS"), None)
    if not choices or plain is None or choices[0].algorithm != "NVLS":
        return 1.0
    return plain.time_s / choices[0].time_s


def with_nvls(t: NcclTopo) -> NcclTopo:
    """`t` with the NVLS graph NCCL's search finds inside one NVSwitch node of Hopper or later
    GPUs (`search.cc`; NCCL enables NVLS with more than 2 GPUs, `NCCL_NVLS_ENABLE` default):
    one channel per GPU (heads, at most NCCL_MAX_NVLS_ARITY); bwIntra the fastest rung of the
    intra-node ladder at which every GPU's NVLink carries its channels (twice as head of its
    own, once for each other: (nCh+1)·bw <= NVLink) with nCh·bw within the NVLink × n/(n−1)
    the search allows; bwInter raised rung by rung while below 2 × bwIntra (the search's
    second pass). `t` unchanged across nodes, before Hopper, or with 2 GPUs or fewer."""
    ladder = INTRA_LADDER.get(t.arch)
    if t.n_nodes != 1 or t.n_ranks <= 2 or ladder is None or not NVLS_EFFICIENCY[t.arch]:
        return t
    nvlink = t.n_channels * t.bw_intra_GBps
    nch = min(NVLS_MAX_ARITY, t.n_ranks)
    total = nvlink * t.n_ranks / (t.n_ranks - 1)
    fits = [s for s in ladder if s <= nvlink and s * nch <= total and (nch + 1) * s <= nvlink]
    if not fits:
        return t
    intra = fits[0]
    k = ladder.index(intra)
    inter = intra
    while k > 0 and inter < 2 * intra:
        k -= 1
        inter = ladder[k]
    return replace(t, nvls_channels=nch, nvls_bw_intra_GBps=intra, nvls_bw_inter_GBps=inter)


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
