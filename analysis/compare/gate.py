"""The CI gate's verdicts on a diff: the later runs whose step time regressed beyond noise, and
those whose step time could not be judged at all."""

from __future__ import annotations

import pandas as pd

from commwall.analysis.compare import noise


def unjudged(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The later runs whose step time could not be judged against the baseline (the
    judgement is "not available: ..."; no steps in one of them, as in a job that hung), each
    with the reason: a CI gate that cannot judge must not pass in silence."""
    return [
        f"{rec['run']}: {rec['judgement']}"
        for rec in tables["step_time"].to_dict("records")[1:]
        if str(rec.get("judgement") or "").startswith("not available")
    ]


def regressions(tables: dict[str, pd.DataFrame], pct: float) -> list[str]:
    """The later runs whose step time regressed by more than `pct` percent beyond noise
    (analysis/compare/noise.py `regressed`), each with the figures in words."""
    out = []
    for rec in tables["step_time"].to_dict("records")[1:]:
        row = {k: None if isinstance(v, float) and pd.isna(v) else v for k, v in rec.items()}
        j = {
            "judgement": row["judgement"],
            "change": None if row["change_pct"] is None else row["change_pct"] / 100,
            "ci_low": None if row["ci_low_pct"] is None else row["ci_low_pct"] / 100,
        }
        if noise.regressed(j, pct):
            ci = (
                f", 95% CI {row['ci_low_pct']:+.1f}% to {row['ci_high_pct']:+.1f}%"
                if row["ci_low_pct"] is not None
                else " (too few steps to estimate noise)"
            )
            out.append(f"{row['run']}: median step {row['change_pct']:+.1f}%{ci}")
    return out
