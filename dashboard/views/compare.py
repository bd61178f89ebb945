"""Compare runs: two runs side by side (before and after a fix), with deltas."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.compare import compare
from analysis.verdict import verdict
from dashboard import session
from dashboard.ui import md

st.header("Compare runs")
table = session.runs_or_stop()
names = table["run"].tolist()
if len(names) < 2:
    st.info("Store a second run (for example after a fix) to compare it with the first.")
    st.stop()

left, right = st.columns(2)
before = left.selectbox("Before", names, index=0, key="compare_before")
after = right.selectbox("After", names, index=len(names) - 1, key="compare_after")
a, b = session.view(table, before).report, session.view(table, after).report

rows = compare(a, b)
cols = st.columns(4)
for col, row in zip(
    cols,
    [r for r in rows if r["metric"] in {"step_ms", "tau_comm_ms", "exposed_comm_ms", "eta"}],
    strict=True,
):
    value = "n/a" if row["after"] is None else f"{row['after']:.3f}"
    delta = None if row["delta"] is None else f"{row['delta']:+.3f}"
    lower_better = row["metric"] != "eta"
    col.metric(row["label"], value, delta, delta_color="inverse" if lower_better else "normal")

for col, name, rep in ((left, before, a), (right, after, b)):
    v = verdict(rep.get("summary"))
    col.markdown(f"**{md(name)}**: {v['verdict'] if v else 'no communication measured'}")

shown = pd.DataFrame(rows).drop(columns=["metric"])
shown["change"] = shown["change"].map(lambda c: None if c is None else f"{100 * c:+.1f}%")
st.dataframe(shown, hide_index=True, key="compare_table")
