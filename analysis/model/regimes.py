"""Size regimes: one α-β line per contiguous range of message sizes (docs/model.md).

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

from commwall.analysis.model.fit import HUBER_C, AlphaBetaFit, _irls, clean, fit_alpha_beta

MAX_SEGMENTS = 3
#: At most this many candidate cut positions are tried (evenly spread over the sizes).
MAX_CUTS = 16
#: Rows of one size the cut search uses at most (thinned evenly beyond).
SEARCH_ROWS_PER_SIZE = 64
#: Log residuals below this are treated as exact (keeps the BIC finite on exact data).
RESIDUAL_FLOOR = 1e-6


@dataclass(frozen=True)
class RegimeFit:
    """Fits per size range, smallest sizes first; `slope_known` is False for the flat model of
    a single size; `names` the protocol of each segment when the rows said which ran."""

    segments: tuple[AlphaBetaFit, ...]
    slope_known: bool = True
    names: tuple[str, ...] = ()

    def segment_for(self, size_bytes: float) -> AlphaBetaFit:
        """The segment that predicts `size_bytes`: the last one starting at or below it (the
        first one below all of them)."""
        chosen = self.segments[0]
        for seg in self.segments:
            if seg.min_bytes <= size_bytes:
                chosen = seg
        return chosen

    def predict(self, size_bytes: np.ndarray | float) -> np.ndarray:
        """Predicted time (s) of messages of `size_bytes` (each by `segment_for`)."""
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        starts = np.array([seg.min_bytes for seg in self.segments])
        i = np.maximum(np.searchsorted(starts, s, side="right") - 1, 0)
        a = np.array([seg.latency_s for seg in self.segments])
        b = np.array([seg.s_per_byte for seg in self.segments])
        return a[i] + b[i] * s


def _flat(s: np.ndarray, t: np.ndarray) -> AlphaBetaFit:
    """The median time, as a fit with no slope."""
    dec = float(np.log10(s.max() / s.min()))
    return AlphaBetaFit(
        float(np.median(t)), 0.0, len(s), dec, None, 0.0, None, None, s.min(), s.max()
    )


def _huber_loss(res: np.ndarray, sigma: float) -> np.ndarray:
    """Twice the Huber loss of res/sigma, summed over the last axis (NaN entries count 0)."""
    u = np.abs(np.nan_to_num(res)) / sigma
    return 2 * np.where(u <= HUBER_C, u**2 / 2, HUBER_C * u - HUBER_C**2 / 2).sum(axis=-1)


def _penalty(k: int, n: int) -> float:
    """BIC penalty of k segments (α, β per segment and k − 1 cuts; a flat level is k = 0 with
    one parameter)."""
    return max(3 * k - 1, 1) * math.log(max(n, 2))


def _cut_positions(n_sizes: int) -> list[int]:
    """Indices into the distinct sizes where a segment may start (>= 2 sizes on each side)."""
    pos = list(range(2, n_sizes - 1))
    if len(pos) > MAX_CUTS:
        pos = sorted({pos[round(i)] for i in np.linspace(0, len(pos) - 1, MAX_CUTS)})
    return pos


class _Ranges:
    """Robust fits of contiguous ranges of distinct sizes, many at once (one padded batch), and
    their log residuals; rows beyond SEARCH_ROWS_PER_SIZE of one size are thinned evenly for
    the search (the chosen segments are refitted on every row)."""

    def __init__(self, s: np.ndarray, t: np.ndarray, sizes: np.ndarray) -> None:
        keep = np.zeros(len(s), bool)
        for lo, hi in zip(
            np.searchsorted(s, sizes), np.searchsorted(s, sizes, "right"), strict=True
        ):
            keep[
                np.unique(np.linspace(lo, hi - 1, min(hi - lo, SEARCH_ROWS_PER_SIZE)).astype(int))
            ] = True
        self.s, self.t = s[keep], t[keep]
        self.lo = np.searchsorted(self.s, sizes)
        self.hi = np.searchsorted(self.s, sizes, "right")
        self.res: dict[tuple[int, int], np.ndarray] = {}

    def residuals(self, ranges: list[tuple[int, int]]) -> None:
        """Fit every range (a, b) (distinct sizes a..b-1) not fitted yet, in one batch."""
        todo = [r for r in dict.fromkeys(ranges) if r not in self.res]
        if not todo:
            return
        first = np.array([self.lo[a] for a, _ in todo])
        count = np.array([self.hi[b - 1] for _, b in todo]) - first
        idx = first[:, None] + np.arange(count.max())[None, :]
        mask = idx < (first + count)[:, None]
        idx = np.minimum(idx, len(self.s) - 1)
        s, t = self.s[idx], self.t[idx]
        coef = _irls(s, t, True, mask=mask)
        res = np.where(
            mask, np.log(t / np.maximum(coef[:, :1] + coef[:, 1:] * s, 1e-3 * t)), np.nan
        )
        for r, row in zip(todo, res, strict=True):
            self.res[r] = row


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
    d = len(sizes)
    cuts = _cut_positions(d)
    pos = [0, *cuts, d]
    ranges = _Ranges(s, t, sizes)
    ranges.residuals([(a, b) for a in pos for b in pos if b - a >= 2])
    one = ranges.res[0, d]
    dev = np.abs(one - np.nanmedian(one))
    sigma = max(1.4826 * float(np.nanmedian(dev)), RESIDUAL_FLOOR)
    n = len(ranges.s)

    def score(bounds: tuple[int, ...]) -> float:
        """Robust BIC of a cut (inf when a segment has fewer than 2 distinct sizes)."""
        pairs = list(itertools.pairwise(bounds))
        if any(b - a < 2 for a, b in pairs):
            return math.inf
        ranges.residuals(pairs)
        loss = sum(float(_huber_loss(ranges.res[p], sigma)) for p in pairs)
        return loss + _penalty(len(pairs), n)

    best: tuple[float, tuple[int, ...]] = (score((0, d)), (0, d))
    for k in range(2, max_segments + 1):
        for combo in itertools.combinations(cuts, k - 1):
            sc = score((0, *combo, d))
            if sc < best[0] - 1e-9:
                best = (sc, (0, *combo, d))
    if len(cuts) < d - 3:
        best = _refine(best, score)
    level = float(np.median(ranges.t))
    if float(_huber_loss(np.log(ranges.t / level), sigma)) + _penalty(0, n) < best[0]:
        return RegimeFit((_flat(s, t),))  # times do not grow with size: one size-blind level
    starts = np.searchsorted(s, sizes)
    ends = np.searchsorted(s, sizes, "right")
    return RegimeFit(
        tuple(
            fit_alpha_beta(s[starts[a] : ends[b - 1]], t[starts[a] : ends[b - 1]])
            for a, b in itertools.pairwise(best[1])
        )
    )


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


def fit_labelled(size_bytes: np.ndarray, time_s: np.ndarray, labels: np.ndarray) -> RegimeFit:
    """One regime per protocol label, when the trace or NCCL's log said which protocol each row
    ran: a line per label with 2+ distinct sizes, the median level otherwise; one label is one
    line (or the size-blind level). Segments are ordered by their smallest size (NCCL switches
    protocol by size, so the labels' size ranges follow each other). Raises ValueError when
    fewer than 2 rows have a positive size and time."""
    s, t = np.asarray(size_bytes, float), np.asarray(time_s, float)
    lab = np.asarray(labels, dtype=object)
    keep = (s > 0) & (t > 0) & np.isfinite(s) & np.isfinite(t)
    s, t, lab = s[keep], t[keep], lab[keep]
    names = sorted(set(lab), key=lambda x: s[lab == x].min())
    if len(names) <= 1:
        fit = fit_regimes(s, t, max_segments=1)
        return RegimeFit(fit.segments, fit.slope_known, tuple(names))
    segs = []
    for name in names:
        g = lab == name
        one = len(np.unique(s[g])) == 1
        segs.append(_flat(s[g], t[g]) if one else fit_alpha_beta(s[g], t[g]))
    slope = any(x.s_per_byte > 0 for x in segs) or len(np.unique(s)) > 1
    return RegimeFit(tuple(segs), slope, tuple(names))
