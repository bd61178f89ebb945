"""Is a change in step time larger than run-to-run noise? Two-sample tests on per-step times.

* Mann-Whitney U (two-sided): do the step times of one run tend to be larger than the
  other's? No assumption of normality; the exact permutation p-value when the number of
  splits is small (≤ 50 000), else the normal approximation with tie and continuity
  corrections.
* A percentile bootstrap 95 % confidence interval of the relative change of the median
  step time, median(B) / median(A) − 1 (resampling each run's steps, fixed seed).

A change is judged "slower" or "faster" only when both agree: p < ALPHA and the interval
excludes 0. docs/postmortem.md explains the choice.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import ArrayLike

ALPHA = 0.05
#: Fewest steps per run for a judgement; with fewer, noise cannot be estimated.
MIN_STEPS = 3
N_BOOT = 4000
SEED = 20260101
EXACT_LIMIT = 50_000
TEST_NAME = "Mann-Whitney U (two-sided) + bootstrap 95% CI of the median change"


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_v = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mann_whitney_u(a: ArrayLike, b: ArrayLike) -> tuple[float, float]:
    """(U of `a`, two-sided p-value) of the Mann-Whitney U test of samples `a` and `b`."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        raise ValueError("mann_whitney_u needs two non-empty samples")
    pooled = np.concatenate([x, y])
    r = _ranks(pooled)
    u = float(r[:n].sum() - n * (n + 1) / 2)
    mean = n * m / 2
    if math.comb(n + m, n) <= EXACT_LIMIT:
        dist = np.array(
            [r[list(c)].sum() for c in itertools.combinations(range(n + m), n)], dtype=float
        )
        us = dist - n * (n + 1) / 2
        extreme = np.abs(us - mean) >= abs(u - mean) - 1e-9
        return u, float(extreme.mean())
    _, counts = np.unique(pooled, return_counts=True)
    tie = float((counts**3 - counts).sum())
    var = n * m / 12 * ((n + m + 1) - tie / ((n + m) * (n + m - 1)))
    if var <= 0:
        return u, 1.0
    z = (abs(u - mean) - 0.5) / math.sqrt(var)
    return u, float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def bootstrap_change_ci(
    a: ArrayLike, b: ArrayLike, n_boot: int = N_BOOT, seed: int = SEED
) -> tuple[float, float]:
    """Percentile 95 % interval of median(b) / median(a) − 1 over bootstrap resamples."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    mx = np.median(rng.choice(x, size=(n_boot, len(x))), axis=1)
    my = np.median(rng.choice(y, size=(n_boot, len(y))), axis=1)
    ok = mx > 0
    change = my[ok] / mx[ok] - 1
    lo, hi = np.percentile(change, [2.5, 97.5])
    return float(lo), float(hi)


def judge(a: ArrayLike, b: ArrayLike) -> dict:
    """The noise-aware comparison of step times `b` against the baseline `a`: medians, the
    relative change, its interval, the U test's p and a judgement ("slower", "faster",
    "no change" within noise, or "too few steps")."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out: dict = {"test": TEST_NAME, "n_a": len(x), "n_b": len(y)}
    if len(x) == 0 or len(y) == 0:
        whose = "the baseline has" if len(x) == 0 else "this run has"
        return {**out, "judgement": f"not available: no steps ({whose} none)"}
    ma, mb = float(np.median(x)), float(np.median(y))
    out.update(median_a=ma, median_b=mb, change=mb / ma - 1 if ma else None)
    if min(len(x), len(y)) < MIN_STEPS:
        same = bool(np.array_equal(np.sort(x), np.sort(y)))
        verdict = (
            "no change"
            if same
            else f"too few steps to judge (< {MIN_STEPS} per run; baseline {len(x)}, "
            f"this run {len(y)})"
        )
        return {**out, "p_value": None, "ci_low": None, "ci_high": None, "judgement": verdict}
    _, p = mann_whitney_u(x, y)
    lo, hi = bootstrap_change_ci(x, y)
    if p < ALPHA and lo > 0:
        verdict = "slower"
    elif p < ALPHA and hi < 0:
        verdict = "faster"
    else:
        verdict = "no change"
    return {**out, "p_value": p, "ci_low": lo, "ci_high": hi, "judgement": verdict}


def regressed(j: dict, pct: float) -> bool:
    """Whether judgement `j` shows a slowdown of more than `pct` percent beyond noise: judged
    "slower" with the interval's lower end above pct; with too few steps to estimate noise,
    the plain change of the median above pct."""
    if j.get("judgement") == "slower":
        return j["ci_low"] * 100 > pct
    if j.get("ci_low") is None and j.get("change") is not None:
        return j["change"] * 100 > pct
    return False
