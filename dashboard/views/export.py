"""Export: the run's post-mortem (HTML with figures, or Markdown), optionally against a
baseline run, and all ranks on one aligned timeline for Perfetto / chrome://tracing."""

from __future__ import annotations

import shlex

import streamlit as st

from commwall.dashboard import data, data_docs, database, fabric_data, session
from commwall.dashboard.ui import md
from commwall.dashboard.uploads import safe_name

v = session.current_run()
st.header(f"Export — {md(v.run)}")
st.markdown(
    "A post-mortem of this run to hand to others: the diagnosis first, then figures (step "
    "decomposition, wait caused per rank, bus bandwidth by message size, one step on the "
    "aligned clock, ranked what-ifs), readable tables, the checklist with its evidence and "
    "the run's facts. The HTML file is self-contained (charts as inline SVG, no scripts or "
    "external requests) and prints to PDF from the browser. Files are written when you click."
)
table = session.runs_or_stop()
others = [r for r in table["run"].tolist() if r != v.run]
baseline = st.selectbox(
    "Before/after against a baseline run (optional)",
    [None, *others],
    format_func=lambda r: "no baseline" if r is None else r,
    key="export_baseline",
)
bfp = () if baseline is None else session.view(table, baseline).fp
#: Other runs holding nccl-tests tables; the Model page's choice of one is the default here.
tables = [r for r in fabric_data.table_runs() if r != v.run]
fabric_baseline: str | None = None
if tables:
    chosen = st.session_state.get(f"fabric_baseline:{v.run}")
    fabric_baseline = st.selectbox(
        "Collectives priced from the nccl-tests tables of",
        [None, *tables],
        index=1 + tables.index(chosen) if chosen in tables else 0,
        format_func=lambda r: "this run (its own tables, if any)" if r is None else f"run {r}",
        key="export_fabric_baseline",
    )
ffp = () if fabric_baseline is None else data.fingerprint(table, fabric_baseline)
stem = "commwall-" + safe_name(v.run) + ("" if baseline is None else f"-vs-{safe_name(baseline)}")
left, mid, right = st.columns(3)
left.download_button(
    "Download HTML",
    lambda: data_docs.document(v.path, v.run, v.fp, "html", baseline, bfp, fabric_baseline, ffp),
    file_name=f"{stem}.html",
    mime="text/html",
    key="export_html",
    icon=":material/download:",
)
mid.download_button(
    "Download Markdown",
    lambda: data_docs.document(v.path, v.run, v.fp, "md", baseline, bfp, fabric_baseline, ffp),
    file_name=f"{stem}.md",
    mime="text/markdown",
    key="export_md",
    icon=":material/download:",
)
right.download_button(
    "Download timeline (Perfetto)",
    lambda: data_docs.perfetto(v.path, v.run, v.fp),
    file_name=f"commwall-{safe_name(v.run)}.trace.json.gz",
    mime="application/gzip",
    key="export_perfetto",
    icon=":material/timeline:",
)
st.caption(
    "The timeline holds every rank as a process on the aligned clock, with the wait for the "
    "last arrival of each collective as its own slice and arrows from the last rank to the "
    "others; open it at ui.perfetto.dev or in chrome://tracing."
)
st.caption("From a shell:")
db, run = shlex.quote(str(database.db_path())), shlex.quote(v.run)
diff = "" if baseline is None else f" --diff {shlex.quote(baseline)}"
if fabric_baseline is not None:
    diff += f" --baseline {shlex.quote(fabric_baseline)}"
st.code(
    f"commwall export --db {db} --run {run}{diff} --out {stem}.html\n"
    f"commwall export --db {db} --run {run} --format perfetto "
    f"--out commwall-{safe_name(v.run)}.trace.json.gz",
    language="bash",
)
