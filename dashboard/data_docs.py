"""Cached accessors for the Compare and Export pages: the diff of several runs, the
post-mortem document and the merged timeline (analysis.compare.diff, analysis.report.postmortem,
analysis.report.perfetto). Keyed like dashboard/data.py: store path plus each run's fingerprint."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import streamlit as st

from commwall.analysis.compare.diff import diff_tables
from commwall.dashboard.data import reading, report, run_of, store


@st.cache_data(show_spinner="Comparing the runs…", max_entries=16)
def diff(path: str, runs: tuple[str, ...], fps: tuple[tuple, ...]) -> dict[str, pd.DataFrame]:
    """analysis.compare.pair.diff's tables of `runs` (the first is the baseline)."""
    reports = [report(path, r, fp) for r, fp in zip(runs, fps, strict=True)]
    with reading(path) as s:
        facts = [s.run(r).facts(rep) for r, rep in zip(runs, reports, strict=True)]
    return diff_tables(facts)


@st.cache_data(show_spinner="Writing the post-mortem…", max_entries=16)
def document(
    path: str,
    run: str,
    fp: tuple,
    fmt: str,
    baseline: str | None,
    bfp: tuple,
    fabric_baseline: str | None = None,
    ffp: tuple = (),
) -> str:
    """The post-mortem of `run` (against `baseline` when given; its collectives priced from
    the nccl-tests tables of run `fabric_baseline` when given) as HTML or Markdown."""
    from commwall.dashboard.export import postmortem  # noqa: PLC0415 (charts: only this page)

    with store(path).reading() as con:
        return postmortem(con, run, fmt, baseline, fabric_baseline)


@st.cache_data(show_spinner="Merging the ranks' timelines…", max_entries=8)
def perfetto(path: str, run: str, fp: tuple) -> bytes:
    """The merged timeline of `run` as gzipped Chrome-trace JSON."""
    with run_of(path, run) as r:
        trace = r.perfetto()
    return gzip.compress(json.dumps(trace, separators=(",", ":")).encode("utf-8"))
