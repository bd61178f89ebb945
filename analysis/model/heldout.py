"""Held-out error of a fit, and the rule that calls a fit "calibrated" (docs/model.md).

In-sample R² says how well a line passes through the points it was fitted on; what a user
acts on is how well it predicts a collective it has not seen. Every fit is therefore scored
by cross-validation: leave-one-out up to `LOO_MAX_ROWS` rows, else `K_FOLDS`-fold (seeded),
each fold re-running the whole fit (regime selection included) on the other rows. The score
is the absolute percentage error |predicted − measured| / measured of each held-out row.

The line: a fit is "calibrated" when its held-out median error is at most
`CALIBRATED_MEDIAN_APE` (15 %) and it rests on at least `MIN_ROWS` rows. Why 15 %: the what-ifs
worth asking (2× link bandwidth, 2× nodes, ½ the bytes) move transfer times by 30–100 %; a
model whose typical error is under 15 % still gets the direction and the rough size of such a
change right, while at 30 % and beyond the error is as large as the effect. Run-to-run noise
of a quiet NCCL collective is a few percent, so a sound fit on a quiet fabric passes easily.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

CALIBRATED_MEDIAN_APE = 0.15
MIN_ROWS = 4
LOO_MAX_ROWS = 60
K_FOLDS = 10

Predictor = Callable[[np.ndarray], np.ndarray]
Fitter = Callable[..., Predictor]


def folds(n: int, seed: int = 0) -> list[np.ndarray]:
    """Index arrays of the held-out rows: one per row up to LOO_MAX_ROWS, else K_FOLDS
    shuffled folds."""
    if n <= LOO_MAX_ROWS:
        return [np.array([i]) for i in range(n)]
    perm = np.random.default_rng(seed).permutation(n)
    return list(np.array_split(perm, K_FOLDS))


def ape(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Absolute percentage errors as fractions."""
    return np.abs(np.asarray(predicted, float) - measured) / measured


def cross_validated_ape(
    s: np.ndarray, t: np.ndarray, fitter: Fitter, labels: np.ndarray | None = None
) -> np.ndarray:
    """Held-out absolute percentage error of every row (NaN where the training rows could not
    be fitted). With `labels` (a protocol per row) the fitter is called as
    fitter(s, t, labels) on the training rows."""
    s, t = np.asarray(s, float), np.asarray(t, float)
    out = np.full(len(s), np.nan)
    for test in folds(len(s)):
        train = np.setdiff1d(np.arange(len(s)), test)
        extra = () if labels is None else (np.asarray(labels, dtype=object)[train],)
        try:
            out[test] = ape(fitter(s[train], t[train], *extra)(s[test]), t[test])
        except ValueError:
            continue
    return out


def split_ape(s: np.ndarray, t: np.ndarray, fitter: Fitter, train_share: float = 0.5) -> np.ndarray:
    """Chronological split: fit the first `train_share` of the rows (in the given order, which
    should be time order), score the rest."""
    s, t = np.asarray(s, float), np.asarray(t, float)
    k = int(round(len(s) * train_share))
    if k < 1 or k >= len(s):
        return np.array([])
    try:
        return ape(fitter(s[:k], t[:k])(s[k:]), t[k:])
    except ValueError:
        return np.full(len(s) - k, np.nan)


def summary(errors: np.ndarray) -> dict:
    """median and p90 of the finite errors (fractions), and how many were scored."""
    e = errors[np.isfinite(errors)]
    if not len(e):
        return {"median": None, "p90": None, "n": 0}
    return {"median": float(np.median(e)), "p90": float(np.percentile(e, 90)), "n": len(e)}


def status(errors: np.ndarray, slope_known: bool = True) -> str:
    """'calibrated', 'fit too uncertain: held-out median error X %' or 'not calibrated: ...'."""
    s = summary(errors)
    if s["n"] < MIN_ROWS:
        return f"not calibrated: {s['n']} held-out predictions, need {MIN_ROWS}"
    if not slope_known:
        return "not calibrated: one message size, so bandwidth (β) is unknown"
    if s["median"] > CALIBRATED_MEDIAN_APE:
        return f"fit too uncertain: held-out median error {100 * s['median']:.1f} %"
    return "calibrated"
