"""Held-out error that keeps a step together, the size-blind baseline in the "calibrated" rule,
and the floor under every size-based predictor (analysis/model/heldout.py)."""

from __future__ import annotations

import numpy as np
import pytest

from commwall.analysis.model.calibrate import fit_op
from commwall.analysis.model.heldout import (
    cross_validated_ape,
    folds,
    method,
    size_blind,
    size_only_floor,
    status,
)

STEPS = np.array([7, 7, 8, 8, 8, 9, 9, 10], dtype=object)


def test_a_step_is_held_out_whole():
    got = folds(len(STEPS), groups=STEPS)
    want = [[0, 1], [2, 3, 4], [5, 6], [7]]
    assert sorted(f.tolist() for f in got) == want
    assert method(len(STEPS), STEPS) == "leave-one-step-out"


def test_rows_alone_when_steps_are_too_few_or_missing():
    two = np.array([1, 1, 1, 2, 2, 2], dtype=object)
    assert sorted(f.tolist() for f in folds(6, groups=two)) == [[i] for i in range(6)]
    assert method(6, two) == "leave-one-out"
    # rows without a step are held out on their own, beside whole steps
    some = np.array([1, 1, 2, 3, None, np.nan], dtype=object)
    assert sorted(f.tolist() for f in folds(6, groups=some)) == [[0, 1], [2], [3], [4], [5]]


def test_many_steps_make_ten_folds_of_whole_steps():
    steps = np.repeat(np.arange(100), 3).astype(object)  # 100 steps of 3 rows
    got = folds(len(steps), groups=steps)
    assert len(got) == 10
    assert sorted(np.concatenate(got).tolist()) == list(range(300))
    for f in got:
        assert len(f) % 3 == 0 and all(np.sum(steps[f] == x) == 3 for x in set(steps[f]))
    assert method(len(steps), steps) == "10-fold by step"


def test_the_held_out_step_is_never_trained_on():
    # each row's size is its index + 1, so the training sizes name the training rows
    s = np.arange(1, len(STEPS) + 1, dtype=float)
    seen: list[set[int]] = []

    def spy(train_s, train_t):
        seen.append({int(x) - 1 for x in train_s})
        return lambda x: np.ones(len(x))

    cross_validated_ape(s, np.ones(len(s)), spy, groups=STEPS)
    assert len(seen) == 4
    for train in seen:
        held = set(range(len(s))) - train
        assert len({STEPS[i] for i in held}) == 1  # exactly one step held out
        assert not {STEPS[i] for i in held} & {STEPS[i] for i in train}


def test_step_conditions_leak_through_row_folds():
    # every row of a step shares that step's slowdown (1x, 2x, 4x, 8x): a predictor that
    # uses rows of the same step (here: the median of the training rows of the row's step,
    # else the overall median) looks perfect when rows are held out alone, but not when the
    # step is held out whole
    steps = np.repeat(np.arange(4), 3).astype(object)
    t = np.repeat([1.0, 2.0, 4.0, 8.0], 3)
    s = np.arange(len(t), dtype=float)  # a row's size names the row

    def same_step(train_s, train_t):
        by_step: dict = {}
        for i, x in zip(train_s.astype(int), train_t, strict=True):
            by_step.setdefault(steps[i], []).append(x)
        level = float(np.median(train_t))
        return lambda x: np.array([np.median(by_step.get(steps[int(i)], [level])) for i in x])

    assert np.nanmax(cross_validated_ape(s, t, same_step)) == 0
    grouped = cross_validated_ape(s, t, same_step, groups=steps)
    # without the step, the median of the other three steps' rows: step 1x → 4, 2x → 4,
    # 4x → 2, 8x → 2 (by hand): errors 3, 1, 0.5, 0.75
    assert grouped == pytest.approx(np.repeat([3.0, 1.0, 0.5, 0.75], 3))


def test_size_blind_baseline_predicts_the_training_median():
    assert size_blind(np.array([1.0, 2, 3]), np.array([5.0, 1, 3]))(np.array([9.0, 10])) == (
        pytest.approx([3.0, 3.0])
    )


def test_calibrated_only_when_no_worse_than_the_size_blind_level():
    fit = np.array([0.08, 0.10, 0.10, 0.12])  # median 10 %
    assert status(fit, baseline=np.array([0.2, 0.3, 0.3, 0.4])) == "calibrated"
    assert status(fit, baseline=np.array([0.04, 0.05, 0.05, 0.06])) == (
        "fit too uncertain: held-out median error 10.0 %, "
        "no better than the size-blind level (5.0 %)"
    )
    # above the 15 % line the status names the fit's own error only
    assert status(3 * fit, baseline=fit) == "fit too uncertain: held-out median error 30.0 %"


def test_fit_op_holds_out_steps_and_scores_the_baseline_on_the_same_folds():
    # α = 20 µs, 10 GB/s, three sizes a step over 5 steps, each step 1.0x ... 1.2x slower
    sizes = np.tile([1e5, 1e6, 1e7], 5)
    steps = np.repeat(np.arange(5), 3).astype(object)
    slow = np.repeat(1 + np.arange(5) / 20, 3)
    t = (20e-6 + sizes / 10e9) * slow
    f = fit_op("allreduce", 2, sizes, t, steps=steps)
    assert f.heldout_method == "leave-one-step-out"
    # the size-blind level of four steps' rows predicts every size by one time: far off
    assert np.median(f.heldout_size_blind) > 0.5
    assert np.median(f.heldout) < 0.15 and f.status == "calibrated"


@pytest.mark.parametrize(
    ("times", "floor"),
    [
        ([1.0, 2.0, 4.0], 1 / 3),  # 2 rows within x of c: c = 1 + x = 2(1 − x)
        ([1.0, 10.0, 100.0], 9 / 11),  # (1 + x)/(1 − x) = 10
        ([1.0, 100.0], 0.0),  # one of two rows exactly
    ],
)
def test_floor_of_one_size_by_hand(times, floor):
    t = np.array(times)
    assert size_only_floor(np.ones(len(t)), t) == pytest.approx(floor, abs=2e-4)


def test_floor_is_the_best_any_per_size_prediction_reaches():
    # brute force: every pair of per-size predictions from a fine grid; the floor is at most
    # a hair below the best grid pair (bisection is exact, the grid is not) and never above
    rng = np.random.default_rng(3)
    t1, t2 = np.exp(rng.normal(0, 1, (2, 5)))
    grid = np.exp(np.linspace(-3, 3, 601))
    e1 = np.abs(grid[:, None] - t1) / t1  # (prediction, row)
    e2 = np.abs(grid[:, None] - t2) / t2
    pooled = np.concatenate(np.broadcast_arrays(e1[:, None], e2[None, :]), axis=-1)
    best = np.sort(pooled, axis=-1)[..., (10 + 1) // 2 - 1].min()
    got = size_only_floor(np.repeat([1.0, 2.0], 5), np.concatenate([t1, t2]))
    assert got <= best + 2e-4
    assert got == pytest.approx(best, abs=0.02)
