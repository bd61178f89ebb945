"""Checklist: the maintenance checklist, each item marked from the run's evidence."""

from __future__ import annotations

import streamlit as st

from commwall.analysis.report.checklist import (
    ATTENTION,
    NOT_APPLICABLE,
    NOT_OBSERVABLE,
    OK,
    evaluate,
    ordered,
)
from commwall.dashboard import nav, session
from commwall.dashboard.ui import md, md_code

BADGES = {
    ATTENTION: ("attention", "red", ":material/warning:"),
    OK: ("ok", "green", ":material/check_circle:"),
    NOT_OBSERVABLE: ("not observable from these files", "gray", ":material/visibility_off:"),
    NOT_APPLICABLE: ("not applicable to this run", "gray", ":material/block:"),
}

v = session.current_run()
st.header(f"Checklist — {md(v.run)}")
peak = st.session_state.get("link_peak_gbps")
items = evaluate(v.report, peak) if peak else v.report.get("checklist") or evaluate(v.report)
items = ordered(items)

counts = {s: sum(i["status"] == s for i in items) for s in BADGES}
cols = st.columns(len(BADGES))
for col, (status, (label, _, _)) in zip(cols, BADGES.items(), strict=True):
    col.metric(label, counts[status])
if not peak:
    st.caption("Set the link's peak bandwidth on the Collectives page to judge bus bandwidth.")

for item in items:
    if item["status"] == NOT_APPLICABLE:
        continue  # listed apart below
    label, color, icon = BADGES[item["status"]]
    with st.container(border=True, key=f"check_{item['key']}"):
        st.markdown(f":{color}-badge[{icon} {label}] **{item['title']}**")
        st.markdown(md_code(item["evidence"]))
        if item.get("action"):
            st.caption(md_code(item["action"]))
        page, title, page_icon = nav.PAGES[item["page"]]
        st.page_link(page, label=f"Open {title}", icon=page_icon)

apart = [i for i in items if i["status"] == NOT_APPLICABLE]
if apart:
    with st.expander(f"Not applicable to this run ({len(apart)})"):
        for item in apart:
            st.markdown(f"**{md(item['title'])}**: {md_code(item['evidence'])}")
