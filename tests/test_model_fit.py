"""The robust α-β fit recovers the α and β synthetic data was made with (cost_model.md §6)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commwall.analysis.model.fit import fit_alpha_beta, to_link

N = 8
ALPHA = 20e-6  # per ring step
BUSBW = 47e9
SIZES = np.repeat(2.0 ** np.arange(10, 34), 10)  # 1 KiB … 8 GiB, 10 of each


def ring_times(sizes, alpha=ALPHA, busbw=BUSBW, n=N):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * sizes / busbw


def test_exact_data_is_recovered_exactly():
    link = to_link("allreduce", N, fit_alpha_beta(SIZES, ring_times(SIZES)))
    assert link.alpha_s == pytest.approx(ALPHA, rel=1e-9)
    assert link.bandwidth_Bps == pytest.approx(BUSBW, rel=1e-9)
    assert link.fit.r2 == pytest.approx(1.0)
    assert link.fit.identifiable


def test_noise_and_stragglers():
    # cost_model.md §6.6: 3 % noise; plus 10 % of rows delayed 1.5–4× (congestion, stragglers)
    rng = np.random.default_rng(7)
    t = ring_times(SIZES) * np.exp(rng.normal(0, 0.03, SIZES.size))
    hit = rng.random(SIZES.size) < 0.10
    t[hit] *= rng.uniform(1.5, 4.0, hit.sum())
    fit = fit_alpha_beta(SIZES, t, bootstrap=100, seed=1)
    link = to_link("allreduce", N, fit)
    assert link.alpha_s == pytest.approx(ALPHA, rel=0.05)
    assert link.bandwidth_Bps == pytest.approx(BUSBW, rel=0.02)
    lo, hi = fit.latency_ci_s
    assert lo <= 14 * ALPHA <= hi
    lo, hi = fit.s_per_byte_ci
    assert lo <= 1.75 / BUSBW <= hi


def test_the_fit_resists_outliers_that_drag_plain_least_squares():
    # the same outliers move an unweighted fit's latency by far more than 5 %; the fit under
    # test, on the very same rows, stays within 5 % of the planted α
    rng = np.random.default_rng(7)
    t = ring_times(SIZES) * np.exp(rng.normal(0, 0.03, SIZES.size))
    hit = rng.random(SIZES.size) < 0.10
    t[hit] *= rng.uniform(1.5, 4.0, hit.sum())
    b, a = np.polyfit(SIZES, t, 1)
    assert abs(a / 14 - ALPHA) / ALPHA > 0.05
    robust = to_link("allreduce", N, fit_alpha_beta(SIZES, t))
    assert abs(robust.alpha_s - ALPHA) / ALPHA < 0.05
    assert abs(robust.alpha_s - ALPHA) < abs(a / 14 - ALPHA) / 2


def test_narrow_sizes_keep_alpha_but_flag_it():
    # two sizes within a decade: exact data still gives the planted α and β (the line is
    # determined), but α is flagged as resting on a narrow span of sizes
    sizes = np.repeat([25 * 2**20, 50 * 2**20], 5)
    fit = fit_alpha_beta(sizes, ring_times(sizes))
    assert not fit.identifiable and fit.decades < 3
    link = to_link("allreduce", N, fit)
    assert link.alpha_s == pytest.approx(ALPHA, rel=1e-6)
    assert link.bandwidth_Bps == pytest.approx(BUSBW, rel=1e-6)


def test_negative_intercept_is_clamped():
    sizes = 2.0 ** np.arange(10, 30)
    fit = fit_alpha_beta(sizes, sizes / 1e9 - 1e-7 * (sizes < 2**12))
    assert fit.latency_s == 0.0


def test_mapping_per_op():
    fit = fit_alpha_beta(SIZES, 7 * ALPHA + 7 / 8 * SIZES / BUSBW)
    link = to_link("allgather", N, fit)  # (n−1) steps, factor (n−1)/n
    assert link.alpha_s == pytest.approx(ALPHA)
    assert link.bandwidth_Bps == pytest.approx(BUSBW)
    assert link.algbw_Bps == pytest.approx(BUSBW * 8 / 7)


def test_too_little_data():
    with pytest.raises(ValueError):
        fit_alpha_beta([1e6], [1e-3])
    with pytest.raises(ValueError, match="one size"):
        fit_alpha_beta([1e6, 1e6, 1e6], [1e-3, 2e-3, 1e-3])
    with pytest.raises(ValueError):
        to_link("allreduce", 1, fit_alpha_beta(SIZES, ring_times(SIZES)))


def test_singular_resamples_do_not_raise():
    # a bootstrap of 3 rows draws many samples with one distinct size: a singular design that
    # used to raise LinAlgError; the pseudo-inverse gives an answer for every resample
    fit = fit_alpha_beta([448.0, 907840.0, 1576964.0], [19.6e-6, 66.0e-6, 84.9e-6], 200)
    assert fit.latency_ci_s is not None and fit.s_per_byte_ci is not None


def test_time_falling_with_size_gives_a_flat_line():
    fit = fit_alpha_beta([1e3, 1e6, 1e7], [3e-3, 2e-3, 1e-3])
    assert fit.s_per_byte == 0.0 and fit.latency_s == pytest.approx(2e-3)


@settings(max_examples=40, deadline=None, derandomize=True)  # CI sees the same 40 cases
@given(st.floats(1e-6, 1e-3), st.floats(1e9, 1e12), st.integers(2, 512))
def test_planted_parameters_are_recovered(alpha, busbw, n):
    t = ring_times(SIZES, alpha, busbw, n)
    link = to_link("allreduce", n, fit_alpha_beta(SIZES, t))
    assert link.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert link.bandwidth_Bps == pytest.approx(busbw, rel=1e-6)


def test_exact_data_that_once_gave_a_near_singular_weighted_fit():
    # a Hypothesis draw that failed a clean-clone run: exact ring times, yet α came back 19 % low
    # (R² 0.96) because rounding-level residuals set the Huber scale (MIN_RESIDUAL_SCALE)
    alpha, busbw, n = 1e-06, 822069262672.6018, 385
    link = to_link("allreduce", n, fit_alpha_beta(SIZES, ring_times(SIZES, alpha, busbw, n)))
    assert link.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert link.bandwidth_Bps == pytest.approx(busbw, rel=1e-6)
