"""Calibration on a run, as pure functions of the matched-collective table (MODEL.md §6).

Input rows are matched collective instances (`collective_instances(rid)`): op, group_size,
n_ranks, bytes (MODEL.md §4 S), transfer_ns (end − last arrival: the real transfer time),
step, size_mismatch. Fits are per (op, ranks), robust, and mapped onto the ring α-β model; the
per-hop α and bus bandwidth of the dominant op make a `Scenario` for what-ifs.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.model.busbw import busbw_factor
from analysis.model.collectives import Link, Topology
from analysis.model.fit import LinkFit, fit_alpha_beta, to_link
from analysis.model.scenario import Scenario

#: Ops with a bus-bandwidth convention; the others (send/recv, barrier) are not fitted.
FITTED_OPS = ("allreduce", "reduce_scatter", "allgather", "alltoall", "broadcast", "reduce")
#: Weight of each op in ring-equivalent all-reduce bytes and counts: a ring all-reduce of m
#: costs exactly a reduce-scatter plus an all-gather of m.
ALLREDUCE_EQUIVALENT = {"allreduce": 1.0, "reduce_scatter": 0.5, "allgather": 0.5}
BOOTSTRAP_MAX_ROWS = 5000


def usable(df: pd.DataFrame) -> pd.DataFrame:
    """Instances fit for calibration: a fitted op, positive bytes and transfer time, ranks
    agreeing on the size, >= 2 ranks; adds `n` (group size, else ranks seen) and `time_s`."""
    n = df["group_size"].fillna(df["n_ranks"])
    ok = (
        df["op"].isin(FITTED_OPS)
        & (df["bytes"].fillna(0) > 0)
        & (df["transfer_ns"].fillna(0) > 0)
        & ~df["size_mismatch"].fillna(False).astype(bool)
        & (n >= 2)
    )
    out = df[ok].assign(n=n[ok].astype(int), time_s=df.loc[ok, "transfer_ns"] * 1e-9)
    return out.astype({"bytes": float})


def fit_ops(df: pd.DataFrame, bootstrap: int = 100) -> list[LinkFit]:
    """One fit per (op, n) of the usable instances with >= 2 rows, most bytes first; bootstrap
    CIs only for groups of at most BOOTSTRAP_MAX_ROWS rows (larger ones have tight CIs and
    would make the report slow)."""
    u = usable(df)
    fits = []
    for (op, n), g in u.groupby(["op", "n"], sort=False):
        if len(g) >= 2:
            k = bootstrap if len(g) <= BOOTSTRAP_MAX_ROWS else 0
            fit = fit_alpha_beta(g["bytes"].to_numpy(), g["time_s"].to_numpy(), k)
            fits.append((g["bytes"].sum(), to_link(op, int(n), fit)))
    return [f for _, f in sorted(fits, key=lambda x: -x[0])]


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
    allreduce_equivalent_count (see ALLREDUCE_EQUIVALENT); scope 'steps' or 'whole trace'
    (instances outside steps are dropped when there are steps)."""
    u = usable(df)
    scope = "steps" if u["step"].notna().any() else "whole trace"
    if scope == "steps":
        u = u[u["step"].notna()]
    key = u["step"] if scope == "steps" else pd.Series(0, index=u.index)
    w = u["op"].map(ALLREDUCE_EQUIVALENT).fillna(0.0)
    steps = pd.DataFrame({"key": key, "op": u["op"], "bytes": u["bytes"], "t": u["time_s"], "w": w})
    by_op = steps.groupby(["key", "op"]).agg(bytes=("bytes", "sum"), count=("bytes", "size"))
    med = by_op.groupby("op").median()
    totals = steps.assign(eb=steps["bytes"] * steps["w"]).groupby("key")
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
        topology=Topology(link.n_ranks, Link(link.bandwidth_Bps, link.alpha_s or 0.0)),
        compute_s=compute_s,
        eta=0.0 if eta is None or math.isnan(eta) else min(max(eta, 0.0), 1.0),
        bucket_bytes=m / n_coll if n_coll > 1 else None,
        algorithm="ring",
    )
