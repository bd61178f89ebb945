"""One calibration carried to other ops and other GPU counts on the same fabric (docs/model.md).

A curve calibrated on a reference op (all-reduce) prices bytes on that fabric's links. Another
op of S bytes costs what the reference costs at the size that puts as many bytes on the same
links per rank, `S_eq`:

* ring ops (all-reduce, reduce-scatter, all-gather, broadcast, reduce): each rank sends
  factor·S bytes (the nccl-tests bus-bandwidth factor: 2(n−1)/n, (n−1)/n, 1), so
  S_eq = S·factor(op)/factor(ref);
* all-to-all within one node is priced like a ring op (NVSwitch gives each pair the GPU's
  NVLink); across nodes each rank sends (p−g)/p·S through its share of the node's NICs, and the
  ring's bus bandwidth is the g GPUs' NICs together, so S_eq = S·g·(p−g)/(p·factor(ref));
* send/recv moves S to one peer: S_eq = S/factor(ref) within a node; across nodes
  S·g/(factor(ref)·share), the GPU's NIC (one per GPU assumed) times the share of it one peer's
  channels drive (`net_peer_share`: NCCL gives a remote peer 2 channels, 1 in communicators of
  more than 8 nodes, and drives a NIC of >= 25 GB/s with 2: half that NIC).

NVLS (NVLink SHARP): where NCCL's model (with NVLS, analysis/model/nccl_tuning.py) runs an op on
NVLS, the switch does the reduction and the bytes on the links no longer price it; the time is
then scaled by NCCL's NVLS speedup (its best time without NVLS over its choice) of the reference
at S_eq, over that of the op at S: t = t_ref(S_eq) · speedup(ref, S_eq) / speedup(op, S). Both
are 1 where NVLS is off (before Hopper, across nodes, 2 GPUs or fewer) or not chosen.

Across GPU counts (tables of the same ops on the same nodes with g and g' GPUs per node): the
ring's bus bandwidth across nodes grows with the NICs the GPUs bring (one NIC per GPU assumed),
so S_eq = S·factor'/factor·g/g'; within one node the GPUs' NVLink does not change, S_eq =
S·factor'/factor. Latency is the reference's at S_eq: NCCL's per-step latencies are small
beside the launch cost that nccl-tests' small sizes show.
"""

from __future__ import annotations

from commwall.analysis.fabric.curve import Curve
from commwall.analysis.model.busbw import busbw_factor
from commwall.analysis.model.nccl_tuning import NcclTopo, nvls_speedup

RING_OPS = ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")
P2P_OPS = ("alltoall", "sendrecv", "send", "recv")
#: NCCL duplicates the ring's channel on a NIC whose search speed is at least this (GB/s,
#: `ncclTopoDupChannels`): such a NIC is driven by 2 channels, slower ones by 1.
DUP_CHANNEL_GBPS = 25.0


def net_peer_channels(n: int, nodes: int, per_nic: int = 2) -> int:
    """NCCL's point-to-point channels per remote peer (`ncclTopoGetNchannels`, paths.cc): 2 per
    NIC, halved while 2·n exceeds 4 × the communicator's p2p channels; those are its collective
    channels, `per_nic` per NIC (the ring's: 2 where duplicated) doubled at setup
    (`ncclTopoPostset`), one NIC per GPU: with 2, 1 channel per peer beyond 8 nodes."""
    p2p_channels = 2 * per_nic * max(n // max(nodes, 1), 1)
    channels = 2
    while channels * n > 4 * p2p_channels and channels > 1:
        channels //= 2
    return channels


def net_peer_share(n: int, nodes: int, nic_GBps: float | None) -> float:
    """The share of its NIC one remote peer's channels drive: `net_peer_channels` over the
    channels NCCL drives the NIC with (2 for a NIC of >= DUP_CHANNEL_GBPS, 1 below; 2 when its
    speed is not known)."""
    per_nic = 1 if nic_GBps is not None and nic_GBps < DUP_CHANNEL_GBPS else 2
    return min(net_peer_channels(n, nodes, per_nic) / per_nic, 1.0)


def equivalent_size(
    op: str,
    size: float,
    n: int,
    nodes: int | None,
    ref_op: str = "allreduce",
    nic_GBps: float | None = None,
) -> float | None:
    """The size of `ref_op` on the same n ranks that loads the links as `op` of `size` does;
    None for an op with no bus-bandwidth convention or an all-to-all / send-recv across an
    unknown number of nodes. `nic_GBps`: each GPU's NIC bandwidth where known (the ring's bus
    bandwidth per GPU), for the channels that drive it (`net_peer_share`)."""
    try:
        f_ref, f_op = busbw_factor(ref_op, n), busbw_factor(op, n)
    except ValueError:
        return None
    if op in RING_OPS:
        return size * f_op / f_ref
    if nodes is None or nodes < 1 or n % nodes:
        return None
    g = n // nodes
    if op == "alltoall":
        return size * f_op / f_ref if nodes == 1 else size * g * (n - g) / (n * f_ref)
    if nodes == 1:
        return size / f_ref
    return size * g / (f_ref * net_peer_share(n, nodes, nic_GBps))


def nic_bandwidth(ref: Curve, ref_op: str, n: int, nodes: int | None) -> float | None:
    """Each GPU's share of the network (GB/s) as the reference measured it across nodes: its
    bus bandwidth at its largest size over the GPUs per node (None within one node)."""
    if nodes is None or nodes < 2 or n % nodes:
        return None
    try:
        factor = busbw_factor(ref_op, n)
    except ValueError:
        return None
    return factor * ref.sizes[-1] / ref.times[-1] / (n // nodes) / 1e9


def cross_op_time(
    ref: Curve,
    ref_op: str,
    op: str,
    size: float,
    n: int,
    nodes: int | None,
    topo: NcclTopo | None = None,
) -> float | None:
    """Time (s) of `op` of `size` bytes predicted from the curve of `ref_op` on the same n
    ranks and fabric (None where `equivalent_size` is); `topo`, NCCL's view of that fabric, for
    NVLS (see the module)."""
    nic = nic_bandwidth(ref, ref_op, n, nodes) if op in P2P_OPS else None
    eq = equivalent_size(op, size, n, nodes, ref_op, nic)
    if eq is None or eq <= 0:
        return None
    t = ref.time_s(eq)
    if topo is not None:
        t *= nvls_speedup(ref_op, int(eq), topo) / nvls_speedup(op, int(size), topo)
    return t


def cross_count_time(
    ref: Curve,
    op: str,
    size: float,
    ref_n: int,
    n: int,
    nodes: int | None,
    ref_topo: NcclTopo | None = None,
    topo: NcclTopo | None = None,
) -> float | None:
    """Time (s) of `op` of `size` on n ranks from the curve of the same op on ref_n ranks of
    the same nodes (`nodes` of both; None when unknown or when either count does not fill
    them). Ring ops: bytes per rank scale with the bus-bandwidth factor, and across nodes the
    ring's bandwidth with the GPUs (one NIC each) per node; all-to-all across nodes: the bytes
    each rank sends off its node, (p−g)/p·S, through its own NIC; send/recv: S, unchanged.
    `ref_topo`, `topo`: NCCL's view of both fabrics, for NVLS (its speedup on ref_n ranks over
    that on n, as across ops)."""
    if nodes is None or nodes < 1 or n % nodes or ref_n % nodes:
        return None
    g, ref_g = n // nodes, ref_n // nodes
    try:
        f, f_ref = busbw_factor(op, n), busbw_factor(op, ref_n)
    except ValueError:
        return None
    if op in ("sendrecv", "send", "recv"):
        scale = 1.0
    elif op == "alltoall" and nodes > 1:
        scale = ((n - g) / n) / ((ref_n - ref_g) / ref_n)
    else:
        scale = f / f_ref * (ref_g / g if nodes > 1 else 1.0)
    t = ref.time_s(size * scale)
    if ref_topo is not None and topo is not None:
        t *= nvls_speedup(op, int(size * scale), ref_topo) / nvls_speedup(op, int(size), topo)
    return t
