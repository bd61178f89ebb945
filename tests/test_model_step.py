"""Step model, verdict and the overhead inversion (cost_model.md §7–8)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commwall.analysis.model.step import (
    COMM_WALL,
    COMPUTE_BOUND,
    max_comm_for_overhead,
    step_model,
    verdict,
)


def test_calculator_scenario_without_overlap():
    # 7B bf16, 8 GPUs at 400 Gb/s, ring 490 ms, compute 3.5 ms, η = 0 (cost_model.md §8)
    m = step_model(3.5e-3, 0.490, eta=0.0)
    assert m.step_s * 1e3 == pytest.approx(493.5)
    assert round(100 * m.comm_overhead, 2) == 99.29
    assert round(100 * m.gpu_efficiency, 2) == 0.71
    assert m.gamma == pytest.approx(140.0)
    assert m.verdict == COMM_WALL and "no overlap can hide it" in m.reason


def test_overlap_hides_at_most_the_shorter_part():
    m = step_model(0.100, 0.040, eta=0.5)
    assert m.overlap_s == pytest.approx(0.020)
    assert m.step_s == pytest.approx(0.120)
    m = step_model(0.100, 0.040, eta=1.0)
    assert m.step_s == pytest.approx(0.100) and m.exposed_comm_s == 0
    assert m.verdict == COMPUTE_BOUND


def test_poor_overlap_verdict():
    m = step_model(0.100, 0.060, eta=0.1)  # γ < 1 but 54 ms exposed
    assert m.verdict == COMM_WALL and "better overlap" in m.reason


def test_gradient_accumulation_overlaps_only_the_last_micro_batch():
    m = step_model(0.010, 0.050, eta=1.0, grad_accum=4)
    assert m.compute_s == pytest.approx(0.040)
    assert m.overlap_s == pytest.approx(0.010)
    assert m.step_s == pytest.approx(0.040 + 0.050 - 0.010)
    assert m.gamma == pytest.approx(0.050 / 0.040)


def test_verdict_threshold():
    assert verdict(0.05, 2.0, 0.0, 0.10)[0] == COMPUTE_BOUND
    assert verdict(0.15, 0.5, 0.3, 0.10)[0] == COMM_WALL


def test_bad_inputs():
    with pytest.raises(ValueError):
        step_model(1.0, 1.0, eta=1.5)
    with pytest.raises(ValueError):
        step_model(1.0, 1.0, grad_accum=0)
    with pytest.raises(ValueError):
        max_comm_for_overhead(1.0, 0.0, target=1.0)


def test_max_comm_closed_form():
    # τ_comp 3.5 ms, η 0, 10 %: exposed ≤ 0.1/0.9 × 3.5 ms = 0.3889 ms
    assert max_comm_for_overhead(3.5e-3, 0.0) == pytest.approx(3.5e-3 / 9)
    # with full overlap everything up to τ_comp is hidden, and 0.3889 ms more
    assert max_comm_for_overhead(3.5e-3, 1.0) == pytest.approx(3.5e-3 + 3.5e-3 / 9)


@given(
    st.floats(1e-4, 10),
    st.floats(0, 1),
    st.integers(1, 64),
    st.floats(0.01, 0.9),
)
def test_max_comm_meets_the_target_exactly(compute, eta, k, target):
    limit = max_comm_for_overhead(compute, eta, k, target)
    assert step_model(compute, limit, eta, k).comm_overhead == pytest.approx(target, rel=1e-9)
    assert step_model(compute, limit * 1.01, eta, k).comm_overhead > target


@given(st.floats(0, 10), st.floats(0, 10), st.floats(0, 1), st.integers(1, 64))
def test_step_bounds(compute, comm, eta, k):
    m = step_model(compute, comm, eta, k)
    assert m.step_s >= max(k * compute, comm) - 1e-12
    assert m.step_s <= k * compute + comm + 1e-12
    assert 0 <= m.comm_overhead <= 1 and 0 <= m.gpu_efficiency <= 1


@given(st.floats(1e-4, 10), st.floats(0, 10), st.floats(0, 1), st.integers(1, 63))
def test_more_accumulation_never_more_comm_per_sample(compute, comm, eta, k):
    a, b = step_model(compute, comm, eta, k), step_model(compute, comm, eta, k + 1)
    # one gradient sync per optimizer step whatever k: the communication (and the part of it
    # that only the last micro-batch can hide) stays the same, so per sample it shrinks as 1/k
    assert a.comm_s == b.comm_s == comm
    assert a.exposed_comm_s == b.exposed_comm_s == pytest.approx(comm - eta * min(compute, comm))
    assert b.compute_s == pytest.approx(a.compute_s * (k + 1) / k)
    assert b.step_s / (k + 1) <= a.step_s / k + 1e-12
    assert b.comm_overhead <= a.comm_overhead + 1e-12
