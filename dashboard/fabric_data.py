"""Cached accessors of the Model page's fabric comparison: the runs holding nccl-tests tables and
the run's `fabric` section against another run's tables (analysis.api; no metric logic)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from commwall.dashboard import data


@st.cache_data(show_spinner=False, max_entries=64)
def baseline_runs(path: str, version: tuple) -> list[str]:
    """Names of the runs of the store at `version` that hold nccl-tests tables."""
    with data.reading(path) as s:
        return s.fabric_runs()


def table_runs() -> list[str]:
    """The runs of this server's store that hold nccl-tests tables."""
    s = data.current()
    return baseline_runs(str(s.path), s.version())


@st.cache_data(show_spinner="Comparing with the baseline run…", max_entries=32)
def fabric_against(path: str, run: str, fp: tuple, baseline: str, baseline_fp: tuple) -> Any:
    """Run `run`'s `fabric` section against the nccl-tests tables of run `baseline` (`fp`,
    `baseline_fp`: their rows of the runs table, data.fingerprint)."""
    with data.run_of(path, run) as r:
        return dict(r.fabric_section(baseline))
