"""Compare runs: a baseline and one or more runs against it (analysis.compare.diff), with the step
time judged against run-to-run noise."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from commwall.analysis.compare.diff import change_sentence
from commwall.analysis.compare.pair import METRICS, job_differences
from commwall.analysis.report.diagnosis_words import short_verdict
from commwall.analysis.report.postmortem import decomposition_table
from commwall.dashboard import data_docs, doc_charts, session
from commwall.dashboard.ui import fmt_ms, fmt_pct, md, plot, prose, table

#: Tiles: summary key → (label, kind): ms and ratios with three decimals, shares as %.
TILES = {
    "step_ms": ("step time", "ms"),
    "tau_comm_ms": ("τ_comm", "ms"),
    "exposed_comm_ms": ("exposed communication", "ms"),
    "eta": ("η (overlap efficiency)", "share"),
    "exposed_comm_share": ("exposed share of step", "share"),
}
#: Metrics where a larger value is better (green when it grows).
HIGHER_BETTER = {"eta"}


def tile_value(v: float | None, kind: str) -> str:
    """A tile's value: ms to three significant figures, shares as a percentage, n/a when missing."""
    if v is None:
        return "n/a"
    return fmt_pct(v) if kind == "share" else fmt_ms(v)


def tile_delta(v: float | None, base: float | None, kind: str) -> str | None:
    """The change against the baseline as shown (ms, or percentage points); None — no arrow —
    when either is missing or the change does not show at the precision displayed."""
    if v is None or base is None:
        return None
    d = (v - base) * (100 if kind == "share" else 1)
    text = f"{d:+.1f} pp" if kind == "share" else f"{'+' if d >= 0 else '-'}{fmt_ms(abs(d))}"
    return None if float(text.split()[0]) == 0 else text


st.header("Compare runs")
runs_table = session.runs_or_stop()
names = runs_table["run"].tolist()
if len(names) < 2:
    st.info("Store a second run (for example after a fix) to compare it with the first.")
    st.stop()

left, right = st.columns([1, 2])
baseline = left.selectbox("Baseline", names, index=0, key="compare_before")
others = [n for n in names if n != baseline]
# proposed: the latest run of as many ranks as the baseline (a comparable job), else the latest
ranks = dict(zip(runs_table["run"], runs_table.get("ranks", [None] * len(names)), strict=True))
alike = [n for n in others if ranks.get(n) == ranks.get(baseline)]
chosen = right.multiselect(
    "Compared with the baseline", others, default=(alike or others)[-1:], key="compare_after"
)
if not chosen:
    st.info("Choose one or more runs to compare with the baseline.")
    st.stop()
runs = [baseline, *chosen]
views = {r: session.view(runs_table, r) for r in runs}
reports = {r: v.report for r, v in views.items()}
for run in chosen:
    if differs := job_differences(reports[baseline], reports[run]):
        st.warning(
            f"{md(run)} is not the same job as {md(baseline)} ({md('; '.join(differs))}): the "
            "comparison says how the two runs differ, not what a change did.",
            icon=":material/compare_arrows:",
        )

cols = st.columns(len(runs))
base_summary = reports[baseline].get("summary") or {}
for col, run in zip(cols, runs, strict=True):
    s = reports[run].get("summary") or {}
    col.markdown(f"**{md(run)}**" + (" (baseline)" if run == baseline else ""))
    for key, (label, kind) in TILES.items():
        delta = None if run == baseline else tile_delta(s.get(key), base_summary.get(key), kind)
        col.metric(
            label,
            tile_value(s.get(key), kind),
            delta,
            delta_color="normal" if key in HIGHER_BETTER else "inverse",
        )
    col.caption(md(short_verdict(reports[run].get("diagnosis") or {})))

d = data_docs.diff(views[baseline].path, tuple(runs), tuple(views[r].fp for r in runs))
st.subheader("Step time against run-to-run noise")
for row in d["step_time"].to_dict("records")[1:]:
    if row["ci_low_pct"] is None or pd.isna(row["ci_low_pct"]):
        st.markdown(f"**{md(row['run'])}**: {md(row['judgement'])}.")
        continue
    st.markdown(
        f"**{md(row['run'])}**: median {fmt_ms(row['median_ms'])}, {row['change_pct']:+.1f}% "
        f"(95% CI {row['ci_low_pct']:+.1f}% to {row['ci_high_pct']:+.1f}%, "
        f"p = {row['p_value']:.3g}) — **{md(row['judgement'])}**."
    )
said = [x for r in runs[1:] if (x := change_sentence(d, r))]
if said:
    st.markdown("**Where the change went:** " + " ".join(md(x) for x in said))
st.caption(
    f"Test: {d['step_time']['test'].iloc[0]}. A change is called slower or faster only when "
    "both say so (p < 0.05 and the interval excludes 0); with fewer than 3 steps per run "
    "noise cannot be estimated."
)
plot(
    d["step_samples"],
    doc_charts.step_distribution,
    ("Step time per run",),
    "No steps in these runs.",
    key="compare_steps",
)
table(d["step_time"].drop(columns=["test"]), key="compare_step_table")

st.subheader("Headline metrics")
shown = d["summary"].drop(columns=["metric"])
share = (d["summary"]["metric"] == "exposed_comm_share").to_numpy()
for col in [*runs, *(f"Δ {r}" for r in runs)]:  # the share in %: one type per column
    if col in shown.columns:
        shown.loc[share, col] = shown.loc[share, col] * 100
shown.loc[share, "label"] = shown.loc[share, "label"] + " (%)"
table(shown, key="compare_table")
st.caption(f"Means over ranks and steps (the run summary): {', '.join(METRICS.values())}.")

st.subheader("Where the step time goes, per rank")
parts = []
for run in runs:
    try:
        parts.append(decomposition_table(reports[run]).assign(run=run))
    except ValueError:
        pass
plot(
    pd.concat(parts, ignore_index=True) if parts else None,
    doc_charts.decomposition,
    ("Mean per step", "run"),
    "No steps in these runs.",
    key="compare_decomposition",
)
table(d["decomposition"], key="compare_decomposition_table")

#: Tables of a paragraph per run (the column named), shown as text: a table cell cut it to a line.
PROSE = {"straggler_verdicts": "verdict", "diagnosis": "paragraph"}

for key, head in [
    ("collectives", "Collectives by op and message size (bytes)"),
    ("stragglers", "Stragglers per rank"),
    ("straggler_verdicts", "Straggler verdicts"),
    ("nccl", "NCCL"),
    ("model", "Model fit and prediction"),
    ("diagnosis", "Diagnosis"),
]:
    st.subheader(head)
    if key in PROSE:
        prose(d[key], PROSE[key])
    else:
        table(d[key], key=f"compare_{key}")
