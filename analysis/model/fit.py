"""Robust α-β fit of collective times: t = a + b·S (docs/model.md), one line per size regime.

Rows are (S bytes, transfer time s) of matched collectives — transfer time, never a rank's
kernel duration (mostly waiting). The loss is Huber on log residuals log(t / (a + b·S)),
solved by Gauss-Newton with Huber weights: on ratios, so small messages are not drowned by
large ones and over- and under-prediction by the same factor cost the same (relative
residuals (t − p)/t would pull the line low when times scatter by factors); Huber, so
stragglers and congestion (heavy upper tails) get bounded influence.
The solver uses a pseudo-inverse: singular designs (one size, resampled duplicates) give the
minimum-norm answer instead of an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commwall.analysis.model.busbw import busbw_factor, ring_steps

HUBER_C = 1.345
#: The least scale of the log residuals the Huber weights are taken against: a ratio error of
#: 1e-6 is a perfect fit. Without a floor, data that fit exactly (residuals of 1e-16, rounding)
#: got weights spread over eight orders of magnitude from rounding noise alone, the weighted
#: design became near-singular and its minimum-norm solution was wrong (a planted α = 1 µs at
#: 822 GB/s over 385 ranks came back 19 % low, R² 0.96).
MIN_RESIDUAL_SCALE = 1e-6
#: Sizes must span this many decades for α to be called identifiable (a flag only: the
#: intercept is fitted whenever there are two distinct sizes).
MIN_DECADES = 3.0


@dataclass(frozen=True)
class AlphaBetaFit:
    """t = latency_s + s_per_byte·S; r2 is None when the times do not vary. `identifiable`
    says whether the sizes span `MIN_DECADES` decades (else α and β trade off against each
    other and the line is only trustworthy inside the fitted sizes). CIs are bootstrap
    2.5–97.5 % percentiles (None without bootstrap)."""

    latency_s: float
    s_per_byte: float
    n: int
    decades: float
    r2: float | None
    residual_cv: float
    latency_ci_s: tuple[float, float] | None = None
    s_per_byte_ci: tuple[float, float] | None = None
    min_bytes: float = 0.0
    max_bytes: float = float("inf")

    @property
    def identifiable(self) -> bool:
        """Whether the sizes span enough decades to separate α from β."""
        return self.decades >= MIN_DECADES

    def predict(self, size_bytes: np.ndarray | float) -> np.ndarray | float:
        """Predicted time (s) of messages of `size_bytes`."""
        return self.latency_s + self.s_per_byte * np.asarray(size_bytes, dtype=float)


def _solve(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares x·c ≈ y for a batch (x: k×n×p, y: k×n, p <= 2): normal equations, with a
    pseudo-inverse for the (near-)singular ones, so it never raises on singular designs
    (minimum-norm solution)."""
    xt = x.transpose(0, 2, 1)
    a = xt @ x
    b = (xt @ y[..., None])[..., 0]
    if x.shape[-1] == 1:
        ok = a[:, 0, 0] > 0
        out = np.zeros((len(x), 1))
        out[ok, 0] = b[ok, 0] / a[ok, 0, 0]
        return out
    det = a[:, 0, 0] * a[:, 1, 1] - a[:, 0, 1] * a[:, 1, 0]
    ok = np.abs(det) > 1e-10 * np.abs(a[:, 0, 0] * a[:, 1, 1])
    out = np.empty((len(x), 2))
    d = np.where(ok, det, 1.0)
    out[:, 0] = (a[:, 1, 1] * b[:, 0] - a[:, 0, 1] * b[:, 1]) / d
    out[:, 1] = (a[:, 0, 0] * b[:, 1] - a[:, 1, 0] * b[:, 0]) / d
    if not ok.all():
        out[~ok] = (np.linalg.pinv(x[~ok]) @ y[~ok][..., None])[..., 0]
    return out


def _row_median(r: np.ndarray) -> np.ndarray:
    """Median of each row of `r` ignoring NaN (rows with at least one number)."""
    srt = np.sort(r, axis=1)  # NaN last
    n = (~np.isnan(r)).sum(axis=1)
    lo, hi = (np.maximum(n - 1, 0)) // 2, n // 2
    rows = np.arange(len(r))
    return (srt[rows, lo] + srt[rows, np.minimum(hi, r.shape[1] - 1)]) / 2


def log_residuals(t: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """log(t / predicted): the error as a ratio, symmetric in over- and under-prediction
    (predictions at or below 0 count as 1/1000 of the measurement)."""
    return np.log(t / np.maximum(pred, 1e-3 * t))


def _irls(
    s: np.ndarray, t: np.ndarray, intercept: bool, iters: int = 50, mask: np.ndarray | None = None
) -> np.ndarray:
    """Huber fit of t ≈ a + b·s on log residuals log(t / (a + b·s)), for a batch of samples
    (rows of the 2-D arrays s, t; `mask` False marks padding of shorter samples), by
    Gauss-Newton with Huber weights (MAD scale) from the relative least-squares start; returns
    an array of (a, b) rows with a >= 0 and b >= 0 (a negative intercept is refitted through
    the origin, a negative slope as the median time)."""
    m = np.ones(s.shape, bool) if mask is None else mask
    s, t = np.where(m, s, 0.0), np.where(m, t, 1.0)
    scale = s.max(axis=1, keepdims=True)
    ones = np.ones_like(s)
    x = np.stack([ones, s / scale], axis=-1) if intercept else (s / scale)[..., None]
    coef = _solve(x * (m / t)[..., None], m * ones)
    for _ in range(iters):
        p = np.maximum((x @ coef[..., None])[..., 0], 1e-3 * t)
        res = np.log(t / p)
        r = np.where(m, res, np.nan)
        mad = _row_median(np.abs(r - _row_median(r)[:, None])) / 0.6745
        u = np.abs(res) / np.maximum(HUBER_C * mad, MIN_RESIDUAL_SCALE)[:, None]
        sw = m * np.sqrt(np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-300))) / p
        new = _solve(x * sw[..., None], p * (1 + res) * sw)
        done = np.allclose(new, coef, rtol=1e-8, atol=0)
        coef = new
        if done:
            break
    out = np.zeros((len(s), 2))
    if intercept:
        out[:, 0], out[:, 1] = coef[:, 0], coef[:, 1] / scale[:, 0]
        neg_a, neg_b = out[:, 0] < 0, out[:, 1] < 0
        if neg_a.any():
            out[neg_a] = _irls(s[neg_a], t[neg_a], False, iters, m[neg_a])
        flat = neg_b & ~neg_a
        out[flat, 0] = _row_median(np.where(m[flat], t[flat], np.nan))
        out[flat, 1] = 0.0
    else:
        out[:, 1] = coef[:, 0] / scale[:, 0]
    out[:, 1] = np.maximum(out[:, 1], 0.0)
    return out


def clean(size_bytes: np.ndarray, time_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows with finite positive size and time, as float arrays."""
    s = np.asarray(size_bytes, dtype=float)
    t = np.asarray(time_s, dtype=float)
    keep = (s > 0) & (t > 0) & np.isfinite(s) & np.isfinite(t)
    return s[keep], t[keep]


def fit_alpha_beta(
    size_bytes: np.ndarray,
    time_s: np.ndarray,
    bootstrap: int = 0,
    seed: int = 0,
) -> AlphaBetaFit:
    """Fit t = a + b·S to positive sizes and times. Raises ValueError (only) when there are
    fewer than 2 rows or fewer than 2 distinct sizes; `bootstrap` resamples give confidence
    intervals (deterministic for a `seed`)."""
    s, t = clean(size_bytes, time_s)
    if len(s) < 2:
        raise ValueError("need at least 2 rows with positive size and time")
    if s.min() == s.max():
        raise ValueError(f"all {len(s)} rows have one size ({s[0]:.0f} B): no slope")
    decades = float(np.log10(s.max() / s.min()))
    a, b = _irls(s[None], t[None], True)[0]
    pred = a + b * s
    ss_tot = float(((t - t.mean()) ** 2).sum())
    r2 = 1 - float(((t - pred) ** 2).sum()) / ss_tot if ss_tot > 1e-12 * (t**2).sum() else None
    cv = float(np.std((t - pred) / t))
    a_ci = b_ci = None
    if bootstrap:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(s), (bootstrap, len(s)))
        draws = _irls(s[idx], t[idx], True)
        lo_hi = np.percentile(draws, [2.5, 97.5], axis=0)
        a_ci = (float(lo_hi[0, 0]), float(lo_hi[1, 0]))
        b_ci = (float(lo_hi[0, 1]), float(lo_hi[1, 1]))
    return AlphaBetaFit(
        latency_s=float(a),
        s_per_byte=float(b),
        n=len(s),
        decades=decades,
        r2=r2,
        residual_cv=cv,
        latency_ci_s=a_ci,
        s_per_byte_ci=b_ci,
        min_bytes=float(s.min()),
        max_bytes=float(s.max()),
    )


@dataclass(frozen=True)
class LinkFit:
    """A fit mapped onto the ring α-β model of `op` on `n` ranks (docs/model.md):
    alpha_s = a / steps (per hop), bandwidth_Bps = factor / b (the bus bandwidth B of
    `T = steps·α + factor·S/B`; inf when the time does not grow with size)."""

    op: str
    n_ranks: int
    fit: AlphaBetaFit
    alpha_s: float
    bandwidth_Bps: float

    @property
    def algbw_Bps(self) -> float:
        """Asymptotic algorithm bandwidth 1/b (inf for a flat fit)."""
        return 1.0 / self.fit.s_per_byte if self.fit.s_per_byte > 0 else float("inf")


def to_link(op: str, n_ranks: int, fit: AlphaBetaFit) -> LinkFit:
    """Map a fit of `op` on `n_ranks` (>= 2) to per-hop α and bus bandwidth."""
    if n_ranks < 2:
        raise ValueError("need >= 2 ranks")
    factor = busbw_factor(op, n_ranks)
    bw = factor / fit.s_per_byte if fit.s_per_byte > 0 else float("inf")
    return LinkFit(op, n_ranks, fit, fit.latency_s / ring_steps(op, n_ranks), bw)
