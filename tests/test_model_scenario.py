"""Scenarios: the calculator's inputs with units, predictions, what-ifs and sweeps."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commwall.analysis.model.collectives import Link, Topology
from commwall.analysis.model.scenario import (
    Scenario,
    calculator,
    comm_time,
    min_link_bandwidth,
    predict,
    sweep,
    vary,
)


def pure_bandwidth(**kw):
    return calculator("7e9", "bf16", 8, "400Gbps", alpha_net_s=0.0, bucket=None, **kw)


def test_calculator_inputs():
    s = calculator("7B", "bf16", 64, "400Gbps", gpus_per_node=8)
    assert s.gradient_bytes == 14e9
    assert s.topology.net.bandwidth_Bps == 50e9
    assert s.topology.nvlink.bandwidth_Bps == 450e9  # 900 GB/s bidirectional by default
    assert s.bucket_bytes == 25 * 2**20
    assert calculator("7e9", "fp32", 8, "400Gbps", bucket="0").bucket_bytes is None


def test_prediction_of_the_7b_example():
    p = predict(pure_bandwidth(compute_s=3.5e-3))
    assert p.algorithms["ring"].total_s == pytest.approx(0.490)
    assert p.algorithms["tree"].total_s == pytest.approx(0.560)
    assert p.chosen == "ring"  # halving-doubling ties; ring comes first
    assert p.nccl.time_s * 1e3 == pytest.approx(510.70, abs=0.005)
    assert p.step.step_s == pytest.approx(0.4935)
    assert p.n_collectives == 1


def test_min_link_for_target_overhead():
    # ring with no latency: τ_comm = 1.75·14 GB / B must be <= 3.5 ms / 9 → B >= 63 TB/s
    p = predict(pure_bandwidth(compute_s=3.5e-3))
    assert p.min_link_Bps == pytest.approx(1.75 * 14e9 / (3.5e-3 / 9), rel=1e-6)
    at = predict(vary(p.scenario, "link_Bps", p.min_link_Bps))
    assert at.step.comm_overhead == pytest.approx(0.10, rel=1e-6)


def test_min_link_unreachable_when_latency_dominates():
    s = calculator("7e9", "bf16", 8, "400Gbps", compute_s=3.5e-3)  # 535 buckets × 14 µs steps
    assert min_link_bandwidth(s) is None


def test_algorithm_choice():
    s = calculator("7e9", "bf16", 64, "400Gbps", gpus_per_node=8, compute_s=1.0)
    p = predict(s)
    usable = {a: t.total_s for a, t in p.algorithms.items() if a not in ("nvls", "sharp")}
    assert p.chosen == min(usable, key=usable.get)
    assert predict(Scenario(**{**s.__dict__, "in_network": True})).chosen == "sharp"
    nccl = predict(Scenario(**{**s.__dict__, "algorithm": "nccl"}))
    assert nccl.chosen == "nccl" and nccl.comm_s == pytest.approx(nccl.nccl.time_s)
    with pytest.raises(ValueError):
        predict(Scenario(**{**s.__dict__, "algorithm": "pairwise"}))


def test_what_ifs():
    s = pure_bandwidth(compute_s=0.1)
    assert comm_time(vary(s, "link_Bps", 100e9)) == pytest.approx(0.245)
    assert comm_time(vary(s, "compression", 2.0)) == pytest.approx(0.245)
    assert vary(s, "n_nodes", 16).topology.n_gpus == 16
    assert comm_time(vary(s, "n_gpus", 2)) == pytest.approx(14e9 / 50e9)  # 2(p−1)/p = 1
    assert predict(vary(s, "eta", 1.0)).step.overlap_s == pytest.approx(0.1)
    assert predict(vary(s, "grad_accum", 4)).step.compute_s == pytest.approx(0.4)
    two = calculator("7e9", "bf16", 16, "400Gbps", gpus_per_node=8, bucket=None)
    assert vary(two, "nvlink_Bps", 1e12).topology.nvlink.bandwidth_Bps == 1e12
    with pytest.raises(ValueError):
        vary(s, "nvlink_Bps", 1e12)
    with pytest.raises(ValueError):
        vary(s, "colour", 1)


def test_sweep_table():
    s = pure_bandwidth(compute_s=0.1)
    df = sweep(s, "link_Bps", [25e9, 50e9, 100e9])
    assert list(df["link_Bps"]) == [25e9, 50e9, 100e9]
    assert df["comm_ms"].tolist() == pytest.approx([980.0, 490.0, 245.0])
    assert df["step_ms"].tolist() == pytest.approx([1080.0, 590.0, 345.0])
    assert set(df.columns) >= {"comm_overhead", "gpu_efficiency", "gamma", "verdict"}
    no_compute = sweep(pure_bandwidth(), "link_Bps", [50e9])
    assert math.isnan(no_compute["step_ms"][0]) and no_compute["verdict"][0] is None


scenarios = st.builds(
    lambda nodes, g, bw, alpha, m, compute, eta, k, bucket: Scenario(
        gradient_bytes=m,
        topology=Topology(nodes * g, Link(bw, alpha), g, Link(450e9, 3e-6) if g > 1 else None),
        compute_s=compute,
        eta=eta,
        grad_accum=k,
        bucket_bytes=bucket,
    ),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 4, 8]),
    st.floats(1e9, 1e12),
    st.floats(0, 5e-5),
    st.floats(1e6, 1e11),
    st.floats(1e-3, 2.0),
    st.floats(0, 1),
    st.integers(1, 16),
    st.sampled_from([None, 25 * 2**20, 2**30]),
)


@settings(max_examples=60, deadline=None)
@given(scenarios, st.floats(1.0, 100.0))
def test_more_bandwidth_never_slower(s, factor):
    slow, fast = predict(s), predict(vary(s, "link_Bps", s.topology.net.bandwidth_Bps * factor))
    assert fast.comm_s <= slow.comm_s * (1 + 1e-12)
    assert fast.step.step_s <= slow.step.step_s * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(scenarios)
def test_more_accumulation_never_more_comm_per_sample(s):
    a, b = predict(s), predict(vary(s, "grad_accum", s.grad_accum + 1))
    # the gradient is synchronised once per optimizer step: the same time whatever k, while
    # compute grows with k
    assert b.comm_s == pytest.approx(a.comm_s, rel=1e-12)
    k = s.grad_accum
    assert b.step.compute_s == pytest.approx(a.step.compute_s * (k + 1) / k, rel=1e-12)
    assert b.step.step_s / b.scenario.grad_accum <= a.step.step_s / a.scenario.grad_accum + 1e-12
