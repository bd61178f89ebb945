"""A later run's change against the baseline in words: which parts of the step made the change
of the mean rank-step, and which ranks' straggler verdicts changed."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from commwall.analysis.report.diagnosis_words import HUNG_LABEL
from commwall.analysis.steps.summary import PART_LABELS

#: Words for the parts of a step in a comparison's sentence.
PART_WORDS = {**PART_LABELS, "exposed_comm_ms": "exposed communication"}


def change_sentence(tables: Mapping[str, pd.DataFrame], run: str) -> str | None:
    """Where `run`'s step changed against the baseline, in words: the mean rank-step's change
    and the parts that made it, largest first (those of at least a tenth of it and 2 % of the
    baseline's step, at least the largest one); for a run that hung, that its figures say
    nothing of it; None when the decomposition of either is not available."""
    df = tables["step_change"]
    df = df[df["run"] == run].set_index("part")
    causes = tables["diagnosis"].set_index("run")["cause"]
    if run in causes.index and str(causes[run]) == HUNG_LABEL:
        return (
            f"{run} hung: "
            + (
                "its figures hold the wait for the hung collective until the timeout, so its "
                "parts of the step say nothing about what changed"
                if "step_ms" in df.index
                else "no step time was measured from its files"
            )
            + " (its diagnosis names the rank that did not arrive)."
        )
    if "step_ms" not in df.index:
        return None
    total = float(df.loc["step_ms", "delta_ms"])
    floor = max(0.1 * abs(total), 0.02 * abs(float(df.loc["step_ms", "baseline_ms"])))
    parts = df.drop(index="step_ms").sort_values("delta_ms", key=abs, ascending=False)
    big = [p for p, r in parts.iterrows() if abs(r["delta_ms"]) >= floor] or list(parts.index[:1])
    said = ", ".join(
        f"{PART_WORDS.get(str(p), str(p))} {parts.loc[p, 'delta_ms']:+.3f} ms" for p in big
    )
    return (
        f"{run}: the mean rank-step changed by {total:+.3f} ms "
        f"({df.loc['step_ms', 'baseline_ms']:.3f} → {df.loc['step_ms', 'run_ms']:.3f} ms): "
        f"{said}.{_straggler_change(tables, run)}"
    )


#: How a flagged straggler's kind reads in a comparison's sentence.
KIND_WORDS = {
    "compute": "a compute straggler",
    "other": "late without more operator work (host, input or launch)",
    "": "not flagged",
}


def _straggler_change(tables: Mapping[str, pd.DataFrame], run: str) -> str:
    """The ranks whose straggler verdict differs between the baseline and `run` (flagged or
    not, compute or other), in a sentence; empty when none does. The parts of the step cannot
    show this: a rank's sleep inside an operator counts as compute there."""
    t = tables["stragglers"]
    base = next((c for c in t.columns if c.startswith("straggler ")), None)
    now = f"straggler {run}"
    if base is None or now not in t.columns or base == now:
        return ""
    changes = []
    for rec in t.to_dict("records"):
        a, b = rec[base], rec[now]
        if not isinstance(a, str) or not isinstance(b, str) or a == b:
            continue  # a rank one of the runs does not have, or no change
        changes.append(f"rank {rec['rank']} {KIND_WORDS.get(a, a)} → {KIND_WORDS.get(b, b)}")
    return f" Stragglers: {'; '.join(changes)}." if changes else ""
