"""Hang: who did not arrive, from the run's PyTorch Flight Recorder dumps (the `hang` section)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from commwall.dashboard import charts, session
from commwall.dashboard.hang_text import listed, timeline_rows
from commwall.dashboard.ui import md, missing, plot, table

UPLOAD_FR = (
    "Upload one Flight Recorder dump per rank (JSON or pickle): run the job with "
    "`TORCH_FR_BUFFER_SIZE=2000` and `TORCH_FR_DUMP_TEMP_FILE=<dir>/rank_` for dumps on a "
    "watchdog timeout, or call `torch._C._distributed_c10d._dump_fr_trace_json()` on each rank."
)

v = session.current_run()
st.header(f"Hang — {md(v.run)}")
h = v.report.get("hang")
if not isinstance(h, dict) or not h.get("present"):
    missing("Flight Recorder evidence", UPLOAD_FR)
    st.stop()


def ranks_of(values: list | None) -> str:
    """'0, 2, 3' or '—'."""
    return ", ".join(str(r) for r in values or []) or "—"


(st.error if any(g.get("cause") for g in h["groups"]) else st.success)(md(h["verdict"]))
st.caption(
    f"{h['n_dumps']} dump(s) ({listed(h.get('forms'))}), Flight Recorder format "
    f"{md(listed(h.get('versions')))}."
)

st.subheader("Process groups")
groups = pd.DataFrame(
    [
        {
            "group": g["pg_name"],
            "description": g["pg_desc"],
            "members": ranks_of(g["members"]),
            "no dump": ranks_of(g["missing_dumps"]),
            "last seq all entered": g["last_common_seq"],
            "last seq all completed": g["last_completed_seq"],
            "highest seq": g["max_seq"],
        }
        for g in h["groups"]
    ]
)
table(groups, key="hang_groups")

st.subheader("Findings")
findings = pd.DataFrame(
    [
        {
            "group": f["pg_name"],
            "seq": f["seq"],
            "kind": f["kind"],
            "op": f["op_name"],
            "culprit ranks": ranks_of(f["culprit_ranks"]),
            "other ranks": ranks_of(f["other_ranks"]),
            "expected": f["expected"],
            "culprits passed": " / ".join(f["culprit_values"] or []) or None,
        }
        for f in h["findings"]
    ]
)
if findings.empty:
    st.caption("No rank missing, mismatched or stuck.")
else:
    table(findings, key="hang_findings")

st.subheader("Last collectives before the hang")
rows = pd.DataFrame(timeline_rows(h))
if not rows.empty:
    rows["label"] = "group " + rows["pg_name"].astype(str) + " · rank " + rows["rank"].astype(str)
causes = [g["cause"]["seq"] for g in h["groups"] if g.get("cause")]
#: What the chart draws: a list column (input_dtypes) would defeat the chart cache's hashing.
drawn = ["label", "seq", "op_name", "pg_name", "rank", "state", "in_nelems"]
plot(
    rows[drawn] if not rows.empty else rows,
    charts.hang_entries,
    (min(causes) if causes else None,),
    "No entries.",
    key="hang_entries",
)
if not rows.empty:
    shown = rows.drop(columns=["label", "trace_ts", "trace_dur", "time_created_ns"])
    table(shown, key="hang_timeline")
    if rows["join_key"].notna().any():
        st.caption(
            "trace_ms / trace_dur_ms: the same call in the run's Kineto traces (start after the "
            "first joined one, duration); join_key says how it was matched."
        )
