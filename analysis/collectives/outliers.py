"""Robust outliers among per-rank or per-step values (median / MAD z-score)."""

from __future__ import annotations

from statistics import median

#: |z| above this is an outlier (Iglewicz & Hoaglin's 3.5).
Z_LIMIT = 3.5


def robust_z(values: list[float | None]) -> list[float | None]:
    """0.6745·(x − median)/MAD for each value; None for missing values, and for all values
    when the MAD is 0 (ties or fewer than three values: no spread to judge against)."""
    xs = [v for v in values if v is not None]
    if len(xs) < 3:
        return [None] * len(values)
    m = median(xs)
    mad = median(abs(x - m) for x in xs)
    if mad == 0:
        return [None] * len(values)
    return [None if v is None else 0.6745 * (v - m) / mad for v in values]


def flag_outliers(values: list[float | None], limit: float = Z_LIMIT) -> list[bool]:
    """True where the robust z-score's magnitude exceeds `limit`."""
    return [z is not None and abs(z) > limit for z in robust_z(values)]
