"""The run a browser session looks at: the sidebar picker and the pages' access to it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from commwall.dashboard import data, nav
from commwall.dashboard.database import StoreBusy
from commwall.dashboard.ui import md

RUN_KEY = "run"
#: A page that wants another run selected (after an upload, a rename) sets this and reruns.
NEXT_RUN_KEY = "next_run"


@dataclass(frozen=True)
class RunView:
    """The selected run: its name, cache fingerprint and report."""

    path: str
    run: str
    fp: tuple
    report: Mapping[str, Any]  # the typed Report (analysis.report.shape), read as a mapping


def run_picker() -> None:
    """The sidebar run selector (rendered by app.py on every page)."""
    try:
        table = data.run_list()
    except StoreBusy as e:
        st.sidebar.warning(str(e))
        return
    names = table["run"].tolist()
    wanted = st.session_state.pop(NEXT_RUN_KEY, None)
    if wanted in names:
        st.session_state[RUN_KEY] = wanted
    if st.session_state.get(RUN_KEY) not in names:
        st.session_state.pop(RUN_KEY, None)
    if names:
        default: dict[str, Any] = {} if RUN_KEY in st.session_state else {"index": len(names) - 1}
        st.sidebar.selectbox("Run", names, key=RUN_KEY, **default)
    else:
        st.sidebar.caption("No runs yet.")


def runs_or_stop() -> pd.DataFrame:
    """The runs table; stops the page with a notice when the store has no runs or is busy."""
    try:
        table = data.run_list()
    except StoreBusy as e:
        st.warning(str(e))
        st.stop()
    if table.empty:
        st.info("No runs in this store yet. Upload a run's traces first.")
        st.page_link(nav.path("upload"), label="Upload and runs", icon=":material/upload_file:")
        st.stop()
    return table


def current_run() -> RunView:
    """The selected run with its report; stops the page with a notice when there is none."""
    table = runs_or_stop()
    run = st.session_state.get(RUN_KEY) or table["run"].iloc[-1]
    return view(table, run)


def view(table: pd.DataFrame, run: str) -> RunView:
    """`run` of `table` with its (cached) report."""
    path = str(data.current().path)
    fp = data.fingerprint(table, run)
    try:
        report = data.report(path, run, fp)
    except StoreBusy as e:
        st.warning(str(e))
        st.stop()
    for key, problem in (report.get("analysis_errors") or {}).items():
        st.error(
            f"The {md(key)} analysis failed on this run: {md(problem)}", icon=":material/error:"
        )
    return RunView(path, run, fp, report)
