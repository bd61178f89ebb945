"""Stragglers: ranks ranked by score, the wait they cause, their host, and the evidence."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, session
from dashboard.ui import UPLOAD_TRACES, md, missing

#: Columns of the main table (when the section has them), in order.
SHOWN = [
    "rank",
    "host",
    "flagged",
    "kind",
    "score",
    "wait_caused_ms",
    "late_fraction",
    "n_last",
    "n_instances",
    "lateness_ms",
    "compute_ratio",
    "steps_flagged",
    "n_steps",
]

v = session.current_run()
st.header(f"Stragglers — {md(v.run)}")
s = v.report.get("stragglers")
if not isinstance(s, dict) or not s.get("ranks"):
    missing(
        "The straggler analysis",
        "It needs collectives matched across at least two ranks. " + UPLOAD_TRACES,
    )
    st.stop()

flagged = list(s.get("flagged") or [])
(st.warning if flagged else st.success)(md(s.get("verdict") or "no verdict"))

table = pd.DataFrame(s["ranks"]).sort_values("score", ascending=False, kind="stable")
table["host"] = table["host"].fillna("unknown")
table["rank"] = table["rank"].astype(str)
st.altair_chart(
    charts.side_by_side(
        charts.bars(table, "score", "rank", "Straggler score (robust z of lateness)", "flagged"),
        charts.bars(table, "wait_caused_ms", "rank", "Wait caused on peers (ms)", "flagged"),
    ),
    key="straggler_bars",
)
st.dataframe(table[[c for c in SHOWN if c in table.columns]], hide_index=True, key="stragglers")
st.caption(
    "A straggler arrives last at collectives, so it has the shortest communication time and "
    "makes its peers wait. late_fraction: share of its collectives it joined last; "
    "compute_ratio: its operator time over the median rank's (above 1: extra compute)."
)
with st.expander("Per step"):
    st.dataframe(pd.DataFrame(s.get("steps") or []), hide_index=True, key="straggler_steps")
