"""Where the step goes, run beside run: the parts of a step per rank (the diagnosis's
decomposition, else parts derived from the step metrics) and, per later run, each part's
change against the baseline; the parts' changes add up to the change of the mean rank-step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from commwall.analysis.compare.facts import RunFacts, run_names, with_deltas

#: Components of a step, in the order they add up to it. The diagnosis's decomposition
#: (report key `decomposition`) when present; otherwise DERIVED_PARTS from the step metrics.
PARTS = [
    "compute_only_ms",
    "compute_overlapped_ms",
    "exposed_transfer_ms",
    "exposed_wait_ms",
    "memory_only_ms",
    "idle_ms",
]


DERIVED_PARTS = ["compute_only_ms", "compute_overlapped_ms", "exposed_comm_ms", "idle_ms"]


def decomposition_records(report: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    """(per rank and step records, component keys) of a report: the diagnosis's
    `decomposition` when the report has it, else components derived from `steps` (compute
    alone, compute under communication, exposed communication, idle)."""
    dec = report.get("decomposition")
    if isinstance(dec, dict):
        dec = dec.get("steps") or dec.get("ranks")
    if isinstance(dec, list) and dec and isinstance(dec[0], dict) and "rank" in dec[0]:
        parts = [p for p in PARTS if p in dec[0]]
        if parts:
            return dec, parts
    out = []
    for s in report.get("steps") or []:
        comp, both = s.get("tau_comp_ms") or 0.0, s.get("overlap_ms") or 0.0
        out.append(
            {
                "rank": s["rank"],
                "step": s["step"],
                "step_ms": s.get("step_ms"),
                "compute_only_ms": comp - both,
                "compute_overlapped_ms": both,
                "exposed_comm_ms": s.get("exposed_comm_ms"),
                "idle_ms": s.get("idle_ms"),
            }
        )
    return out, DERIVED_PARTS


def decomposition(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Per rank and component: the mean per step (ms) in every run, side by side."""
    names = run_names(runs)
    frames = []
    for r in runs:
        recs, parts = decomposition_records(r.report)
        if not recs:
            continue
        df = pd.DataFrame(recs)
        cols = [p for p in parts if p in df.columns] + ["step_ms"]
        means = df.groupby("rank")[cols].mean().reset_index()
        long = means.melt(id_vars="rank", var_name="component", value_name=r.name)
        frames.append(long.set_index(["rank", "component"]))
    if not frames:
        return pd.DataFrame(columns=["rank", "component", *names])
    wide = pd.concat(frames, axis=1).reset_index()
    for n in names:
        if n not in wide.columns:
            wide[n] = None
    order = {c: i for i, c in enumerate(dict.fromkeys([*PARTS, *DERIVED_PARTS, "step_ms"]))}
    wide = wide.sort_values(["rank", "component"], key=lambda s: s.map(order).fillna(s))
    return with_deltas(wide.reset_index(drop=True), names)


def step_change(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Where the step's change went: per later run and part of the step, the mean over the
    run's ranks of the part's mean per step (ms) in the baseline and in the run, and the
    change; the parts' changes add up to the change of the mean rank-step (`step_ms` row).
    Each run is averaged over its own ranks (a run may have more or fewer)."""
    dec = decomposition(runs)
    names = run_names(runs)
    rows = []
    if len(dec):
        means = dec.groupby("component", sort=False)[names].mean(numeric_only=False)
        for n in names[1:]:
            for part, r in means.iterrows():
                base, now = r[names[0]], r[n]
                if pd.isna(base) or pd.isna(now):
                    continue
                rows.append(
                    {
                        "run": n,
                        "part": part,
                        "baseline_ms": float(base),
                        "run_ms": float(now),
                        "delta_ms": float(now - base),
                    }  # fmt: skip
                )
    return pd.DataFrame(rows, columns=["run", "part", "baseline_ms", "run_ms", "delta_ms"])
