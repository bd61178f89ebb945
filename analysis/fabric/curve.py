"""A collective's time against its message size on one fabric, shaped like NCCL (docs/model.md).

NCCL picks, per message size, a protocol (LL, LL128, Simple) and a number of channels; each
choice is an α-β line `lat + S/bw`, and the choice changes between sizes. So the measured curve
is a chain of α-β lines: between two neighbouring measured sizes the time follows the line
through both (`a + b·S` with a ≥ 0 the latency of that regime and b ≥ 0 its inverse algorithm
bandwidth), a switch point at every measured size. Two constraints carry NCCL's shape: the time
never falls as the size grows (b ≥ 0), and neither does the algorithm bandwidth S/t (a ≥ 0; a
segment where the measured bandwidth dips is interpolated at the dip's constant slope in
log-size, log-time). Beyond the measured sizes the end segments' lines continue: below the
smallest, the latency regime; above the largest, the bandwidth regime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Curve:
    """The calibrated curve of one table: measured sizes (bytes, ascending, distinct, > 0) and
    their times (s)."""

    sizes: tuple[float, ...]
    times: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.sizes) < 2 or len(self.sizes) != len(self.times):
            raise ValueError("a curve needs at least 2 sizes, each with a time")

    def segment(self, i: int) -> tuple[float, float]:
        """The α-β line (a [s], b [s/B]) between sizes i and i+1; a is NaN where the algorithm
        bandwidth dips there (the segment is read in log-log then)."""
        s1, s2, t1, t2 = self.sizes[i], self.sizes[i + 1], self.times[i], self.times[i + 1]
        b = max((t2 - t1) / (s2 - s1), 0.0)
        a = t1 - b * s1
        return (a, b) if a >= 0 else (float("nan"), b)

    def time_s(self, size: float) -> float:
        """Predicted time (s) of a message of `size` bytes (> 0)."""
        if size <= 0:
            raise ValueError(f"size must be positive, got {size}")
        s = self.sizes
        i = int(np.searchsorted(s, size))
        i = min(max(i, 1), len(s) - 1) - 1
        a, b = self.segment(i)
        if not np.isnan(a):
            return a + b * size
        # a bandwidth dip: constant log-log slope through the two sizes (clamped to 0..1)
        t1, t2 = self.times[i], self.times[i + 1]
        slope = float(np.clip(np.log(t2 / t1) / np.log(s[i + 1] / s[i]), 0.0, 1.0))
        ref_s, ref_t = (s[i], t1) if size <= s[i] else (s[i + 1], t2)
        return float(ref_t * (size / ref_s) ** slope)

    def times_s(self, sizes: Sequence[float] | np.ndarray) -> np.ndarray:
        """`time_s` of each size."""
        return np.array([self.time_s(float(x)) for x in sizes], dtype=float)


def points(sizes: Sequence[float], times: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Positive sizes with finite positive times, one time per size (the median of its rows),
    sizes ascending."""
    by_size: dict[float, list[float]] = {}
    for s, t in zip(sizes, times, strict=True):
        if s is not None and t is not None and s > 0 and np.isfinite(t) and t > 0:
            by_size.setdefault(float(s), []).append(float(t))
    keys = sorted(by_size)
    return np.array(keys, dtype=float), np.array([np.median(by_size[k]) for k in keys])


def fit_curve(sizes: Sequence[float], times: Sequence[float]) -> Curve:
    """The curve through a table's (size, time) rows (see `points`); ValueError with fewer
    than 2 distinct positive sizes."""
    s, t = points(sizes, times)
    if len(s) < 2:
        raise ValueError(f"need 2 distinct positive sizes with a time, got {len(s)}")
    return Curve(tuple(float(x) for x in s), tuple(float(x) for x in t))


def leave_one_size_out(sizes: Sequence[float], times: Sequence[float]) -> dict[float, float]:
    """Each size's time predicted by the curve fitted without that size (size → s); empty
    with fewer than 3 distinct sizes."""
    s, t = points(sizes, times)
    if len(s) < 3:
        return {}
    out = {}
    for i in range(len(s)):
        keep = np.arange(len(s)) != i
        out[float(s[i])] = Curve(tuple(s[keep]), tuple(t[keep])).time_s(float(s[i]))
    return out


def two_point_line(sizes: Sequence[float], times: Sequence[float], factor: float) -> Curve | None:
    """The single α-β line an engineer draws through a table: the time at its smallest size as
    α and its peak bus bandwidth as B, `t = α + factor·S/B` (`factor` the op's bus-bandwidth
    factor), as a two-knot curve; None with fewer than 2 sizes."""
    s, t = points(sizes, times)
    if len(s) < 2:
        return None
    peak_busbw = float(np.max(factor * s / t))
    alpha = float(t[0])
    far = float(s[-1]) * 2
    return Curve(
        (float(s[0]), far), (alpha + factor * s[0] / peak_busbw, alpha + factor * far / peak_busbw)
    )


def ape(predicted: float | None, measured: float) -> float | None:
    """|predicted − measured| / measured (None without a prediction)."""
    if predicted is None or not np.isfinite(predicted) or measured <= 0:
        return None
    return abs(predicted - measured) / measured


def median_p90(errors: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Median and 90th percentile of the errors that exist (None, None when none do)."""
    e = [x for x in errors if x is not None]
    if not e:
        return None, None
    return float(np.median(e)), float(np.percentile(e, 90))
