"""NCCL's own model reproduces the worked example of cost_model.md §3 (NCCL 2.30, 8 nodes × 1 H100,
one 400 Gb/s NIC per node, Intel host, nChannels·bwInter = 48 GB/s, latencyInter 0)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commwall.analysis.model.buckets import DDP_BUCKET_BYTES, nccl_step
from commwall.analysis.model.collectives import Link, Topology
from commwall.analysis.model.nccl_tuning import (
    NcclTopo,
    nccl_predict,
    nccl_time,
    nccl_topo,
    nvls_speedup,
    tuning_table,
    with_nvls,
)

EXAMPLE = NcclTopo(n_ranks=8, n_nodes=8, bw_intra_GBps=24.0, bw_inter_GBps=24.0, n_channels=2)


def test_topology_of_the_example():
    # one 400 Gb/s NIC per node: ladder speed 48 GB/s, duplicated into 2 channels of 24
    assert nccl_topo(Topology(8, Link(50e9))) == EXAMPLE


@pytest.mark.parametrize(
    ("nbytes", "best", "best_us", "second", "second_us", "half_digit_us"),
    [
        (14_000_000_000, ("Ring", "Simple"), 510.7e3, ("Ring", "LL128"), 554.9e3, 50),
        (25 * 2**20, ("Ring", "LL128"), 1172, ("Ring", "Simple"), 1242, 0.5),
        (2**20, ("Tree", "LL128"), 149, ("Ring", "LL"), 167, 0.5),
        (2**16, ("Tree", "LL"), 56, ("Tree", "LL128"), 70, 0.5),
    ],
)
def test_worked_example(nbytes, best, best_us, second, second_us, half_digit_us):
    # the table's figures, to the digits it prints
    first, runner_up = nccl_predict("allreduce", nbytes, EXAMPLE)[:2]
    assert (first.algorithm, first.protocol) == best
    assert (runner_up.algorithm, runner_up.protocol) == second
    assert first.time_s * 1e6 == pytest.approx(best_us, abs=half_digit_us)
    assert runner_up.time_s * 1e6 == pytest.approx(second_us, abs=half_digit_us)


def test_7b_ring_simple_parts():
    # lat 8.4 + 14 × 14 µs = 204.4 µs, ×1.4 plateau = 286.16 µs; algBw 48·8/14 = 27.43 GB/s
    c = nccl_time("allreduce", "Ring", "Simple", 14_000_000_000, EXAMPLE)
    assert c.latency_us == pytest.approx(286.16)
    assert c.algbw_GBps == pytest.approx(48 * 8 / 14)
    assert c.time_s * 1e3 == pytest.approx(14e9 / (48e9 * 8 / 14) * 1e3 + 0.28616)


def test_ddp_buckets_cost_626_ms():
    # 534 full 25 MiB buckets by Ring/LL128 at 1.172 ms each (cost_model.md §8), plus the remainder
    choices = nccl_step("allreduce", 14e9, DDP_BUCKET_BYTES, EXAMPLE)
    size, count, choice = choices[0]
    assert (size, count, choice.algorithm, choice.protocol) == (
        DDP_BUCKET_BYTES,
        534,
        "Ring",
        "LL128",
    )
    assert round(sum(c.time_s * n for _, n, c in choices) * 1e3) == 626


def test_table_entries():
    table = tuning_table("allreduce", EXAMPLE)
    assert set(table) == {(a, p) for a in ("Tree", "Ring") for p in ("LL", "LL128", "Simple")}
    # Ring/LL: min(llMaxBw 20.4 (Intel, >= 3 nodes), 48 × 0.5) = 20.4 bus → × 8/14 alg
    assert table[("Ring", "LL")][1] == pytest.approx(20.4 * 8 / 14)
    # Tree/Simple latency: 8.4 + 2·log2(8)·14 µs
    assert table[("Tree", "Simple")][0] == pytest.approx(8.4 + 2 * 3 * 14)


def test_tree_correction_stops_at_256_mib():
    big = nccl_time("allreduce", "Tree", "Simple", 2**30, EXAMPLE)
    mid = nccl_time("allreduce", "Tree", "Simple", 2**20, EXAMPLE)  # i = 14: factor .5
    base = tuning_table("allreduce", EXAMPLE)[("Tree", "Simple")][1]
    assert big.algbw_GBps == pytest.approx(base)
    assert mid.algbw_GBps == pytest.approx(base * 0.5)


def test_pat_only_for_gather_scatter_one_gpu_per_node():
    ag = tuning_table("allgather", EXAMPLE)
    assert ("PAT", "Simple") in ag and ("Tree", "Simple") not in ag
    assert ag[("PAT", "Simple")] == pytest.approx((8 + 3 * 14 / 3.5 + 8 * 2.8, 48 * 0.75))
    two_per_node = NcclTopo(8, 4, 24.0, 24.0)
    assert ("PAT", "Simple") not in tuning_table("allgather", two_per_node)


def test_fp8_avoids_long_rings():
    t16 = NcclTopo(16, 16, 24.0, 24.0)
    plain = nccl_time("allreduce", "Ring", "Simple", 2**30, t16)
    fp8 = nccl_time("allreduce", "Ring", "Simple", 2**30, t16, fp8=True)
    assert fp8.time_s == pytest.approx(1024 * plain.time_s)
    assert nccl_predict("allreduce", 2**30, t16, fp8=True)[0].algorithm == "Tree"
    assert nccl_time("allreduce", "Ring", "Simple", 2**30, EXAMPLE, fp8=True).time_s == (
        nccl_time("allreduce", "Ring", "Simple", 2**30, EXAMPLE).time_s
    )


def test_amd_hosts_use_their_ll_row():
    amd = NcclTopo(8, 8, 24.0, 24.0, cpu="amd")
    assert tuning_table("allreduce", amd)[("Ring", "LL")][1] == pytest.approx(19.0 * 8 / 14)


def test_disabled_protocols_are_not_chosen():
    simple_only = NcclTopo(8, 8, 24.0, 24.0, protocols=("Simple",))
    assert {c.protocol for c in nccl_predict("allreduce", 2**20, simple_only)} == {"Simple"}


def test_single_hgx_node_uses_nccl_nvlink_bandwidth():
    # 900 GB/s bidirectional NVLink4 = 18 links × 25 GB/s per direction; NCCL counts 20.6 each
    t = nccl_topo(Topology(8, Link(50e9), 8, nvlink=Link(450e9)))
    assert t.n_nodes == 1 and t.n_channels * t.bw_intra_GBps == pytest.approx(18 * 20.6)


@given(st.integers(1, 2**36), st.floats(1.0, 8.0))
def test_more_bandwidth_is_never_slower(nbytes, factor):
    slow = nccl_predict("allreduce", nbytes, EXAMPLE)[0].time_s
    fast_topo = NcclTopo(8, 8, 24.0 * factor, 24.0 * factor, n_channels=2)
    assert nccl_predict("allreduce", nbytes, fast_topo)[0].time_s <= slow * (1 + 1e-12)


# NVLS (NVLink SHARP) on one NVSwitch node: NCCL's search (src/graph/search.cc) and model
# (src/tuning/nvls.cc), worked by hand. 8 × H100 SXM: NCCL counts 18 NVLinks × 20.6 GB/s =
# 370.8 GB/s per GPU; the NVLS graph has one channel per GPU (8); each GPU's link carries its own
# channel twice (as head) and every other channel once, 9 × bw <= 370.8: 50 GB/s fails (450),
# 40 fits (360); the second pass raises bwInter 40 → 50 → 60 (the top rung) while below 2 × 40.
HGX_H100 = Topology(8, Link(50e9), 8, nvlink=Link(450e9))


def test_nvls_graph_of_an_8_gpu_h100_node():
    t = with_nvls(nccl_topo(HGX_H100))
    assert (t.nvls_channels, t.nvls_bw_intra_GBps, t.nvls_bw_inter_GBps) == (8, 40.0, 60.0)


def test_nvls_all_reduce_bandwidth_meets_the_real_node():
    # per channel min(40 × 0.85 (nvlsEfficiency, Hopper) × 7/8 × 2 (all-reduce), 60) = 59.5,
    # × 8 channels = 476 GB/s bus bandwidth; algorithm bandwidth × 8/14 = 272 GB/s
    t = with_nvls(nccl_topo(HGX_H100))
    best = nccl_predict("allreduce", 2**34, t)[0]
    assert (best.algorithm, best.protocol) == ("NVLS", "Simple")
    bus = best.algbw_GBps * 14 / 8
    assert bus == pytest.approx(40 * 0.85 * 7 / 8 * 2 * 8) and bus == pytest.approx(476)
    assert best.latency_us == pytest.approx(25.0)  # hwLat[NVLink][NVLS][Simple], baseLat 0
    # tests/data/nccl_tests/xxrjun_h100x8_1node_cnode3-002.log line 29, the all-reduce at
    # 16 GiB on that node: `17179869184 2147483648 double sum -1 62340.7 275.58 482.27`: 482 GB/s
    # bus bandwidth, above the 370.8 GB/s a ring can reach; NCCL's NVLS figure is within 2 %
    assert bus == pytest.approx(482.27, rel=0.02)
    assert best.time_s * 1e6 == pytest.approx(25 + 2**34 / (1000 * 272.0))
    assert best.time_s * 1e6 == pytest.approx(62340.7, rel=0.02)


def test_nvls_not_chosen_where_rings_are_faster():
    t = with_nvls(nccl_topo(HGX_H100))
    # all-gather: per channel 40 × 0.85 × 7/8 × 7/8 (ppn−1)/ppn = 26.03, × 8 = 208 GB/s bus,
    # below the ring's 370.8: the ring runs it, and the speedup is 1
    assert nccl_predict("allgather", 2**30, t)[0].algorithm == "Ring"
    assert nvls_speedup("allgather", 2**30, t) == 1.0
    # 4 GPUs: 4 channels at 60 GB/s (5 × 60 = 300 <= 370.8), all-reduce bus bandwidth
    # 4 × min(60 × 0.85 × 3/4 × 2, 60) = 240 < 370.8: Ring. The 4-GPU file's line 25,
    # `17179869184 2147483648 double sum -1 70128.7 244.98 367.46`, is a ring's 367 GB/s
    t4 = with_nvls(nccl_topo(Topology(4, Link(50e9), 4, nvlink=Link(450e9))))
    assert (t4.nvls_channels, t4.nvls_bw_intra_GBps) == (4, 60.0)
    assert nccl_predict("allreduce", 2**34, t4)[0].algorithm == "Ring"


def test_nvls_speedup_by_hand():
    # 512 MiB all-reduce on 8 × H100: Ring/Simple 8.4 + 14 × 3.4 µs + S / (370.8 × 8/14 GB/s);
    # NVLS 25 µs + S / 272 GB/s
    s = 536870912
    ring = 8.4 + 14 * 3.4 + s / (1000 * 370.8 * 8 / 14)
    nvls = 25 + s / (1000 * 272.0)
    t = with_nvls(nccl_topo(HGX_H100))
    assert nvls_speedup("allreduce", s, t) == pytest.approx(ring / nvls, rel=1e-3)


def test_nvls_only_on_hopper_and_later_inside_one_node_of_more_than_two():
    a100 = nccl_topo(Topology(8, Link(50e9), 8, nvlink=Link(300e9)), arch="ampere")
    assert with_nvls(a100) == a100
    pair = nccl_topo(Topology(2, Link(50e9), 2, nvlink=Link(450e9)))
    assert with_nvls(pair) == pair
    assert with_nvls(EXAMPLE) == EXAMPLE  # 8 nodes
