"""Size regimes and held-out error: collectives drawn from known α, β per regime (NCCL's
protocol steps) are recovered, and the status follows the held-out error, not R²."""

from __future__ import annotations

import numpy as np
import pytest

from commwall.analysis.model.calibrate import fit_op
from commwall.analysis.model.heldout import (
    CALIBRATED_MEDIAN_APE,
    cross_validated_ape,
    folds,
    status,
)
from commwall.analysis.model.regimes import fit_regimes

#: (latency s, bandwidth B/s) of three protocols, like NCCL's LL, LL128 and Simple: each
#: cheaper in bandwidth and dearer in latency than the one before.
PROTOCOLS = ((5e-6, 10e9), (15e-6, 40e9), (40e-6, 80e9))
SIZES = np.repeat(2.0 ** np.arange(6, 29), 6)  # 64 B … 256 MiB, 6 of each


def envelope(sizes):
    """NCCL picks the fastest protocol per size: the lower envelope of the three lines."""
    lines = np.array([a + sizes / b for a, b in PROTOCOLS])
    return lines.min(axis=0), lines.argmin(axis=0)


def noisy(seed=3, sigma=0.005, stragglers=0.05):
    rng = np.random.default_rng(seed)
    t, proto = envelope(SIZES)
    t = t * np.exp(rng.normal(0, sigma, t.size))
    hit = rng.random(t.size) < stragglers
    t[hit] *= rng.uniform(1.5, 3.0, hit.sum())
    return t, proto


def test_three_protocol_regimes_are_recovered_within_2_percent():
    t, proto = noisy()
    fit = fit_regimes(SIZES, t)
    assert len(fit.segments) == 3
    for i, (seg, (alpha, bw)) in enumerate(zip(fit.segments, PROTOCOLS, strict=True)):
        # the segment holds the sizes its protocol wins, give or take the size next to a
        # crossover (where two protocols are within 1 % of each other)
        inside = (SIZES >= seg.min_bytes) & (SIZES <= seg.max_bytes)
        assert (proto[inside] == i).mean() >= 0.75
        assert seg.latency_s == pytest.approx(alpha, rel=0.02)
        assert 1 / seg.s_per_byte == pytest.approx(bw, rel=0.02)


def test_one_line_is_kept_when_there_is_one_regime():
    sizes = 2.0 ** np.arange(10, 30)
    t = 20e-6 + sizes / 47e9
    fit = fit_regimes(sizes, t * np.exp(np.random.default_rng(1).normal(0, 0.01, sizes.size)))
    assert len(fit.segments) == 1
    assert fit.segments[0].latency_s == pytest.approx(20e-6, rel=0.02)
    assert 1 / fit.segments[0].s_per_byte == pytest.approx(47e9, rel=0.02)


def test_a_single_size_is_flat_and_not_calibrated():
    fit = fit_regimes([1e6] * 5, [1e-3, 2e-3, 3e-3, 4e-3, 5e-3])
    assert not fit.slope_known and fit.predict(1e9)[0] == 3e-3
    f = fit_op("allreduce", 4, np.full(5, 1e6), np.array([1, 2, 3, 4, 5]) * 1e-3)
    assert f.status == "not calibrated: one message size, so bandwidth (β) is unknown"


def test_held_out_error_calls_a_sound_fit_calibrated():
    t, _ = noisy()
    f = fit_op("allreduce", 8, SIZES, t)
    assert f.status == "calibrated"
    # 0.5 % noise and 5 % stragglers: the typical held-out error is the noise, not 15 %
    assert np.nanmedian(f.heldout) < 0.02


def test_noisy_times_are_too_uncertain_whatever_r2_says():
    rng = np.random.default_rng(0)
    sizes = np.repeat([4.0, 264192.0, 644608.0], 12)
    t = (1e-3 + sizes / 1e8) * rng.uniform(0.3, 2.5, sizes.size)  # ±2–3× scatter, like gloo
    f = fit_op("allreduce", 4, sizes, t)
    median = np.nanmedian(f.heldout)
    assert median > CALIBRATED_MEDIAN_APE
    assert f.status == f"fit too uncertain: held-out median error {100 * median:.1f} %"


def test_status_rule_and_folds():
    assert status(np.array([0.1, 0.1, 0.2])).startswith("not calibrated: 3 held-out")
    assert status(np.array([0.1, 0.1, 0.14, 0.9])) == "calibrated"
    assert status(np.array([0.1, 0.2, 0.2, 0.9])).startswith("fit too uncertain: held-out")
    assert len(folds(60)) == 60 and len(folds(61)) == 10
    assert sorted(np.concatenate(folds(200))) == list(range(200))


def test_leave_one_out_scores_rows_the_fit_did_not_see():
    # a line through the origin fitted on the other rows predicts the held-out row exactly,
    # except the one row that is off the line by +50 %
    sizes = np.arange(1, 9) * 1e6
    t = sizes / 1e9
    t[3] *= 1.5
    errors = cross_validated_ape(sizes, t, lambda s, y: lambda x: x / 1e9)
    assert errors[3] == pytest.approx(1 / 3)
    assert np.delete(errors, 3) == pytest.approx(0)


def test_protocol_labels_give_one_line_per_protocol():
    # when the log or the kernel names say which protocol ran, each protocol gets its own line
    t, proto = noisy(seed=5, stragglers=0.0)
    names = np.array(["LL", "LL128", "Simple"], dtype=object)[proto]
    f = fit_op("allreduce", 8, SIZES, t, labels=names)
    assert f.regimes.names == ("LL", "LL128", "Simple")
    for seg, (alpha, bw) in zip(f.regimes.segments, PROTOCOLS, strict=True):
        assert seg.latency_s == pytest.approx(alpha, rel=0.02)
        assert 1 / seg.s_per_byte == pytest.approx(bw, rel=0.02)
    assert f.status == "calibrated"
    # a row without a label: the regimes come from the sizes instead
    names[0] = None
    assert fit_op("allreduce", 8, SIZES, t, labels=names).regimes.names == ()
