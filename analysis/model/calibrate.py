"""Calibration on a run, as pure functions of the matched-collective table (docs/model.md).

Input rows are matched collective instances (`collective_instances(rid)`): op, group_size,
n_ranks, bytes (S as in docs/model.md), transfer_ns (end − last arrival: the real transfer time),
step, size_mismatch. Fits are per (op, ranks), robust, and mapped onto the ring α-β model; the
per-hop α and bus bandwidth of the dominant op make a `Scenario` for what-ifs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from commwall.analysis.model.busbw import busbw_factor, ring_steps
from commwall.analysis.model.collectives import OPS, Link, Topology
from commwall.analysis.model.fit import LinkFit, clean, to_link
from commwall.analysis.model.heldout import cross_validated_ape, method, size_blind
from commwall.analysis.model.heldout import status as heldout_status
from commwall.analysis.model.regimes import RegimeFit, fit_labelled, fit_regimes
from commwall.analysis.model.scenario import Scenario

#: Ops with a bus-bandwidth convention (every collective kind and point-to-point); barrier
#: and unknown ops are not fitted.
FITTED_OPS = OPS


#: Above this many rows the held-out error is measured on a seeded sample of this size.
CV_MAX_ROWS = 2000


def allreduce_equivalent(op: str, n: int) -> tuple[float, float]:
    """(bytes weight, count weight) of one `op` collective on `n` ranks as ring all-reduces:
    its bandwidth term factor·S/B over the all-reduce's 2(n−1)/n·S/B, its latency steps over
    the all-reduce's 2(n−1). Reduce-scatter, all-gather and all-to-all are half an all-reduce
    of the same S (a ring all-reduce is exactly a reduce-scatter plus an all-gather)."""
    if n < 2:
        return 0.0, 0.0
    return (
        busbw_factor(op, n) / busbw_factor("allreduce", n),
        ring_steps(op, n) / ring_steps("allreduce", n),
    )


def usable(df: pd.DataFrame) -> pd.DataFrame:
    """Instances fit for calibration: a fitted op, positive bytes and transfer time, ranks
    agreeing on the size, and seen on >= 2 ranks (a transfer time needs the last arrival of
    at least two ranks; one rank's kernel duration is mostly waiting and never used). Adds
    `n` (the group size, else the ranks seen) and `time_s`."""
    seen = df["n_ranks"].fillna(0)
    n = df["group_size"].fillna(df["n_ranks"]).fillna(0)
    ok = (
        df["op"].isin(FITTED_OPS)
        & (df["bytes"].fillna(0) > 0)
        & (df["transfer_ns"].fillna(0) > 0)
        & ~df["size_mismatch"].fillna(False).astype(bool)
        & (seen >= 2)
        & (n >= 2)
    )
    out = df[ok].assign(n=n[ok].astype(int), time_s=df.loc[ok, "transfer_ns"] * 1e-9)
    return out.astype({"bytes": float})


@dataclass(frozen=True)
class OpFit:
    """The calibration of one (op, n): regimes (each mapped onto the ring model), held-out
    errors of every row, status, the bytes it carried (for ordering), the size-blind
    baseline's held-out errors on the same folds and how the rows were held out."""

    op: str
    n_ranks: int
    regimes: RegimeFit
    links: tuple[LinkFit, ...]
    heldout: np.ndarray
    status: str
    total_bytes: float
    heldout_size_blind: np.ndarray | None = None
    heldout_method: str = ""

    @property
    def calibrated(self) -> bool:
        """Whether the held-out error is small enough to act on."""
        return self.status == "calibrated"

    def link_for(self, size_bytes: float) -> LinkFit:
        """The regime's ring mapping that predicts `size_bytes`."""
        seg = self.regimes.segment_for(size_bytes)
        return self.links[self.regimes.segments.index(seg)]

    def predict(self, size_bytes: np.ndarray | float) -> np.ndarray:
        """Predicted transfer time (s)."""
        return self.regimes.predict(size_bytes)


def median_message(df: pd.DataFrame, op: str, n: int) -> float:
    """The byte-weighted median message size of the usable `op` instances on `n` ranks (half
    of the bytes move in messages up to this size)."""
    u = usable(df)
    b = u.loc[(u["op"] == op) & (u["n"] == n), "bytes"].sort_values()
    return float(b.iloc[int(np.searchsorted(b.cumsum().to_numpy(), b.sum() / 2))])


def regimes_of(s: np.ndarray, t: np.ndarray, labels: np.ndarray | None = None) -> RegimeFit:
    """The regime fit of (s, t): by protocol label when given, else found from the sizes."""
    return fit_regimes(s, t) if labels is None else fit_labelled(s, t, labels)


def regime_predictor(
    s: np.ndarray, t: np.ndarray, labels: np.ndarray | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """`regimes_of` as a predictor (for cross-validation)."""
    return regimes_of(s, t, labels).predict


def fit_op(
    op: str,
    n: int,
    size_bytes: np.ndarray,
    time_s: np.ndarray,
    labels: np.ndarray | None = None,
    steps: np.ndarray | None = None,
) -> OpFit | str:
    """Calibrate one (op, n) on its rows (per protocol when `labels` names one for every row);
    the held-out error keeps each of `steps` (the rows' training steps) on one side of every
    split. A reason ('not calibrated: ...') instead of raising."""
    s, t = clean(size_bytes, time_s)
    if len(s) < 2:
        return f"not calibrated: {len(s)} usable instance(s), need 2"
    raw_s, raw_t = np.asarray(size_bytes, float), np.asarray(time_s, float)
    ok = (raw_s > 0) & (raw_t > 0) & np.isfinite(raw_s) & np.isfinite(raw_t)
    groups = None if steps is None else np.asarray(steps, dtype=object)[ok]
    if labels is not None:
        labels = np.asarray(labels, dtype=object)
        if any(x is None or x != x for x in labels):  # None or NaN: not every row says
            labels = None
        else:
            labels = labels[ok]
    total = float(s.sum())
    try:
        regimes = regimes_of(s, t, labels)
        links = tuple(to_link(op, n, f) for f in regimes.segments)
    except (ValueError, np.linalg.LinAlgError) as e:
        return f"not calibrated: {e}"
    if len(s) > CV_MAX_ROWS:  # the held-out error of a seeded sample of the rows
        pick = np.sort(np.random.default_rng(0).choice(len(s), CV_MAX_ROWS, replace=False))
        s, t = s[pick], t[pick]
        labels = None if labels is None else labels[pick]
        groups = None if groups is None else groups[pick]
    errors = cross_validated_ape(s, t, regime_predictor, labels, groups)
    baseline = cross_validated_ape(s, t, size_blind, groups=groups)
    st = heldout_status(errors, regimes.slope_known, baseline)
    return OpFit(op, n, regimes, links, errors, st, total, baseline, method(len(s), groups))


def _fit_all(df: pd.DataFrame) -> list[OpFit | str]:
    """fit_op of every (op, n) of the usable instances, with the `protocol` column as labels
    when the instances carry one; a reason string is prefixed 'op/n: '."""
    out: list[OpFit | str] = []
    for (op, n), g in usable(df).groupby(["op", "n"], sort=False):
        labels = g["protocol"].to_numpy() if "protocol" in g else None
        steps = g["step"].to_numpy() if "step" in g else None
        f = fit_op(str(op), int(n), g["bytes"].to_numpy(), g["time_s"].to_numpy(), labels, steps)
        out.append(f if isinstance(f, OpFit) else f"{op}/{n}: {f}")
    return out


def calibrate_all(df: pd.DataFrame) -> tuple[list[OpFit], dict[str, str]]:
    """The fits of every (op, n) that could be fitted, most bytes first, and why the others
    could not ('op/n' → reason)."""
    done = _fit_all(df)
    fits = sorted((f for f in done if isinstance(f, OpFit)), key=lambda f: -f.total_bytes)
    return fits, dict(x.split(": ", 1) for x in done if isinstance(x, str))


def fit_ops(df: pd.DataFrame, bootstrap: int = 0) -> list[OpFit]:
    """`calibrate_all`'s fits. `bootstrap` is accepted for compatibility; confidence comes
    from held-out error."""
    return calibrate_all(df)[0]


def achieved_busbw_Bps(df: pd.DataFrame, op: str, n: int) -> float | None:
    """Bytes-weighted achieved bus bandwidth of `op` on `n` ranks: factor·ΣS / Σt."""
    u = usable(df)
    g = u[(u["op"] == op) & (u["n"] == n)]
    if g.empty:
        return None
    return busbw_factor(op, n) * g["bytes"].sum() / g["time_s"].sum()


def per_step(df: pd.DataFrame) -> dict:
    """Medians over steps of the usable instances: bytes_per_step and collectives_per_step
    per op, transfer_s (summed transfer time), allreduce_equivalent_bytes and
    allreduce_equivalent_count (every op weighted by `allreduce_equivalent`); scope 'steps'
    or 'whole trace' (instances outside steps are dropped when there are steps)."""
    u = usable(df)
    scope = "steps" if u["step"].notna().any() else "whole trace"
    if scope == "steps":
        u = u[u["step"].notna()]
    key = u["step"] if scope == "steps" else pd.Series(0, index=u.index)
    eq = [allreduce_equivalent(op, n) for op, n in zip(u["op"], u["n"], strict=True)]
    wb = pd.Series([e[0] for e in eq], index=u.index, dtype=float)
    wc = pd.Series([e[1] for e in eq], index=u.index, dtype=float)
    steps = pd.DataFrame(
        {"key": key, "op": u["op"], "bytes": u["bytes"], "t": u["time_s"], "wb": wb, "w": wc}
    )
    by_op = steps.groupby(["key", "op"]).agg(bytes=("bytes", "sum"), count=("bytes", "size"))
    med = by_op.groupby("op").median()
    totals = steps.assign(eb=steps["bytes"] * steps["wb"]).groupby("key")
    return {
        "scope": scope,
        "n_steps": int(steps["key"].nunique()),
        "bytes_per_step": {op: float(r["bytes"]) for op, r in med.iterrows()},
        "collectives_per_step": {op: float(r["count"]) for op, r in med.iterrows()},
        "transfer_s": float(totals["t"].sum().median()) if len(steps) else 0.0,
        "allreduce_equivalent_bytes": float(totals["eb"].sum().median()) if len(steps) else 0.0,
        "allreduce_equivalent_count": float(totals["w"].sum().median()) if len(steps) else 0.0,
    }


def calibrated_scenario(
    link: LinkFit, steps: dict, compute_s: float | None, eta: float | None
) -> Scenario | None:
    """The run as a Scenario: a flat ring of the fitted per-hop α and bus bandwidth carrying
    the step's all-reduce-equivalent bytes in as many collectives as the run made; compute
    and overlap as measured. None when the step moves no reducible bytes."""
    m, count = steps["allreduce_equivalent_bytes"], steps["allreduce_equivalent_count"]
    if m <= 0 or count <= 0:
        return None
    n_coll = max(1, round(count))
    return Scenario(
        gradient_bytes=m,
        topology=Topology(link.n_ranks, Link(link.bandwidth_Bps, link.alpha_s)),
        compute_s=compute_s,
        eta=0.0 if eta is None or math.isnan(eta) else min(max(eta, 0.0), 1.0),
        bucket_bytes=m / n_coll if n_coll > 1 else None,
        algorithm="ring",
    )


def predicted_transfer(fits: list[OpFit], df: pd.DataFrame) -> dict:
    """Per-step transfer time (s) the calibration predicts for every usable instance: by its
    own (op, n) fit, else with the per-hop α and bus bandwidth of the main fit in the op's own
    ring cost `steps(op, n)·α + factor(op, n)·S/B`. Medians over steps of the per-step sums:
    `transfer_s` and `transfer_s_by_op`."""
    u = usable(df)
    if u["step"].notna().any():
        u = u[u["step"].notna()]
    if u.empty or not fits:
        return {"transfer_s": 0.0, "transfer_s_by_op": {}}
    own = {(f.op, f.n_ranks): f for f in fits}
    main = fits[0]
    pred = np.empty(len(u))
    for (op, n), idx in u.groupby(["op", "n"]).indices.items():
        size = u["bytes"].to_numpy()[idx]
        f = own.get((op, n))
        if f is not None:
            pred[idx] = f.predict(size)
            continue
        for k, x in zip(idx, size, strict=True):
            link = main.link_for(x)
            cost = ring_steps(op, n) * link.alpha_s
            pred[k] = cost + busbw_factor(op, n) * x / link.bandwidth_Bps
    key = u["step"].fillna(0)
    t = pd.DataFrame({"key": key.to_numpy(), "op": u["op"].to_numpy(), "t": pred})
    by_op = t.groupby(["key", "op"])["t"].sum().groupby("op").median()
    return {
        "transfer_s": float(t.groupby("key")["t"].sum().median()),
        "transfer_s_by_op": {str(op): float(v) for op, v in by_op.items()},
    }
