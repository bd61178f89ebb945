"""Size regimes: one α-β line per contiguous range of message sizes (MODEL.md §6).

A real NCCL collective is not one line: small messages are latency-bound and use the LL
protocol, mid sizes LL128, large ones Simple, each with its own latency and bandwidth, and NCCL
switches protocol where one line undercuts the next. When the rows do not say which protocol
ran, the regimes are found from the data: the distinct sizes are cut into up to
`MAX_SEGMENTS` contiguous ranges (each with at least 2 distinct sizes, so α and β are both
determined), each range gets its own robust fit, and the cut is chosen by a robust BIC on the
log residuals: the Huber loss at the one-line fit's robust scale (MAD), so that
stragglers do not buy extra segments, plus log n for each of α, β and the cut of an added
segment. One distinct size gives a flat model
(the median time): β is then unknown. The same flat level is also a candidate when there are
several sizes (one parameter): it wins when the times do not grow with size (CPU gloo runs
whose transfer time is dominated by scheduling noise).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from analysis.model.fit import HUBER_C, AlphaBetaFit, clean, fit_alpha_beta, log_residuals

MAX_SEGMENTS = 3
#: At most this many candidate cut positions are tried (evenly spread over the sizes).
MAX_CUTS = 16
#: Relative residuals below this are treated as exact (keeps the BIC finite on exact data).
RESIDUAL_FLOOR = 1e-6


@dataclass(frozen=True)
class RegimeFit:
    """Fits per size range, smallest sizes first; `slope_known` is False for the flat model of
    a single size."""

    segments: tuple[AlphaBetaFit, ...]
    slope_known: bool = True

    def segment_for(self, size_bytes: float) -> AlphaBetaFit:
        """The segment that predicts `size_bytes`: the last one starting at or below it (the
        first one below all of them)."""
        chosen = self.segments[0]
        for seg in self.segments:
            if seg.min_bytes <= size_bytes:
                chosen = seg
        return chosen

    def predict(self, size_bytes: np.ndarray | float) -> np.ndarray:
        """Predicted time (s) of messages of `size_bytes`."""
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        return np.array([self.segment_for(x).predict(x) for x in s], dtype=float)


def _flat(s: np.ndarray, t: np.ndarray) -> AlphaBetaFit:
    """The median time, as a fit with no slope."""
    dec = float(np.log10(s.max() / s.min()))
    return AlphaBetaFit(
        float(np.median(t)), 0.0, len(s), dec, None, 0.0, None, None, s.min(), s.max()
    )


def _score(res: np.ndarray, k: int, sigma: float) -> float:
    """Robust BIC of log residuals `res` with k segments: twice the Huber loss of
    res/sigma (sigma fixed across candidates) plus (3k − 1)·log n."""
    u = np.abs(res) / sigma
    loss = np.where(u <= HUBER_C, u**2 / 2, HUBER_C * u - HUBER_C**2 / 2).sum()
    return 2 * float(loss) + (3 * k - 1) * math.log(max(len(res), 2))


def _cut_positions(n_sizes: int) -> list[int]:
    """Indices into the distinct sizes where a segment may start (>= 2 sizes on each side)."""
    pos = list(range(2, n_sizes - 1))
    if len(pos) > MAX_CUTS:
        pos = sorted({pos[round(i)] for i in np.linspace(0, len(pos) - 1, MAX_CUTS)})
    return pos


def fit_regimes(
    size_bytes: np.ndarray, time_s: np.ndarray, max_segments: int = MAX_SEGMENTS
) -> RegimeFit:
    """The piecewise α-β fit of (size, time) rows. Raises ValueError when fewer than 2 rows
    have a positive size and time."""
    s, t = clean(size_bytes, time_s)
    if len(s) < 2:
        raise ValueError("need at least 2 rows with positive size and time")
    order = np.argsort(s, kind="stable")
    s, t = s[order], t[order]
    sizes = np.unique(s)
    if len(sizes) == 1:
        return RegimeFit((_flat(s, t),), slope_known=False)
    starts = np.searchsorted(s, sizes)  # row index where each distinct size begins
    cache: dict[tuple[int, int], tuple[AlphaBetaFit, np.ndarray]] = {}

    def seg(i: int, j: int) -> tuple[AlphaBetaFit, np.ndarray]:
        """Fit of distinct sizes i..j-1 and its relative residuals."""
        if (i, j) not in cache:
            lo, hi = starts[i], (starts[j] if j < len(sizes) else len(s))
            f = fit_alpha_beta(s[lo:hi], t[lo:hi])
            cache[i, j] = (f, log_residuals(t[lo:hi], f.predict(s[lo:hi])))
        return cache[i, j]

    one = seg(0, len(sizes))[1]
    sigma = max(1.4826 * float(np.median(np.abs(one - np.median(one)))), RESIDUAL_FLOOR)

    def score(bounds: tuple[int, ...]) -> float:
        """Robust BIC of a cut (inf when a segment has fewer than 2 distinct sizes)."""
        if any(b - a < 2 for a, b in itertools.pairwise(bounds)):
            return math.inf
        res = np.concatenate([seg(a, b)[1] for a, b in itertools.pairwise(bounds)])
        return _score(res, len(bounds) - 1, sigma)

    cuts = _cut_positions(len(sizes))
    best = (score((0, len(sizes))), (0, len(sizes)))
    for k in range(2, max_segments + 1):
        for combo in itertools.combinations(cuts, k - 1):
            bounds = (0, *combo, len(sizes))
            sc = score(bounds)
            if sc < best[0] - 1e-9:
                best = (sc, bounds)
    best = _refine(best, score)
    flat = _flat(s, t)
    res = log_residuals(t, np.full(len(t), flat.latency_s))
    if _score(res, 0, sigma) + 2 * math.log(len(s)) < best[0]:
        return RegimeFit((flat,))  # times do not grow with size: one size-blind level
    return RegimeFit(tuple(seg(a, b)[0] for a, b in itertools.pairwise(best[1])))


def _refine(
    best: tuple[float, tuple[int, ...]], score: Callable[[tuple[int, ...]], float]
) -> tuple[float, tuple[int, ...]]:
    """Move each cut of `best` to every position between its neighbours, keeping the others,
    while that lowers the score (the coarse search tries at most MAX_CUTS positions)."""
    improved = True
    while improved:
        improved = False
        bounds = list(best[1])
        for i in range(1, len(bounds) - 1):
            for pos in range(bounds[i - 1] + 2, bounds[i + 1] - 1):
                trial = tuple(bounds[:i] + [pos] + bounds[i + 1 :])
                sc = score(trial)
                if sc < best[0] - 1e-9:
                    best, improved = (sc, trial), True
            bounds = list(best[1])
    return best
