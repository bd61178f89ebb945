"""Ranks × steps: heatmaps of η, τ_comm and wait, their distributions, outliers highlighted."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.outliers import flag_outliers
from dashboard import charts, data, session
from dashboard.ui import UPLOAD_TRACES, md, missing

#: Metrics searched for outliers: steps-table column → title.
METRICS = {
    "eta": "Overlap η",
    "tau_comm_ms": "τ_comm (ms)",
    "wait_ms": "Wait for peers (ms)",
    "step_ms": "Step time (ms)",
    "exposed_comm_ms": "Exposed communication (ms)",
}
#: Those drawn as ranks × steps heatmaps and distributions.
HEATMAPS = ["eta", "tau_comm_ms", "wait_ms"]

v = session.current_run()
st.header(f"Ranks × steps — {md(v.run)}")
steps = pd.DataFrame(v.report.get("steps") or [])
if steps.empty:
    missing("Per-step metrics", "The traces have no `ProfilerStep#N` annotations. " + UPLOAD_TRACES)
    st.stop()

waits = data.macro_rows(v.path, v.run, v.fp, "rank_step_wait")
if waits is not None and not waits.empty:
    steps = steps.merge(waits[["rank", "step", "wait_ms"]], on=["rank", "step"], how="left")

shown = [m for m in METRICS if m in steps.columns]
for m in shown:
    steps[f"{m}_outlier"] = flag_outliers(steps[m].tolist())

maps = [m for m in HEATMAPS if m in steps.columns]
st.altair_chart(
    charts.side_by_side(*(charts.heatmap(steps, m, METRICS[m], f"{m}_outlier") for m in maps)),
    key="heatmaps",
)
st.altair_chart(
    charts.side_by_side(*(charts.histogram(steps, m, METRICS[m]) for m in maps)),
    key="distributions",
)
if "wait_ms" not in steps.columns:
    missing(
        "Wait for peers per rank and step",
        "It needs collectives matched across ranks (the straggler analysis). " + UPLOAD_TRACES,
    )

st.subheader("Outliers")
flags = [f"{m}_outlier" for m in shown]
out = steps[steps[flags].any(axis=1)]
if out.empty:
    st.caption("No rank-step is an outlier (robust z-score above 3.5) on these metrics.")
else:
    st.dataframe(out[["rank", "step", *shown, *flags]], hide_index=True, key="outliers")

st.subheader("Per rank (whole trace)")
st.dataframe(pd.DataFrame(v.report.get("ranks") or []), hide_index=True, key="ranks_table")
