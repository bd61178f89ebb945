"""Cached accessors over the store: every number the pages show comes from here, and here
from `analysis` (the report dict and small analysis functions). No metric logic.

Caches are keyed by the store path plus a fingerprint: `version` (file stat) for the runs list,
and the run's row of that list (name, creation time, files, bytes) for everything about one
run, so that an upload of another run does not invalidate it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
import streamlit as st

from commwall.analysis.api import Prepared, Run, Store
from commwall.analysis.model import whatif
from commwall.analysis.model.scenario import Scenario
from commwall.analysis.report.shape import Report
from commwall.analysis.units import NS_PER_MS
from commwall.dashboard.database import StoreFile, db_path


@st.cache_resource(show_spinner=False)
def store(path: str) -> StoreFile:
    """The store at `path`, created on first use."""
    s = StoreFile(path)
    s.ensure()
    return s


@contextmanager
def reading(path: str) -> Iterator[Store]:
    """The store at `path` through the analysis facade, on a short-lived connection."""
    with store(path).reading() as con:
        yield Store.over(con)


@contextmanager
def run_of(path: str, run: str) -> Iterator[Run]:
    """Run `run` of the store at `path` through the analysis facade."""
    with reading(path) as s:
        yield s.run(run)


def current() -> StoreFile:
    """The store of this server."""
    return store(str(db_path()))


@st.cache_data(show_spinner=False, max_entries=64)
def runs(path: str, version: tuple) -> pd.DataFrame:
    """The runs table (analysis.api.runs_table) at store `version`."""
    with reading(path) as s:
        return s.runs()


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
    return (run, str(r["created_at"]), int(r["files"]), int(r["bytes"]))


#: Run tables and collective views computed with the report (analysis.api.Run.prepared), in
#: the same analysis session: on a 1,024-rank run each of them alone re-runs the matching and
#: clock fit, seconds to a minute on the first visit of its page.
PREPARED_TABLES = ("rank_step_wait", "nccl_algorithm_choices", "collective_algorithms")
PREPARED_VIEWS = ("instances",)


@st.cache_resource(show_spinner="Analysing the run…", max_entries=32)
def prepared(path: str, run: str, fp: tuple) -> Prepared:
    """The report of `run` (analysis.report.build.build_report's dict, sections that fail recorded
    under `analysis_errors`) with PREPARED_TABLES, PREPARED_VIEWS and the model scenario. Held
    as one shared object, not copied per page visit (a 64-rank report takes longer to unpickle
    than most pages take to draw): pages only read it."""
    with run_of(path, run) as r:
        return r.prepared(PREPARED_TABLES, PREPARED_VIEWS)


def report(path: str, run: str, fp: tuple) -> Report:
    """The report of `run` (see `prepared`)."""
    return prepared(path, run, fp).report


@st.cache_data(show_spinner=False, max_entries=64)
def step_timeline(
    path: str, run: str, fp: tuple, step: int, ranks: tuple[int, ...]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Busy tracks and collective calls of `ranks` in `step` (analysis.steps.timeline)."""
    done = prepared(path, run, fp).tracks.get((step, ranks))
    if done is not None:
        return done
    with run_of(path, run) as r:
        return r.step_tracks(step, list(ranks))


@st.cache_data(show_spinner=False, max_entries=64)
def pipeline_timeline(
    path: str, run: str, fp: tuple, step: int, ranks: tuple[int, ...]
) -> pd.DataFrame:
    """One pipeline's stages (`ranks` in stage order) along `step` (analysis.report.pipeline
    .pipeline_timeline)."""
    with run_of(path, run) as r:
        return r.pipeline_timeline(step, list(ranks))


@st.cache_data(show_spinner=False, max_entries=64)
def window_timeline(
    path: str, run: str, fp: tuple, window: int, n: int, ranks: tuple[int, ...]
) -> tuple[pd.DataFrame, float, float] | None:
    """Busy tracks of `ranks` in window `window` of the run's span cut in `n`
    (analysis.steps.timeline.windows), with the window's start (ms after the span's start) and
    length (ms); None when the run has no timeline activity."""
    with run_of(path, run) as r:
        cuts = r.windows(n)
        if not cuts:
            return None
        t0, t1 = cuts[window]
        tracks = r.window_tracks(t0, t1, list(ranks))
        return tracks, (t0 - cuts[0][0]) / NS_PER_MS, (t1 - t0) / NS_PER_MS


@st.cache_data(show_spinner=False, max_entries=32)
def scenario(path: str, run: str, fp: tuple) -> Scenario | None:
    """The run as a calibrated model Scenario for what-ifs (analysis.model.section)."""
    done = prepared(path, run, fp)
    if done.has_scenario:
        return done.scenario
    with run_of(path, run) as r:
        return r.scenario()


def _known_scenario(path: str, run: str, fp: tuple) -> Scenario:
    """The run's scenario, for the what-ifs a page offers only when there is one."""
    s = scenario(path, run, fp)
    if s is None:
        raise ValueError(f"run {run!r} has no model scenario (no reducible bytes per step)")
    return s


@st.cache_data(show_spinner=False, max_entries=256)
def whatif_prediction(
    path: str, run: str, fp: tuple, knobs: tuple[tuple[str, float], ...], idle_ms: float
) -> dict:
    """analysis.model.whatif.predicted of the run's scenario with `knobs` set."""
    return whatif.predicted(whatif.with_knobs(_known_scenario(path, run, fp), dict(knobs)), idle_ms)


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
    """analysis.model.whatif.curve of the run's scenario with the `others` knobs set."""
    s = whatif.with_knobs(_known_scenario(path, run, fp), dict(others))
    return whatif.curve(s, knob, list(values), idle_ms)


#: The run tables pages list, by the name of their analysis.api.Run accessor.
TABLES = (
    "rank_step_wait",
    "nccl_algorithm_choices",
    "collective_algorithms",
    "nccl_ring_orders",
    "nccl_tree_edges",
)


@st.cache_data(show_spinner=False, max_entries=32)
def run_table(path: str, run: str, fp: tuple, name: str) -> pd.DataFrame | None:
    """Run table `name` (one of TABLES; ValueError for any other), None when the store
    predates the tables it reads."""
    if name not in TABLES:
        raise ValueError(f"not a run table: {name!r} (tables: {', '.join(TABLES)})")
    done = prepared(path, run, fp).tables
    if name in done:
        return done[name]
    with run_of(path, run) as r:
        return getattr(r, name)()


@st.cache_data(show_spinner=False, max_entries=32)
def collective_table(path: str, run: str, fp: tuple, view: str = "instances") -> pd.DataFrame:
    """Matched collectives listed by `view` (analysis.api.COLLECTIVE_VIEWS)."""
    done = prepared(path, run, fp).views
    if view in done:
        return done[view]
    with run_of(path, run) as r:
        return r.collective_table(view)
