"""α-β costs of collective algorithms on a one- or two-level network (docs/model.md).

Sizes follow the nccl-tests convention (docs/model.md): `m` is the per-rank buffer for all-reduce
and the total bytes for reduce-scatter, all-gather and all-to-all. A `Link` is one GPU's share
of a level: per-message latency α (s) and per-direction bandwidth B (bytes/s), β = 1/B.
Reduction arithmetic is not charged (HBM-speed reductions are far faster than links).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

OPS = (
    "allreduce",
    "reduce_scatter",
    "allgather",
    "alltoall",
    "broadcast",
    "reduce",
    "send",
    "recv",
    "sendrecv",
)
#: Point-to-point ops: one message to one peer.
P2P = ("send", "recv", "sendrecv")


@dataclass(frozen=True)
class Link:
    """One network level as seen by one GPU: bandwidth (bytes/s, per direction), latency (s)."""

    bandwidth_Bps: float
    alpha_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.bandwidth_Bps > 0 or self.alpha_s < 0:
            raise ValueError(f"bad link: {self}")


@dataclass(frozen=True)
class Topology:
    """`n_gpus` ranks in nodes of `gpus_per_node`; `net` is one NIC (one per GPU unless
    `nics_per_node` says otherwise), `nvlink` the intra-node link (needed when
    gpus_per_node > 1)."""

    n_gpus: int
    net: Link
    gpus_per_node: int = 1
    nvlink: Link | None = None
    nics_per_node: int | None = None

    def __post_init__(self) -> None:
        g = self.gpus_per_node
        if self.n_gpus < 1 or g < 1 or self.n_gpus % g:
            raise ValueError(f"{self.n_gpus} GPUs do not fill nodes of {g}")
        if g > 1 and self.nvlink is None:
            raise ValueError("gpus_per_node > 1 needs an intra-node link (nvlink)")
        if self.nics_per_node is not None and self.nics_per_node < 1:
            raise ValueError("nics_per_node must be >= 1")

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return self.n_gpus // self.gpus_per_node

    @property
    def nics(self) -> int:
        """NICs per node (default: one per GPU)."""
        return self.nics_per_node or self.gpus_per_node

    @property
    def intra(self) -> Link:
        """The intra-node link (the NIC when there is one GPU per node)."""
        return self.nvlink if self.nvlink is not None else self.net

    def net_per_gpu(self) -> Link:
        """One GPU's share of its node's NICs when all GPUs of the node use the network."""
        share = self.nics / self.gpus_per_node
        return Link(self.net.bandwidth_Bps * share, self.net.alpha_s)

    def ring_bandwidth_Bps(self) -> float:
        """Bottleneck bandwidth of a flat ring (or chain): NVLink inside one node, the NIC with
        one GPU per node, else min(NVLink, NICs per node × NIC) since the rings of the
        channels leave each node through different NICs (docs/model.md)."""
        if self.n_nodes == 1:
            return self.intra.bandwidth_Bps
        if self.gpus_per_node == 1:
            return self.net.bandwidth_Bps
        return min(self.intra.bandwidth_Bps, self.nics * self.net.bandwidth_Bps)


@dataclass(frozen=True)
class Cost:
    """Time of one collective split into its latency and bandwidth terms (s)."""

    latency_s: float
    bandwidth_s: float

    @property
    def total_s(self) -> float:
        """latency + bandwidth."""
        return self.latency_s + self.bandwidth_s

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.latency_s + other.latency_s, self.bandwidth_s + other.bandwidth_s)

    def __mul__(self, k: float) -> Cost:
        return Cost(self.latency_s * k, self.bandwidth_s * k)


def _log2_exact(n: int) -> int | None:
    """log2(n) when n is a power of two, else None."""
    return n.bit_length() - 1 if n & (n - 1) == 0 else None


def _ring_steps(op: str, q: int) -> int:
    return 2 * (q - 1) if op == "allreduce" else q - 1


def _chain(m: float, t: Topology) -> Cost:
    """Pipelined chain along the ring (NCCL's ring broadcast and reduce): the first chunk
    crosses p−1 hops (N−1 of them between nodes), then the buffer streams at the ring's
    bandwidth: `(p−1)α + m/B`."""
    inter = t.n_nodes - 1
    latency = (t.n_gpus - 1 - inter) * t.intra.alpha_s + inter * t.net.alpha_s
    return Cost(latency, m / t.ring_bandwidth_Bps())


def p2p(op: str, m: float, t: Topology) -> Cost | None:
    """Send / receive of m bytes to one peer: `α + m/B`, over the NIC when the job spans
    nodes (the peer is then assumed remote, the pipeline-parallel case), else NVLink."""
    if op not in P2P:
        return None
    link = t.net if t.n_nodes > 1 else t.intra
    return Cost(link.alpha_s, m / link.bandwidth_Bps)


def ring(op: str, m: float, t: Topology) -> Cost | None:
    """Ring: all-reduce `2(p−1)α + 2(p−1)/p·m/B`, reduce-scatter and all-gather
    `(p−1)α + (p−1)/p·m/B`, broadcast and reduce as a pipelined chain `(p−1)α + m/B`.
    With several GPUs per node, inter-node hops pay α_net and
    the others α_nvlink (NCCL's count: 2(N−1) inter steps for all-reduce, N−1 otherwise)."""
    if op in ("broadcast", "reduce"):
        return _chain(m, t)
    if op not in ("allreduce", "reduce_scatter", "allgather"):
        return None
    return _ring(op, m, t)


def _ring(op: str, m: float, t: Topology) -> Cost:
    """Ring all-reduce, reduce-scatter or all-gather (`op` is one of these three)."""
    p, n = t.n_gpus, t.n_nodes
    steps, inter = _ring_steps(op, p), _ring_steps(op, n)
    latency = (steps - inter) * t.intra.alpha_s + inter * t.net.alpha_s
    return Cost(latency, steps / p * m / t.ring_bandwidth_Bps())


def tree(op: str, m: float, t: Topology) -> Cost | None:
    """Double binary tree all-reduce (NCCL Tree): latency `2((g−1)α_nvlink + ⌈log2 N⌉α_net)`
    (a chain inside the node, a tree across nodes; `2⌈log2 p⌉α` with one GPU per node);
    bandwidth `2m/B` — the log2 hops add latency only."""
    if op != "allreduce":
        return None
    hops_net = math.ceil(math.log2(t.n_nodes)) if t.n_nodes > 1 else 0
    latency = 2 * ((t.gpus_per_node - 1) * t.intra.alpha_s + hops_net * t.net.alpha_s)
    return Cost(latency, 2 * m / t.ring_bandwidth_Bps())


def _rhd(op: str, m: float, q: int, link: Link) -> Cost | None:
    """Recursive halving (reduce-scatter) / doubling (all-gather) over q = 2^k ranks."""
    k = _log2_exact(q)
    if k is None:
        return None
    one = Cost(k * link.alpha_s, (q - 1) / q * m / link.bandwidth_Bps)
    return one * 2 if op == "allreduce" else one


def halving_doubling(op: str, m: float, t: Topology) -> Cost | None:
    """Rabenseifner: reduce-scatter by recursive halving + all-gather by recursive doubling,
    `2·log2 p·α + 2(p−1)/p·m/B` (p a power of two, else None). With several GPUs per node the
    short-distance steps stay inside the node: RS+AG of m over the node's g GPUs, and of m/g
    across the N nodes on each GPU's NIC share."""
    if op not in ("allreduce", "reduce_scatter", "allgather"):
        return None
    g, n = t.gpus_per_node, t.n_nodes
    if g == 1 or n == 1:
        link = t.net if g == 1 else t.intra
        return _rhd(op, m, t.n_gpus, link)
    intra, inter = _rhd(op, m, g, t.intra), _rhd(op, m / g, n, t.net_per_gpu())
    return None if intra is None or inter is None else intra + inter


def hierarchical(op: str, m: float, t: Topology) -> Cost | None:
    """Two-level ring (g GPUs × N nodes, both > 1): reduce-scatter in the node, all-reduce of
    m/g across nodes on each GPU's NIC share, all-gather in the node:
    `2(g−1)α_l + 2(g−1)/g·m/B_l + 2(N−1)α_n + 2(N−1)/N·(m/g)/B_n` (phases summed, not pipelined:
    an upper bound). Reduce-scatter and all-gather take one pass of each level."""
    g, n = t.gpus_per_node, t.n_nodes
    if op not in ("allreduce", "reduce_scatter", "allgather") or g == 1 or n == 1:
        return None
    intra = Topology(g, t.intra)
    inter = Topology(n, t.net_per_gpu())
    return _ring(op, m, intra) + _ring(op, m / g, inter)


def nvls(op: str, m: float, t: Topology) -> Cost | None:
    """NVLink SHARP (in-switch reduction) all-reduce: each GPU sends and receives m once,
    `α_l + m/B_l`; across nodes the node's m is then all-reduced as m/g per GPU by a ring."""
    if op != "allreduce" or t.gpus_per_node == 1:
        return None
    cost = Cost(t.intra.alpha_s, m / t.intra.bandwidth_Bps)
    if t.n_nodes > 1:
        cost = cost + _ring(op, m / t.gpus_per_node, Topology(t.n_nodes, t.net_per_gpu()))
    return cost


def sharp(op: str, m: float, t: Topology) -> Cost | None:
    """In-network reduction in the fabric switches (SHARP / CollNet) all-reduce: flat
    `α_n + m/B_n` per GPU, independent of the node count; with several GPUs per node a ring
    reduce-scatter and all-gather in the node around it, the switch reducing m/g per GPU."""
    if op != "allreduce" or t.n_nodes == 1:
        return None
    g, share = t.gpus_per_node, t.net_per_gpu()
    cost = Cost(share.alpha_s, m / g / share.bandwidth_Bps)
    if g > 1:
        intra = Topology(g, t.intra)
        cost = cost + _ring("reduce_scatter", m, intra) + _ring("allgather", m, intra)
    return cost


def pairwise(op: str, m: float, t: Topology) -> Cost | None:
    """Pairwise-exchange all-to-all of m total bytes: p−1 steps each sending m/p; the p−g
    remote peers go over the GPU's NIC share, the g−1 local ones over NVLink."""
    if op != "alltoall":
        return None
    p, g = t.n_gpus, t.gpus_per_node
    latency = (g - 1) * t.intra.alpha_s + (p - g) * t.net.alpha_s
    local = (g - 1) / p * m / t.intra.bandwidth_Bps
    remote = (p - g) / p * m / t.net_per_gpu().bandwidth_Bps if p > g else 0.0
    return Cost(latency, local + remote)


Algorithm = Callable[[str, float, Topology], Cost | None]

#: Algorithms by name, in display order.
ALGORITHMS: dict[str, Algorithm] = {
    "ring": ring,
    "tree": tree,
    "halving_doubling": halving_doubling,
    "hierarchical": hierarchical,
    "nvls": nvls,
    "sharp": sharp,
    "pairwise": pairwise,
    "p2p": p2p,
}

#: Algorithms that need switch hardware support (NVLink SHARP, InfiniBand SHARP).
IN_NETWORK = frozenset({"nvls", "sharp"})


def collective_cost(op: str, algorithm: str, m: float, t: Topology) -> Cost | None:
    """Cost of one `op` of `m` bytes by `algorithm`; None where the algorithm does not apply."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")
    if m < 0:
        raise ValueError("negative size")
    cost = ALGORITHMS[algorithm](op, m, t)
    return Cost(0.0, 0.0) if cost is not None and t.n_gpus == 1 else cost


def collective_costs(op: str, m: float, t: Topology) -> dict[str, Cost]:
    """Cost of one `op` of `m` bytes by every algorithm that applies."""
    costs = {a: collective_cost(op, a, m, t) for a in ALGORITHMS}
    return {a: c for a, c in costs.items() if c is not None}
