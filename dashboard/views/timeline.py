"""Timeline: one step, chosen ranks, compute and communication on one clock, collectives linked."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, session
from dashboard.ui import UPLOAD_TRACES, md, missing

MAX_DEFAULT_RANKS = 8

v = session.current_run()
st.header(f"Timeline — {md(v.run)}")
steps = sorted({r["step"] for r in v.report.get("steps") or []})
ranks = sorted({r["rank"] for r in v.report.get("ranks") or []})
if not steps:
    missing(
        "The step timeline", "The traces have no `ProfilerStep#N` annotations. " + UPLOAD_TRACES
    )
    st.stop()

left, right = st.columns([1, 3])
step = left.selectbox("Step", steps, key="timeline_step")
chosen = right.multiselect("Ranks", ranks, default=ranks[:MAX_DEFAULT_RANKS], key="timeline_ranks")
if not chosen:
    st.info("Choose at least one rank.")
    st.stop()

tracks, colls = data.step_timeline(v.path, v.run, v.fp, int(step), tuple(sorted(chosen)))
if tracks.empty:
    missing(f"Activity in step {step}", UPLOAD_TRACES)
    st.stop()
lanes = [
    f"rank {r} {k}" for r in sorted(chosen) for k in ("compute", "comm", "memory", "collectives")
]
tracks = tracks.assign(
    lane=[f"rank {r} {k}" for r, k in zip(tracks["rank"], tracks["kind"], strict=True)]
)
colls = colls.assign(lane=[f"rank {r} collectives" for r in colls["rank"]])
lanes = [x for x in lanes if x in set(tracks["lane"]) | set(colls["lane"])]
st.altair_chart(charts.timeline(tracks, colls, lanes), width="stretch")
bases = (v.report.get("run_info") or {}).get("time_bases") or []
st.caption(
    "Bars: time covered by each kind of activity, clipped to each rank's step window. Black "
    "lines join the start of the same collective on every rank: a slanted line is arrival skew. "
    f"Clock: epoch time from the traces ({md(', '.join(bases) or 'unknown')}), each host's "
    "offset (fitted on collective end times) removed."
)
if "unknown" in bases:
    st.warning("Some ranks have no absolute time base: their tracks cannot be aligned.")
if colls.empty:
    st.caption("No collective calls in this step.")
else:
    st.dataframe(colls.drop(columns=["lane"]), hide_index=True, key="timeline_collectives")
