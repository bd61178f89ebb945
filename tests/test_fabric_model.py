"""The fabric model (analysis/fabric, docs/model.md "Fabrics") on generated curves with a known
truth and on the real nccl-tests tables of tests/data/nccl_tests (notices there) and the p4d
table after NCCL log 006: figures read from the files by hand (the line quoted), predictions
recomputed in plain Python from the raw rows, and the accuracy goals as properties of the model
on real data."""

from __future__ import annotations

import json

import pytest
from conftest import DATA

from commwall.analysis.fabric.cross import (
    cross_op_time,
    equivalent_size,
    net_peer_channels,
    net_peer_share,
)
from commwall.analysis.fabric.curve import fit_curve, leave_one_size_out, two_point_line
from commwall.cli.main import main

TESTS = DATA / "nccl_tests"
P4D = next((DATA / "nccl").glob("006_*.log.gz"))
KEYS = {"op", "n_ranks", "n_nodes", "gpu", "rows", "heldout_median_ape", "cross_op_median_ape",
        "nccl_model_median_ape"}  # fmt: skip
ROW_KEYS = {"size_bytes", "measured_us", "busbw_GBps", "predicted_us", "cross_op_predicted_us",
            "nccl_model_us"}  # fmt: skip


def fabric(capsys, *args: str) -> list[dict]:
    assert main(["fabric", "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)["tables"]


def test_a_chain_of_alpha_beta_lines_is_recovered_exactly():
    # generator: NCCL-like protocol switch, LL (5 µs + S / 2 GB/s) up to 64 KiB, then Simple
    # (20 µs + S / 100 GB/s); the sizes double from 1 KiB to 1 GiB
    sizes = [1024 << i for i in range(21)]
    truth = [5e-6 + s / 2e9 if s <= 65536 else 20e-6 + s / 100e9 for s in sizes]
    held = leave_one_size_out(sizes, truth)
    # inside one protocol's range a left-out size lies on the line through its neighbours
    for s, t in zip(sizes, truth, strict=True):
        if s not in (65536, 131072):  # the switch: neighbours on both sides of it
            assert held[s] == pytest.approx(t, rel=1e-9)
    curve = fit_curve(sizes, truth)
    assert curve.time_s(2048 * 3) == pytest.approx(5e-6 + 6144 / 2e9)  # between sizes
    assert curve.time_s(4 << 30) == pytest.approx(20e-6 + (4 << 30) / 100e9)  # beyond


def test_time_and_bandwidth_never_fall_with_size():
    # a measured dip: 4 MiB slower per byte than 2 MiB (algbw falls): no line with a < 0
    curve = fit_curve([1 << 20, 2 << 20, 4 << 20], [10e-6, 12e-6, 40e-6])
    t3 = curve.time_s(3 << 20)
    assert 12e-6 < t3 < 40e-6 and t3 / (3 << 20) <= 40e-6 / (4 << 20)


def test_ring_ops_carry_over_by_bytes_on_the_wire():
    # all-reduce on 8 ranks of S sends 2·7/8·S per rank, an all-gather of S sends 7/8·S:
    # the all-gather costs what an all-reduce of S/2 costs
    assert equivalent_size("allgather", 1 << 20, 8, 1) == pytest.approx(1 << 19)
    assert equivalent_size("broadcast", 7 << 20, 8, 1) == pytest.approx((7 << 20) * 8 / 14)
    # all-to-all across 10 nodes of 8: 72/80 of S leaves each GPU through its NIC
    assert equivalent_size("alltoall", 80, 80, 10) == pytest.approx(8 * 72 / (2 * 79 / 80))
    assert equivalent_size("alltoall", 80, 80, None) is None
    curve = fit_curve([1 << 19, 1 << 21], [10e-6, 30e-6])
    assert cross_op_time(curve, "allreduce", "allgather", 1 << 20, 8, 1) == pytest.approx(10e-6)


def test_a100_nvswitch_allreduce_read_and_predicted(capsys):
    (t,) = fabric(capsys, str(TESTS / "superbench_a100x8_nvswitch_allreduce.log"), "--nodes", "1")
    assert KEYS <= set(t) and all(ROW_KEYS <= set(r) for r in t["rows"])
    assert (t["op"], t["n_ranks"], t["n_nodes"], t["gpu"]) == (
        "allreduce", 8, 1, "A100-SXM4-40GB")  # fmt: skip
    rows = {r["size_bytes"]: r for r in t["rows"]}
    # line 37: `1048576  262144  float  sum  74.78  14.02  24.54  N/A  76.17  13.77  24.09  N/A`
    assert (rows[1048576]["measured_us"], rows[1048576]["busbw_GBps"]) == (74.78, 24.54)
    # left out, 1 MiB lies on the α-β line through lines 36 and 38 (`524288 ... 60.32`,
    # `2097152 ... 93.48`): 60.32 + (93.48 − 60.32)·(1048576 − 524288)/(2097152 − 524288)
    expect = 60.32 + (93.48 - 60.32) * (1048576 - 524288) / (2097152 - 524288)
    assert rows[1048576]["predicted_us"] == pytest.approx(expect)
    # line 50: `8589934592  2147483648  float  sum  63896  134.44  235.26`: the plateau,
    # 78 % of NVLink3's 300 GB/s per direction
    assert t["plateau_busbw_GBps"] == 235.26 and t["link"] == "NVLink3"
    assert t["plateau_vs_peak"] == pytest.approx(235.26 / 300)
    # the single α-β line through the smallest size's time (line 17, `4  1  float  sum  34.73`)
    # and that plateau misses 1 MiB by tens of percent (the issue's −44 %)
    line = two_point_line([4, 8589934592], [34.73e-6, 63896e-6], 2 * 7 / 8)
    assert line is not None
    assert line.time_s(1048576) * 1e6 == pytest.approx(34.73 + 1.75 * 1048576 / 235.26e3, 1e-3)
    assert rows[1048576]["line_us"] == pytest.approx(line.time_s(1048576) * 1e6, rel=1e-3)
    assert rows[1048576]["line_us"] / 74.78 - 1 < -0.4


def test_ranks_from_the_bandwidth_ratio_without_device_lines(capsys):
    # line 31: `0:   2147483648  536870912  float  sum  -1  51406  41.78  78.33  0 ...`:
    # 78.33 / 41.78 = 1.875 = 2·15/16, an all-reduce on 16 ranks
    (t,) = fabric(capsys, str(TESTS / "awsome_2x_p4de_a100x16_efa_all_reduce.log"))
    assert t["n_ranks"] == 16 and t["ranks_basis"] == "bandwidth ratio"
    assert t["rows"][-1]["measured_us"] == 51406 and t["rows"][-1]["busbw_GBps"] == 78.33


def test_ten_nodes_cross_count(capsys):
    # the 10-node files hold the same five ops with 1 and 2 GPUs per node; the G1 all-reduce
    # at 32 MiB (line 22: `33554432  4194304  double  sum  -1  1405.25  23.88  42.98`)
    g1, g2 = TESTS / "xxrjun_h100_10node_G1.log", TESTS / "xxrjun_h100_10node_G2.log"
    tables = fabric(capsys, str(g1), str(g2), "--nodes", "10")
    ar = next(t for t in tables if t["op"] == "allreduce" and t["n_ranks"] == 10)
    assert ar["rows"][0]["size_bytes"] == 33554432 and ar["rows"][0]["measured_us"] == 1405.25
    assert ar["cross_count_reference_ranks"] == 20
    assert ar["cross_count_median_ape"] <= 0.05


def real_tables(capsys) -> list[dict]:
    out = []
    for group, nodes in (("superbench_*", "1"), ("xxrjun_h100x*", "1"),
                         ("xxrjun_h100_10node_*", "10"), ("awsome_*", None)):  # fmt: skip
        files = [str(p) for p in sorted(TESTS.glob(group))]
        out += fabric(capsys, *files, *(("--nodes", nodes) if nodes else ()))
    return out + fabric(capsys, str(P4D), "--nodes", "2")


def test_accuracy_goals_on_every_real_table(capsys):
    tables = real_tables(capsys)
    assert len(tables) == 33  # 6 + 10 + 15 + 1, and the p4d log's table
    for t in tables:
        assert len(t["rows"]) >= 10
        assert t["heldout_median_ape"] <= 0.05, (t["file"], t["op"])
    # cross-op (calibrated on another op of the same fabric) within 15 % on every table that
    # has one, but two: the A100 node's all-to-all (87 µs a call at small sizes against 35 µs
    # for its collectives: the host enqueues 2 × 8 point-to-point calls per GPU) and send/recv
    # across 10 nodes of 8 GPUs (15 GB/s per peer against the 20 GB/s of one channel)
    crossed = [t for t in tables if t["cross_op_median_ape"] is not None]
    assert len(crossed) == 31
    missed = {
        (t["file"].rsplit("/", 1)[-1], t["op"]) for t in crossed if t["cross_op_median_ape"] > 0.15
    }
    assert missed == {
        ("superbench_a100x8_nvswitch_alltoall.log", "alltoall"),
        ("xxrjun_h100_10node_G8.log", "sendrecv"),
    }


def test_nvls_all_reduce_carried_to_all_gather_on_8_h100(capsys):
    # the 8 × H100 node's all-reduce runs NVLink SHARP (482 GB/s bus bandwidth) where its
    # all-gather runs a ring (362 GB/s): bytes on the links alone predict the all-gather 22 %
    # fast. An all-gather of 1 GiB puts the bytes of an all-reduce of 512 MiB on the links
    # (factor 7/8 against 14/8); line 24: `536870912 67108864 double sum -1 2115.28 ...`
    f = TESTS / "xxrjun_h100x8_1node_cnode3-002.log"
    tables = fabric(capsys, str(f), "--nodes", "1")
    ag = next(t for t in tables if t["op"] == "allgather")
    assert ag["cross_op_reference"] == "allreduce"
    row = next(r for r in ag["rows"] if r["size_bytes"] == 1073741824)
    # line 60: `1073741824 16777216 double none -1 2719.60 394.82 345.46`
    assert row["measured_us"] == 2719.60
    # NCCL's speedup of NVLS over its best ring for that all-reduce, by hand (NCCL 2.30
    # constants): Ring/Simple 8.4 + 14 × 3.4 µs + S / (18 × 20.6 × 8/14 GB/s); NVLS 25 µs
    # + S / (8 × min(40 × 0.85 × 7/8 × 2, 60) × 8/14 GB/s)
    s = 536870912
    ring = 8.4 + 14 * 3.4 + s / (1000 * 18 * 20.6 * 8 / 14)
    nvls = 25 + s / (1000 * 8 * min(40 * 0.85 * 7 / 8 * 2, 60) * 8 / 14)
    assert row["cross_op_predicted_us"] == pytest.approx(2115.28 * ring / nvls, rel=1e-3)
    assert abs(row["cross_op_predicted_us"] / 2719.60 - 1) < 0.02


def test_send_recv_across_nodes_one_channel_per_peer(capsys):
    # 10 nodes of one H100 and one 400 Gb/s NIC each: the all-reduce reaches 48.6 GB/s bus
    # bandwidth at 1 GiB (tests/data/nccl_tests/xxrjun_h100_10node_G1.log line 27:
    # `1073741824 134217728 double sum -1 39744.4 27.02 48.63`), send/recv 24.9 GB/s (line 175:
    # `1073741824 134217728 double sum -1 43154.7 24.88 24.88`): NCCL gives each remote peer one
    # channel beyond 8 nodes and drives a NIC of >= 25 GB/s with two
    assert net_peer_channels(10, 10) == 1 and net_peer_channels(16, 2) == 2
    assert net_peer_share(10, 10, 48.9) == 0.5 and net_peer_share(10, 10, 24.0) == 1.0
    g1 = TESTS / "xxrjun_h100_10node_G1.log"
    tables = fabric(capsys, str(g1), "--nodes", "10")
    sr = next(t for t in tables if t["op"] == "sendrecv")
    row = next(r for r in sr["rows"] if r["size_bytes"] == 1073741824)
    assert row["measured_us"] == 43154.7
    # 1 GiB to one peer through half the NIC costs an all-reduce of S / (18/10 × 1/2) = S/0.9,
    # on the line through lines 27 and 28 (`2147483648 ... 79277.6`)
    eq = 1073741824 / 0.9
    expect = 39744.4 + (79277.6 - 39744.4) * (eq - 1073741824) / (2147483648 - 1073741824)
    assert row["cross_op_predicted_us"] == pytest.approx(expect, rel=1e-6)
    assert abs(expect / 43154.7 - 1) < 0.03


def test_refuses_what_it_cannot_read(tmp_path, capsys):
    assert main(["fabric"]) != 0
    assert "give nccl-tests files" in capsys.readouterr().err
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert main(["fabric", str(bad)]) != 0
    assert "bad.log.gz" in capsys.readouterr().err
