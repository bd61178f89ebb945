"""Is a change in step time larger than run-to-run noise? Two-sample tests on per-step times.

* Mann-Whitney U (two-sided): do the step times of one run tend to be larger than the
  other's? No assumption of normality; the exact permutation p-value when the number of
  splits is small (≤ 50 000), else the normal approximation with tie and continuity
  corrections.
* A percentile bootstrap 95 % confidence interval of the relative change of the median
  step time, median(B) / median(A) − 1 (resampling each run's steps, fixed seed).

A change is judged "slower" or "faster" only when both agree: p < ALPHA and the interval
excludes 0. docs/postmortem.md explains the choice.

When both runs hold the same steps (by step number: the same job's steps 2-11 profiled twice),
at least MIN_PAIRED of them and nearly all of each run's, the steps are compared pair by pair:
the Wilcoxon signed-rank test (two-sided; exact over the signs for up to EXACT_PAIRED pairs,
else the normal approximation with tie and continuity corrections) on the differences, and the
bootstrap resamples the pairs. Step k of one run and step k of the other do the same work, so
the variation from step to step (alternating kinds of step, a periodic checkpoint) cancels: a
regression of every step that the unpaired test reads as noise among alternating step times is
seen. The median change and its meaning are the same either way.
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
PAIRED_TEST_NAME = (
    "Wilcoxon signed-rank over steps paired by number (two-sided) + paired bootstrap 95% CI of "
    "the median change"
)
#: Fewest steps both runs hold for the paired test (with 10 pairs all of one sign, p = 0.002;
#: with 5 the smallest p is 0.0625, so nothing could ever be judged), and the least share of
#: each run's steps they must be (else the runs profiled different parts of the job).
MIN_PAIRED = 10
PAIRED_SHARE = 0.8
#: Pairs up to which the signed-rank p-value is exact (over all 2^n signs, by counting sums).
EXACT_PAIRED = 60


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


def wilcoxon_signed_rank(d: ArrayLike) -> tuple[float, float]:
    """(W+, two-sided p-value) of the Wilcoxon signed-rank test of differences `d` against 0;
    zero differences are dropped (Wilcoxon's rule). p = 1 when nothing is left."""
    x = np.asarray(d, dtype=float)
    x = x[x != 0]
    n = len(x)
    if n == 0:
        return 0.0, 1.0
    r = _ranks(np.abs(x))
    w = float(r[x > 0].sum())
    mean = n * (n + 1) / 4
    if n <= EXACT_PAIRED:
        # the null distribution of W+ over the 2^n sign assignments, on doubled ranks (average
        # ranks of ties are halves): counts[s] = sign assignments whose positive ranks sum to s/2
        twice = np.rint(2 * r).astype(int)
        counts = np.zeros(int(twice.sum()) + 1)
        counts[0] = 1.0
        for t in twice:
            counts[t:] = counts[t:] + counts[: len(counts) - t].copy()
        sums = np.arange(len(counts)) / 2
        extreme = np.abs(sums - mean) >= abs(w - mean) - 1e-9
        return w, float(min(1.0, counts[extreme].sum() / counts.sum()))
    _, ties = np.unique(np.abs(x), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24 - float((ties**3 - ties).sum()) / 48
    if var <= 0:
        return w, 1.0
    z = (abs(w - mean) - 0.5) / math.sqrt(var)
    return w, float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def paired_change_ci(
    a: ArrayLike, b: ArrayLike, n_boot: int = N_BOOT, seed: int = SEED
) -> tuple[float, float]:
    """Percentile 95 % interval of median(b) / median(a) − 1 over bootstrap resamples of the
    pairs (a[i], b[i]) together."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    mx, my = np.median(x[idx], axis=1), np.median(y[idx], axis=1)
    ok = mx > 0
    lo, hi = np.percentile(my[ok] / mx[ok] - 1, [2.5, 97.5])
    return float(lo), float(hi)


def pairs(
    a_steps: ArrayLike, a: ArrayLike, b_steps: ArrayLike, b: ArrayLike
) -> tuple[np.ndarray, np.ndarray] | None:
    """The step times of the steps both runs hold, in step order, as two aligned arrays, when
    they are at least MIN_PAIRED and PAIRED_SHARE of each run's steps; else None."""
    ka, kb = np.asarray(a_steps), np.asarray(b_steps)
    if len(ka) == 0 or len(kb) == 0:
        return None
    common = np.intersect1d(ka, kb)
    if len(common) < MIN_PAIRED or len(common) < PAIRED_SHARE * max(len(ka), len(kb)):
        return None
    if len(np.unique(ka)) != len(ka) or len(np.unique(kb)) != len(kb):
        return None
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ia = {int(k): i for i, k in enumerate(ka)}
    ib = {int(k): i for i, k in enumerate(kb)}
    return (
        np.array([xa[ia[int(k)]] for k in common]),
        np.array([xb[ib[int(k)]] for k in common]),
    )


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


def judge(a: ArrayLike, b: ArrayLike, paired: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """The noise-aware comparison of step times `b` against the baseline `a`: medians, the
    relative change, its interval, the test's p and a judgement ("slower", "faster",
    "no change" within noise, or "too few steps"). `paired`: the same steps' times of both
    runs (`pairs`), compared pair by pair instead (`paired` True in the result; the change is
    then that of the medians over those steps, the medians `median_a`/`median_b` stay those of
    all steps)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out: dict = {"test": TEST_NAME, "n_a": len(x), "n_b": len(y), "paired": False}
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
    if paired is not None and len(paired[0]) >= MIN_PAIRED:
        pa, pb = paired
        _, p = wilcoxon_signed_rank(pb - pa)
        lo, hi = paired_change_ci(pa, pb)
        # the change over the same steps as its interval and test: over all steps it could fall
        # outside its own interval when the runs share only 80-99 % of their steps
        pma = float(np.median(pa))
        out.update(test=PAIRED_TEST_NAME, paired=True, n_pairs=len(pa))
        out.update(change=float(np.median(pb)) / pma - 1 if pma else None)
    else:
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
