"""α-β collective costs: the cost_model.md §8 validation figures, closed forms and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commwall.analysis.model.buckets import DDP_BUCKET_BYTES, bucket_sizes, n_collectives, step_cost
from commwall.analysis.model.collectives import (
    ALGORITHMS,
    Link,
    Topology,
    collective_cost,
    collective_costs,
)

M_7B_BF16 = 7e9 * 2  # bytes
NIC_400G = 400e9 / 8  # bytes/s


def flat(p=8, bw=NIC_400G, alpha=0.0):
    return Topology(p, Link(bw, alpha))


def test_ring_7b_bf16_400g_pure_bandwidth():
    # 14.0 GB × 2·7/8 ÷ 50 GB/s
    c = collective_cost("allreduce", "ring", M_7B_BF16, flat())
    assert c.latency_s == 0
    assert c.total_s * 1e3 == pytest.approx(490.0, abs=1e-9)


def test_tree_bandwidth_term_is_2m_over_b():
    c = collective_cost("allreduce", "tree", M_7B_BF16, flat())
    assert c.total_s * 1e3 == pytest.approx(560.0, abs=1e-9)


@pytest.mark.parametrize(("alpha_us", "ms"), [(5, 490.07), (14, 490.196), (20, 490.28)])
def test_ring_latency_variants(alpha_us, ms):
    # T = 2(n−1)·α + 1.75·M/B (cost_model.md §8 variants)
    c = collective_cost("allreduce", "ring", M_7B_BF16, flat(alpha=alpha_us * 1e-6))
    assert c.total_s * 1e3 == pytest.approx(ms, abs=1e-3)
    assert c.latency_s == pytest.approx(14 * alpha_us * 1e-6)


@pytest.mark.parametrize(("busbw", "ms"), [(46, 532.6), (47, 521.3), (48, 510.4)])
def test_ring_at_achievable_busbw(busbw, ms):
    c = collective_cost("allreduce", "ring", M_7B_BF16, flat(bw=busbw * 1e9))
    assert round(c.total_s * 1e3, 1) == ms


def test_one_hgx_node_nvlink_ring():
    # 8 GPUs in one node at NVLink ring busbw 370 GB/s: 66 ms (the NIC is never used)
    t = Topology(8, Link(NIC_400G), gpus_per_node=8, nvlink=Link(370e9))
    c = collective_cost("allreduce", "ring", M_7B_BF16, t)
    assert c.total_s * 1e3 == pytest.approx(1.75 * 14e9 / 370e9 * 1e3)
    assert round(c.total_s * 1e3) == 66


def test_tree_latency_is_logarithmic():
    c = collective_cost("allreduce", "tree", 0.0, flat(p=16, alpha=10e-6))
    assert c.latency_s == pytest.approx(2 * 4 * 10e-6)
    c = collective_cost("allreduce", "tree", 0.0, flat(p=12, alpha=10e-6))  # ⌈log2 12⌉ = 4
    assert c.latency_s == pytest.approx(2 * 4 * 10e-6)


def test_rabenseifner_closed_form():
    c = collective_cost("allreduce", "halving_doubling", 1e9, flat(p=16, alpha=5e-6))
    assert c.latency_s == pytest.approx(2 * 4 * 5e-6)
    assert c.bandwidth_s == pytest.approx(2 * 15 / 16 * 1e9 / NIC_400G)
    assert collective_cost("allreduce", "halving_doubling", 1e9, flat(p=12)) is None


def two_level(nodes=8, g=8, nics=None):
    return Topology(nodes * g, Link(50e9, 14e-6), g, nvlink=Link(450e9, 3.4e-6), nics_per_node=nics)


def test_hierarchical_closed_form():
    # 2(g−1)α_l + 2(g−1)/g·m/B_l + 2(N−1)α_n + 2(N−1)/N·(m/g)/B_n, g = N = 8
    m = 1e9
    c = collective_cost("allreduce", "hierarchical", m, two_level())
    assert c.latency_s == pytest.approx(14 * 3.4e-6 + 14 * 14e-6)
    assert c.bandwidth_s == pytest.approx(1.75 * m / 450e9 + 1.75 * (m / 8) / 50e9)


def test_one_nic_per_node_is_g_times_slower_across_nodes():
    m = 1e9
    per_gpu = collective_cost("allreduce", "hierarchical", m, two_level())
    one_nic = collective_cost("allreduce", "hierarchical", m, two_level(nics=1))
    inter = 1.75 * (m / 8) / 50e9
    assert one_nic.bandwidth_s - per_gpu.bandwidth_s == pytest.approx(7 * inter)


def test_flat_ring_over_nodes_uses_all_nics():
    # ring busbw with one NIC per GPU = min(NVLink, nNICs × NIC) (cost_model.md §5)
    c = collective_cost("allreduce", "ring", 1e9, two_level())
    assert c.bandwidth_s == pytest.approx(2 * 63 / 64 * 1e9 / 400e9)
    # NCCL's step count: 2(N−1) inter-node steps, the rest over NVLink
    assert c.latency_s == pytest.approx(2 * 7 * 14e-6 + (2 * 63 - 2 * 7) * 3.4e-6)


def test_in_network_reduction():
    m = 1e9
    assert collective_cost("allreduce", "sharp", m, flat(alpha=2e-6)).total_s == pytest.approx(
        2e-6 + m / NIC_400G
    )
    node = Topology(8, Link(50e9), 8, nvlink=Link(450e9, 1e-6))
    assert collective_cost("allreduce", "nvls", m, node).total_s == pytest.approx(1e-6 + m / 450e9)
    assert collective_cost("allreduce", "nvls", m, flat()) is None  # needs an NVSwitch node
    assert collective_cost("allreduce", "sharp", m, node) is None  # needs several nodes


def test_applicability():
    t = flat()
    assert set(collective_costs("allreduce", 1e6, t)) == {
        "ring",
        "tree",
        "halving_doubling",
        "sharp",
    }
    assert set(collective_costs("allgather", 1e6, t)) == {"ring", "halving_doubling"}
    assert set(collective_costs("alltoall", 1e6, t)) == {"pairwise"}
    assert "hierarchical" in collective_costs("allreduce", 1e6, two_level())


def test_alltoall_pairwise():
    c = collective_cost("alltoall", "pairwise", 8e6, flat(alpha=1e-6))
    assert c.latency_s == pytest.approx(7e-6)
    assert c.bandwidth_s == pytest.approx(7 / 8 * 8e6 / NIC_400G)


def test_one_gpu_costs_nothing():
    assert collective_cost("allreduce", "tree", 1e9, flat(p=1)).total_s == 0


def test_bad_inputs():
    with pytest.raises(ValueError):
        Topology(12, Link(1e9), gpus_per_node=8, nvlink=Link(1e9))
    with pytest.raises(ValueError):
        Topology(16, Link(1e9), gpus_per_node=8)  # no intra-node link
    with pytest.raises(ValueError):
        Link(0.0)
    with pytest.raises(ValueError):
        collective_cost("gather", "ring", 1.0, flat())


def test_ddp_buckets():
    # 14 GB in 25 MiB buckets: 534 full ones and a remainder
    assert DDP_BUCKET_BYTES == 25 * 1024 * 1024
    sizes = bucket_sizes(M_7B_BF16, DDP_BUCKET_BYTES)
    assert sizes[0] == (DDP_BUCKET_BYTES, 534)
    assert sizes[1][0] == pytest.approx(M_7B_BF16 - 534 * DDP_BUCKET_BYTES)
    assert n_collectives(M_7B_BF16, DDP_BUCKET_BYTES) == math.ceil(M_7B_BF16 / DDP_BUCKET_BYTES)
    assert bucket_sizes(M_7B_BF16, None) == [(M_7B_BF16, 1)]
    assert bucket_sizes(0.0, DDP_BUCKET_BYTES) == []


def test_latency_is_paid_per_bucket():
    # α = 5 µs: 535 buckets × 14 steps × 5 µs = 37.45 ms on top of the 490 ms (cost_model.md §8)
    c = step_cost("allreduce", "ring", M_7B_BF16, DDP_BUCKET_BYTES, flat(alpha=5e-6))
    assert c.latency_s * 1e3 == pytest.approx(535 * 14 * 5e-3)
    assert c.bandwidth_s * 1e3 == pytest.approx(490.0)


def test_no_bytes_cost_nothing_but_keep_applicability():
    assert step_cost("allreduce", "ring", 0.0, DDP_BUCKET_BYTES, flat()).total_s == 0
    assert step_cost("allreduce", "pairwise", 0.0, DDP_BUCKET_BYTES, flat()) is None


def test_compression_scales_only_the_bandwidth_term():
    t = flat(alpha=5e-6)
    full = step_cost("allreduce", "ring", M_7B_BF16, DDP_BUCKET_BYTES, t)
    half = step_cost("allreduce", "ring", M_7B_BF16, DDP_BUCKET_BYTES, t, compression=2)
    assert half.bandwidth_s == pytest.approx(full.bandwidth_s / 2)
    assert half.latency_s == full.latency_s


def test_ring_allreduce_is_reduce_scatter_plus_allgather():
    t = two_level(nodes=4, g=4)
    ar = collective_cost("allreduce", "ring", 3e8, t)
    rs = collective_cost("reduce_scatter", "ring", 3e8, t)
    ag = collective_cost("allgather", "ring", 3e8, t)
    assert ar.total_s == pytest.approx(rs.total_s + ag.total_s)


topologies = st.builds(
    lambda nodes, g, bw, nv, a, al: Topology(
        nodes * g, Link(bw, a), g, nvlink=Link(nv, al) if g > 1 else None
    ),
    st.sampled_from([1, 2, 3, 4, 8, 16]),
    st.sampled_from([1, 2, 4, 8]),
    st.floats(1e9, 1e12),
    st.floats(1e10, 1e13),
    st.floats(0, 1e-4),
    st.floats(0, 1e-5),
)


@given(
    topologies,
    st.floats(1, 1e11),
    st.floats(1.0, 100.0),
    st.sampled_from(["allreduce", "allgather", "reduce_scatter", "alltoall"]),
)
def test_more_bandwidth_is_never_slower(t, m, factor, op):
    faster_net = Topology(
        t.n_gpus, Link(t.net.bandwidth_Bps * factor, t.net.alpha_s), t.gpus_per_node, t.nvlink
    )
    for name in ALGORITHMS:
        slow, fast = collective_cost(op, name, m, t), collective_cost(op, name, m, faster_net)
        assert (slow is None) == (fast is None)
        if slow is not None:
            assert fast.total_s <= slow.total_s * (1 + 1e-12)
            assert fast.latency_s == slow.latency_s


@given(topologies, st.floats(1, 1e10), st.floats(1.0, 10.0))
def test_more_bytes_are_never_faster(t, m, factor):
    for name, c in collective_costs("allreduce", m, t).items():
        bigger = collective_cost("allreduce", name, m * factor, t)
        assert bigger.total_s >= c.total_s * (1 - 1e-12)


@pytest.mark.parametrize(
    ("op", "algorithm"),
    [
        ("allreduce", "ring"),
        ("reduce_scatter", "ring"),
        ("allgather", "ring"),
        ("alltoall", "pairwise"),
        ("broadcast", "ring"),
        ("reduce", "ring"),
        ("send", "p2p"),
        ("recv", "p2p"),
    ],
)
def test_every_op_has_a_cost_whose_busbw_is_the_link(op, algorithm):
    # nccl-tests' convention: without latency, busbw = factor·S/t of the bandwidth-optimal
    # algorithm equals the link bandwidth B for every collective kind
    from commwall.analysis.model.busbw import busbw_factor

    p, m, bw = 8, 1e9, 50e9
    c = collective_cost(op, algorithm, m, Topology(p, Link(bw, 0.0)))
    assert busbw_factor(op, p) * m / c.total_s == pytest.approx(bw)


def test_broadcast_and_send_latency():
    t = Topology(8, Link(50e9, 10e-6))
    assert collective_cost("broadcast", "ring", 5e8, t).total_s == pytest.approx(7e-5 + 0.01)
    assert collective_cost("send", "p2p", 5e8, t).total_s == pytest.approx(1e-5 + 0.01)
    assert collective_cost("allreduce", "p2p", 5e8, t) is None
