"""Ranks × steps: heatmaps of η, τ_comm and wait, their distributions, outliers highlighted."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from commwall.analysis.collectives.outliers import Z_LIMIT, flag_outliers
from commwall.dashboard import charts, data, session
from commwall.dashboard.ui import md, missing, plot, steps_hint, table, traces_hint

#: Metrics searched for outliers: steps-table column → title.
METRICS = {
    "eta": "Overlap η (fraction)",
    "tau_comm_ms": "τ_comm (ms)",
    "wait_ms": "Wait for peers (ms)",
    "step_ms": "Step time (ms)",
    "exposed_comm_ms": "Exposed communication (ms)",
}
#: Those drawn as ranks × steps heatmaps and distributions, with the direction that is worse
#: (what a block of many ranks shows: charts.rank_blocks).
HEATMAPS = {"eta": "min", "tau_comm_ms": "max", "wait_ms": "max"}

v = session.current_run()
st.header(f"Ranks × steps — {md(v.run)}")
steps = pd.DataFrame(v.report.get("steps") or [])
if steps.empty:
    missing("Per-step metrics", steps_hint(v.report))
    st.stop()

waits = data.run_table(v.path, v.run, v.fp, "rank_step_wait")
if waits is not None and not waits.empty:
    steps = steps.merge(waits[["rank", "step", "wait_ms"]], on=["rank", "step"], how="left")

shown = [m for m in METRICS if m in steps.columns]
for m in shown:
    steps[f"{m}_outlier"] = flag_outliers(steps[m].tolist())

maps = [m for m in HEATMAPS if m in steps.columns]
n_ranks = steps["rank"].nunique()
size = charts.rank_block_size(n_ranks)
if size == 1:
    st.caption("Each cell is one rank in one step; a black border marks a robust outlier.")
else:
    st.caption(
        f"{n_ranks} ranks: each row is a block of {size} consecutive ranks, each cell its worst "
        "rank in that step (lowest η, highest τ_comm and wait; the tooltip names it); a black "
        "border marks a block holding a robust outlier. The outliers table below lists them "
        "rank by rank."
    )
for col, m in zip(st.columns(len(maps)), maps, strict=True):
    plot(
        charts.rank_blocks(
            steps[["rank", "step", m, f"{m}_outlier"]].dropna(subset=[m]),
            m,
            HEATMAPS[m],
            f"{m}_outlier",
        ),
        charts.heatmap,
        (m, f"{METRICS[m]} per rank and step", f"{m}_outlier"),
        f"No {METRICS[m]} to draw.",
        key=f"heatmap_{m}",
        where=col,
    )
if len(steps) < charts.HISTOGRAM_MIN_POINTS:
    st.caption(
        f"No distributions: {len(steps)} rank-steps are too few for a histogram "
        f"(drawn from {charts.HISTOGRAM_MIN_POINTS}); the heatmaps above show each one."
    )
else:
    st.caption("Distributions over all rank-steps (count of rank-steps per bin).")
    for col, m in zip(st.columns(len(maps)), maps, strict=True):
        plot(
            steps[[m]].dropna(),
            charts.histogram,
            (m, METRICS[m], METRICS[m]),
            f"No {METRICS[m]} to draw.",
            key=f"histogram_{m}",
            where=col,
        )
if "wait_ms" not in steps.columns:
    missing("Wait for peers per rank and step", traces_hint(v.report))

st.subheader("Outliers")
flags = [f"{m}_outlier" for m in shown]
out = steps[steps[flags].any(axis=1)]
if out.empty:
    st.caption(f"No rank-step is an outlier (robust z-score above {Z_LIMIT}) on these metrics.")
else:
    outlier_in = out[flags].apply(
        lambda row: ", ".join(METRICS[f.removesuffix("_outlier")] for f in flags if row[f]),
        axis=1,
    )
    table(out[["rank", "step", *shown]].assign(outlier_in=outlier_in), key="outliers")
    st.caption(
        f"outlier_in: the metrics on which the rank-step is a robust outlier (|z| > {Z_LIMIT})."
    )

st.subheader("Per rank (whole trace)")
table(pd.DataFrame(v.report.get("ranks") or []), key="ranks_table")
