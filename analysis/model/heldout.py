"""Held-out error of a fit, and the rule that calls a fit "calibrated" (docs/model.md).

In-sample R² says how well a line passes through the points it was fitted on; what a user
acts on is how well it predicts a collective it has not seen. Every fit is therefore scored
by cross-validation: leave-one-out up to `LOO_MAX_ROWS` rows, else `K_FOLDS`-fold (seeded),
each fold re-running the whole fit (regime selection included) on the other rows. With groups
(the training step of each row) a step is held out whole, so that rows sharing one step's
conditions (the same CPU contention, the same congested fabric) never sit on both sides of a
split. The score is the absolute percentage error |predicted − measured| / measured of each
held-out row. The size-blind baseline (the median time of the training rows) is scored on the
same folds.

The line: a fit is "calibrated" when its held-out median error is at most
`CALIBRATED_MEDIAN_APE` (15 %), no larger than the size-blind baseline's on the same folds,
and it rests on at least `MIN_ROWS` rows. Why 15 %: the what-ifs
worth asking (2× link bandwidth, 2× nodes, ½ the bytes) move transfer times by 30–100 %; a
model whose typical error is under 15 % still gets the direction and the rough size of such a
change right, while at 30 % and beyond the error is as large as the effect. Run-to-run noise
of a quiet NCCL collective is a few percent, so a sound fit on a quiet fabric passes easily.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

CALIBRATED_MEDIAN_APE = 0.15
MIN_ROWS = 4
LOO_MAX_ROWS = 60
K_FOLDS = 10

Predictor = Callable[[np.ndarray], np.ndarray]
Fitter = Callable[..., Predictor]


#: Fewer groups than this: rows are held out one by one instead (one step cannot be held out
#: against itself, two leave half of the data).
MIN_GROUPS = 3


def _group_ids(n: int, groups: np.ndarray | None) -> np.ndarray | None:
    """One integer per row naming its group (rows without a group, None or NaN, are groups of
    their own); None when there are no groups or fewer than MIN_GROUPS of them."""
    if groups is None:
        return None
    g = pd.Series(np.asarray(groups, dtype=object), dtype=object)
    missing = g.isna().to_numpy()
    ids = pd.factorize(g)[0]
    ids[missing] = ids.max() + 1 + np.arange(missing.sum())
    return ids if len(np.unique(ids[~missing])) >= MIN_GROUPS else None


def folds(n: int, seed: int = 0, groups: np.ndarray | None = None) -> list[np.ndarray]:
    """Index arrays of the held-out rows: one per row up to LOO_MAX_ROWS, else K_FOLDS
    shuffled folds. With `groups` (at least MIN_GROUPS of them) the same on whole groups:
    a group's rows are always held out together."""
    ids = _group_ids(n, groups)
    if ids is None:
        ids = np.arange(n)
    members = pd.Series(np.arange(n)).groupby(ids).indices
    keys = list(members)
    if len(keys) <= LOO_MAX_ROWS:
        return [np.sort(members[k]) for k in keys]
    perm = np.random.default_rng(seed).permutation(len(keys))
    return [
        np.sort(np.concatenate([members[keys[i]] for i in part]))
        for part in np.array_split(perm, K_FOLDS)
    ]


def method(n: int, groups: np.ndarray | None = None) -> str:
    """What `folds(n, groups=groups)` does, in words (the report's `heldout_method`)."""
    ids = _group_ids(n, groups)
    units = n if ids is None else len(np.unique(ids))
    if ids is None:
        return "leave-one-out" if units <= LOO_MAX_ROWS else "10-fold"
    return "leave-one-step-out" if units <= LOO_MAX_ROWS else "10-fold by step"


def size_blind(s: np.ndarray, t: np.ndarray) -> Predictor:
    """The baseline: the median time of the training rows, whatever the size."""
    level = float(np.median(t))
    return lambda x: np.full(len(np.atleast_1d(x)), level)


def ape(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Absolute percentage errors as fractions."""
    return np.abs(np.asarray(predicted, float) - measured) / measured


def cross_validated_ape(
    s: np.ndarray,
    t: np.ndarray,
    fitter: Fitter,
    labels: np.ndarray | None = None,
    groups: np.ndarray | None = None,
) -> np.ndarray:
    """Held-out absolute percentage error of every row (NaN where the training rows could not
    be fitted), on `folds(len(s), groups=groups)`. With `labels` (a protocol per row) the
    fitter is called as fitter(s, t, labels) on the training rows."""
    s, t = np.asarray(s, float), np.asarray(t, float)
    out = np.full(len(s), np.nan)
    for test in folds(len(s), groups=groups):
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


def status(errors: np.ndarray, slope_known: bool = True, baseline: np.ndarray | None = None) -> str:
    """'calibrated', 'fit too uncertain: held-out median error X %' (with ', no better than
    the size-blind level (Y %)' when `baseline`, the size-blind errors on the same folds, has
    the lower median) or 'not calibrated: ...'."""
    s = summary(errors)
    if s["n"] < MIN_ROWS:
        return f"not calibrated: {s['n']} held-out predictions, need {MIN_ROWS}"
    if not slope_known:
        return "not calibrated: one message size, so bandwidth (β) is unknown"
    uncertain = f"fit too uncertain: held-out median error {100 * s['median']:.1f} %"
    if s["median"] > CALIBRATED_MEDIAN_APE:
        return uncertain
    level = None if baseline is None else summary(baseline)["median"]
    if level is not None and level < s["median"]:
        return f"{uncertain}, no better than the size-blind level ({100 * level:.1f} %)"
    return "calibrated"


def _most_within(log_t: np.ndarray, width: float) -> int:
    """The most values of the sorted `log_t` that fit in one window of `width`."""
    hi = np.searchsorted(log_t, log_t + width, side="right")
    return int((hi - np.arange(len(log_t))).max())


def size_only_floor(s: np.ndarray, t: np.ndarray, tol: float = 1e-4) -> float | None:
    """The lowest median absolute percentage error that any prediction made from the message
    size alone (one predicted time per distinct size) can reach on rows (s, t), even one
    fitted on these very rows: a floor under every size-based model, held-out or not, up to
    the fold-to-fold differences of a cross-validated one. None without rows.

    A prediction c is within x of t when t lies in [c/(1+x), c/(1−x)], a window of width
    log((1+x)/(1−x)) in log t; the median error is at most x when, summed over the sizes,
    the best-placed window of each size holds at least ⌈n/2⌉ rows (the lower middle row of the
    sorted errors, a lower bound of numpy's median). x is found by bisection (to `tol`);
    a prediction near 0 makes every error just under 1, so the floor is at most 1."""
    s, t = np.asarray(s, float), np.asarray(t, float)
    if not len(s):
        return None
    need = (len(s) + 1) // 2
    by_size = [np.sort(np.log(t[s == v])) for v in np.unique(s)]

    def reachable(x: float) -> bool:
        width = np.log((1 + x) / (1 - x))
        return sum(_most_within(lt, width) for lt in by_size) >= need

    lo, hi = 0.0, 1.0
    if reachable(0.0):
        return 0.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reachable(mid) else (mid, hi)
    return hi
