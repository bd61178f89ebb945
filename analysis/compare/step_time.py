"""The step time of runs side by side: each run's distribution of step times and, for every
later run, the change of the median against the baseline judged against run-to-run noise
(analysis/compare/noise.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from commwall.analysis.compare import noise
from commwall.analysis.compare.facts import RunFacts
from commwall.analysis.units import NS_PER_MS


def step_time(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """One row per run: the distribution of its step times (ms, slowest rank per step) and,
    for later runs, the change of the median against the baseline with the noise test."""
    base = runs[0].steps["step_ns"].to_numpy() / NS_PER_MS if len(runs[0].steps) else []
    rows = []
    for i, r in enumerate(runs):
        x = r.steps["step_ns"].to_numpy() / NS_PER_MS if len(r.steps) else np.array([])
        row: dict[str, Any] = {
            "run": r.name,
            "n_steps": len(x),
            "median_ms": float(np.median(x)) if len(x) else None,
            "p10_ms": float(np.percentile(x, 10)) if len(x) else None,
            "p90_ms": float(np.percentile(x, 90)) if len(x) else None,
            "cv": float(np.std(x) / np.mean(x)) if len(x) > 1 and np.mean(x) else None,
        }
        if i == 0:
            row |= {"change_pct": None, "ci_low_pct": None, "ci_high_pct": None}
            row |= {"p_value": None, "judgement": "baseline", "test": noise.TEST_NAME}
            row |= {"paired": None}
        else:
            pairs = noise.pairs(runs[0].steps["step"], base, r.steps["step"], x) if len(x) else None
            j = noise.judge(base, x, pairs)
            pct = {
                k: None if j.get(k) is None else 100 * j[k] for k in ("change", "ci_low", "ci_high")
            }
            row |= {
                "change_pct": pct["change"],
                "ci_low_pct": pct["ci_low"],
                "ci_high_pct": pct["ci_high"],
                "p_value": j.get("p_value"),
                "judgement": j["judgement"],
                "test": j["test"],
                "paired": j.get("paired", False),
            }
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in ("median_ms", "p10_ms", "p90_ms", "cv", "change_pct", "ci_low_pct", "ci_high_pct",
              "p_value"):  # fmt: skip
        df[c] = pd.to_numeric(df[c])
    return df


def step_samples(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Long table of every run's step times (run, step, step_ms): the distributions."""
    frames = [
        pd.DataFrame(
            {"run": r.name, "step": r.steps["step"], "step_ms": r.steps["step_ns"] / NS_PER_MS}
        )
        for r in runs
        if len(r.steps)
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
