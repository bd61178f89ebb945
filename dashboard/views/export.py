"""Export: the run's post-mortem as a self-contained HTML page or Markdown."""

from __future__ import annotations

import shlex

import streamlit as st

from dashboard import database, session
from dashboard.export import render_html, render_markdown
from dashboard.ui import md
from dashboard.uploads import safe_name

v = session.current_run()
st.header(f"Export — {md(v.run)}")
st.markdown(
    "A post-mortem of this run to attach to an incident or a pull request: the verdict, the "
    "checklist and every report section as tables. The HTML file has no external resources."
)
stem = "commwall-" + safe_name(v.run)
left, right = st.columns(2)
left.download_button(
    "Download HTML",
    render_html(v.report),
    file_name=f"{stem}.html",
    mime="text/html",
    key="export_html",
    icon=":material/download:",
)
right.download_button(
    "Download Markdown",
    render_markdown(v.report),
    file_name=f"{stem}.md",
    mime="text/markdown",
    key="export_md",
    icon=":material/download:",
)
st.caption("From a shell:")
db, run = shlex.quote(str(database.db_path())), shlex.quote(v.run)
st.code(f"commwall export --db {db} --run {run} --out {stem}.html", language="bash")
