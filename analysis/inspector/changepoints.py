"""Change points of a series by binary segmentation (docs/inspector.md).

A series is split where the difference of the means on the two sides, weighted by
sqrt(n_left × n_right / n), is largest (the CUSUM statistic of a mean shift); the split is kept
when both sides hold at least `min_seg` points and their means differ by at least `min_rel` of
the larger (or by `min_abs` when given), and each side is split again, up to `max_points`
change points. Then each change point is checked against the medians of the two segments it
separates, and dropped (its segments merged) when they differ by less: the medians, not the
means, are reported, so one odd minute moves neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median


@dataclass(frozen=True)
class Change:
    """A change point: the series moves from `before` to `after` at index `at` (the first
    point of the new level)."""

    at: int
    before: float
    after: float

    @property
    def relative(self) -> float:
        """(after - before) / before; -0.56 is a fall of 56 %."""
        return (self.after - self.before) / self.before if self.before else 0.0


def _best_split(y: list[float], a: int, b: int, min_seg: int) -> int | None:
    n = b - a
    if n < 2 * min_seg:
        return None
    prefix = [0.0]
    for v in y[a:b]:
        prefix.append(prefix[-1] + v)
    total = prefix[-1]
    best, best_k = -1.0, None
    for k in range(min_seg, n - min_seg + 1):
        left = prefix[k] / k
        right = (total - prefix[k]) / (n - k)
        stat = abs(left - right) * (k * (n - k) / n) ** 0.5
        if stat > best:
            best, best_k = stat, a + k
    return best_k


def change_points(
    y: list[float],
    min_seg: int = 3,
    min_rel: float = 0.2,
    min_abs: float | None = None,
    max_points: int = 5,
) -> list[Change]:
    """The change points of `y` in index order (module docstring)."""
    found: list[int] = []
    todo = [(0, len(y))]
    while todo and len(found) < max_points:
        a, b = todo.pop(0)
        k = _best_split(y, a, b, min_seg)
        if k is None:
            continue
        if not _moved(sum(y[a:k]) / (k - a), sum(y[k:b]) / (b - k), min_rel, min_abs):
            continue
        found.append(k)
        todo += [(a, k), (k, b)]
    cuts = sorted(found)
    while True:  # drop the weakest change whose segments' medians hardly differ, until none
        bounds = [0, *cuts, len(y)]
        meds = [median(y[bounds[i] : bounds[i + 1]]) for i in range(len(bounds) - 1)]
        weak = [i for i in range(len(cuts)) if not _moved(meds[i], meds[i + 1], min_rel, min_abs)]
        if not weak:
            return [Change(c, meds[i], meds[i + 1]) for i, c in enumerate(cuts)]
        del cuts[min(weak, key=lambda i: abs(meds[i + 1] - meds[i]))]


def _moved(m1: float, m2: float, min_rel: float, min_abs: float | None) -> bool:
    if min_abs is not None:
        return abs(m2 - m1) >= min_abs
    big = max(abs(m1), abs(m2))
    return big > 0 and abs(m2 - m1) >= min_rel * big


def segments(n: int, changes: list[Change]) -> list[tuple[int, int]]:
    """The [start, end) index ranges between change points of a series of `n` points."""
    bounds = [0, *(c.at for c in changes), n]
    return list(zip(bounds[:-1], bounds[1:], strict=True))
