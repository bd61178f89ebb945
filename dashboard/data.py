"""Cached accessors over the store: every number the pages show comes from here, and here
from `analysis` (the report dict and small analysis functions). No metric logic.

Caches are keyed by the store path plus a fingerprint: `version` (file stat) for the runs list,
and the run's row of that list (name, creation time, files, bytes) for everything about one
run, so that an upload of another run does not invalidate it.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import streamlit as st

from analysis import db, timeline, whatif
from analysis.api import runs_table
from analysis.model.scenario import Scenario
from analysis.model.section import run_scenario
from analysis.report import build_report
from analysis.units import NS_PER_MS
from dashboard.database import StoreFile, db_path


@st.cache_resource(show_spinner=False)
def store(path: str) -> StoreFile:
    """The store at `path`, created on first use."""
    s = StoreFile(path)
    s.ensure()
    return s


def current() -> StoreFile:
    """The store of this server."""
    return store(str(db_path()))


@st.cache_data(show_spinner=False, max_entries=64)
def runs(path: str, version: tuple) -> pd.DataFrame:
    """The runs table (analysis.api.runs_table) at store `version`."""
    with store(path).reading() as con:
        return runs_table(con)


def run_list() -> pd.DataFrame:
    """The current runs table of this server's store."""
    s = current()
    return runs(str(s.path), s.version())


def fingerprint(table: pd.DataFrame, run: str) -> tuple:
    """What identifies the content of `run`: its row of the runs table."""
    row = table[table["run"] == run]
    if row.empty:
        return (run,)
    r = row.iloc[0]
    return (run, str(r["created_at"]), int(r["files"]), int(r["bytes"] or 0))


@st.cache_resource(show_spinner="Analysing the run…", max_entries=32)
def report(path: str, run: str, fp: tuple) -> dict:
    """The report of `run` (analysis.report.build_report's dict, sections that fail recorded
    under `analysis_errors`). Held as one shared object, not copied per page visit (a 64-rank
    report takes longer to unpickle than most pages take to draw): pages only read it."""
    with store(path).reading() as con:
        return build_report(con, run, keep_going=True)


@st.cache_data(show_spinner=False, max_entries=64)
def step_timeline(
    path: str, run: str, fp: tuple, step: int, ranks: tuple[int, ...]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Busy tracks and collective calls of `ranks` in `step` (analysis.timeline)."""
    with store(path).reading() as con:
        rid = db.run_id(con, run)
        return (
            timeline.tracks(con, rid, step, list(ranks)),
            timeline.collectives(con, rid, step, list(ranks)),
        )


@st.cache_data(show_spinner=False, max_entries=64)
def window_timeline(
    path: str, run: str, fp: tuple, window: int, n: int, ranks: tuple[int, ...]
) -> tuple[pd.DataFrame, float, float] | None:
    """Busy tracks of `ranks` in window `window` of the run's span cut in `n`
    (analysis.timeline.windows), with the window's start (ms after the span's start) and
    length (ms); None when the run has no timeline activity."""
    with store(path).reading() as con:
        rid = db.run_id(con, run)
        cuts = timeline.windows(con, rid, n)
        if not cuts:
            return None
        t0, t1 = cuts[window]
        tracks = timeline.window_tracks(con, rid, t0, t1, list(ranks))
        return tracks, (t0 - cuts[0][0]) / NS_PER_MS, (t1 - t0) / NS_PER_MS


@st.cache_data(show_spinner=False, max_entries=32)
def scenario(path: str, run: str, fp: tuple) -> Scenario | None:
    """The run as a calibrated model Scenario for what-ifs (analysis.model.section)."""
    with store(path).reading() as con:
        return run_scenario(con, db.run_id(con, run))


@st.cache_data(show_spinner=False, max_entries=256)
def whatif_curve(
    path: str,
    run: str,
    fp: tuple,
    knob: str,
    values: tuple[float, ...],
    others: tuple[tuple[str, float], ...],
    idle_ms: float,
) -> pd.DataFrame:
    """analysis.whatif.curve of the run's scenario with the `others` knobs set."""
    s = whatif.with_knobs(scenario(path, run, fp), dict(others))
    return whatif.curve(s, knob, list(values), idle_ms)


@st.cache_data(show_spinner=False, max_entries=32)
def macro_rows(path: str, run: str, fp: tuple, macro: str) -> pd.DataFrame | None:
    """All rows of table macro `macro(run_id)`, or None when this commwall has no such macro."""
    if not macro.isidentifier():
        raise ValueError(f"not a macro name: {macro!r}")
    with store(path).reading() as con:
        rid = db.run_id(con, run)
        try:
            return con.execute(f"SELECT * FROM {macro}(?)", [rid]).df()
        except duckdb.CatalogException:
            return None
