"""NCCL: versions, transports (RDMA, GDR, Socket), rings and trees, warnings and timeouts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from commwall.analysis.nccl.tests_tables import test_sentence
from commwall.dashboard import charts, data, figures, session
from commwall.dashboard.ui import column_label, md, missing, nccl_hint
from commwall.dashboard.ui import table as ui_table

MAX_DRAWN = 4  # channels drawn per communicator

v = session.current_run()
st.header(f"NCCL — {md(v.run)}")
n = v.report.get("nccl")
if not isinstance(n, dict) or not n.get("present"):
    missing("NCCL information", nccl_hint(v.report))
    st.stop()


def table(rows: list | None, key: str) -> None:
    """Rows as a table without the columns that hold nothing, or 'none' (also when only one
    column, the row's key, would be left)."""
    df = pd.DataFrame(rows or []).dropna(axis=1, how="all")
    if len(df.columns) > 1:
        ui_table(df, key=key)
    else:
        st.caption("none logged")


def evidence(ev: dict | None) -> str:
    """'file:line: text' of an evidence dict, escaped."""
    if not ev or not ev.get("text"):
        return ""
    place = f"{Path(ev['file']).name}:{ev.get('line')}: " if ev.get("file") else ""
    return md(place + ev["text"])


for finding in n.get("findings") or []:
    st.warning(md(finding), icon=":material/warning:")
lines = n.get("lines") or {}
st.caption(
    f"{n.get('files', 0)} log file(s), {lines.get('nccl', 0)} NCCL lines "
    f"({lines.get('recognised', 0)} recognised, {lines.get('unknown', 0)} unknown)."
)

st.subheader("Versions and network")
gdr = {True: "on", False: "off", None: "not seen"}[n.get("gdr")]
tcp = (n.get("tcp_fallback") or {}).get("detected")
nets = ", ".join(str(x.get("network")) for x in n.get("networks") or []) or "none (one node)"
if (n.get("inter_node") or {}).get("value") is False:  # the section's own answer, as the CLI's
    nets = "none (one node)"  # a network plugin loaded on one node carries no traffic
m1, m2, m3, m4 = st.columns(4)  # one row across the page: values are never cut short
m1.metric("NCCL", ", ".join(n.get("versions") or []) or "not logged")
m2.metric("Inter-node network", nets)
m3.metric("GPU Direct RDMA", gdr)
m4.metric("TCP fallback", "yes" if tcp else "no")
if n.get("gdr_evidence"):
    st.caption("GDR evidence: " + evidence(n["gdr_evidence"]))
left, right = st.columns(2)
with left:
    st.markdown("**Versions per rank**")
    table(n.get("version_by_rank"), "nccl_version_by_rank")
with right:
    st.markdown("**Network interfaces**")
    table(n.get("nics"), "nccl_nics")

tested = [t for t in n.get("tests") or [] if t.get("curve")]
if tested:
    st.subheader("nccl-tests results")
    st.caption(
        "What the fabric delivered to nccl-tests on these nodes: compare the training's bus "
        "bandwidth (Collectives page) at the same message sizes."
    )
    for t in n.get("tests") or []:
        if (sentence := test_sentence(t)) is not None:
            st.markdown("- " + md(sentence))
    curves = pd.DataFrame(
        [
            {"table": f"{t['table_no']}: {t.get('test') or t.get('op') or 'nccl-tests'}", **c}
            for t in tested
            for c in t["curve"]
        ]
    )
    figures.chart(st, charts.bandwidth_curves, curves, "Bus bandwidth by message size")

st.subheader("Transports")
table(n.get("transports"), "nccl_transports")

st.subheader("Rings and trees")
comms = n.get("communicators") or []
table(comms, "nccl_communicators")
rings = data.run_table(v.path, v.run, v.fp, "nccl_ring_orders")
trees = data.run_table(v.path, v.run, v.fp, "nccl_tree_edges")
for comm in comms[:3]:
    key = comm["comm_key"]
    st.markdown(f"**Communicator {md(key)}** — {comm.get('nranks')} ranks")
    r = rings[rings["comm_key"] == key] if rings is not None else pd.DataFrame()
    t = trees[trees["comm_key"] == key] if trees is not None else pd.DataFrame()
    if r.empty and t.empty:
        st.caption("No ring or tree lines for this communicator (printed at NCCL_DEBUG=INFO).")
        continue
    cols = st.columns(MAX_DRAWN)
    for col, (_, row) in zip(cols, r.head(MAX_DRAWN).iterrows(), strict=False):
        cut = " (cut by NCCL)" if row["truncated"] else ""
        title = f"Ring order, channel {row['channel']}{cut}"
        figures.chart(col, charts.ring, list(row["ring"]), title)
    cols = st.columns(MAX_DRAWN)
    channels = sorted(t["channel"].unique())[:MAX_DRAWN] if not t.empty else []
    for col, ch in zip(cols, channels, strict=False):
        figures.chart(col, charts.tree, t[t["channel"] == ch], f"Tree, channel {ch}")

st.subheader("Warnings, errors and timeouts")
for key in ("warnings", "errors", "timeouts"):
    p = n.get(key) or {}
    line = f"**{key}: {p.get('count', 0)}**"
    if p.get("first") and p["first"].get("text"):
        line += " — first: " + evidence(p["first"])
    st.markdown(line)
timeouts = (n.get("timeouts") or {}).get("collectives")
if timeouts:
    shown = pd.DataFrame(timeouts).astype(str)
    labels = {c: st.column_config.Column(column_label(str(c))) for c in shown.columns}
    st.dataframe(shown, hide_index=True, key="nccl_timeouts", column_config=labels)

coll = n.get("collectives") or {}
if coll.get("calls"):
    st.subheader("Collectives NCCL logged")
    table(coll.get("by_op"), "nccl_colls_by_op")
