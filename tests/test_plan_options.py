"""The analysis connections leave DuckDB's projection_pullup step out of their plans
(analysis/db.py, SKIPPED_OPTIMIZERS): set on every connection, and the same report as with
DuckDB's defaults on real runs."""

from __future__ import annotations

import json

import pytest
from conftest import DLRM, SAMPLES, analysis_store

from commwall.analysis.db import SKIPPED_OPTIMIZERS
from commwall.analysis.report import run_cache
from commwall.analysis.report.build import build_report


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    c = analysis_store(tmp_path_factory.mktemp("plan") / "s.duckdb", (DLRM, SAMPLES / "fr_op"))
    yield c
    c.close()


def test_the_step_is_left_out(con):
    got = con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0]
    assert set(SKIPPED_OPTIMIZERS) <= set(got.split(","))


@pytest.mark.parametrize("run", ["dlrm_8rank", "fr_op"])
def test_the_same_report_as_with_duckdbs_defaults(con, run, monkeypatch):
    monkeypatch.setenv(run_cache.ENV, "0")  # both reports computed, none read back
    faster = build_report(con, run, keep_going=False)
    con.execute("RESET disabled_optimizers")
    try:
        default = build_report(con, run, keep_going=False)
    finally:
        con.execute(f"SET disabled_optimizers = '{','.join(SKIPPED_OPTIMIZERS)}'")
    assert json.dumps(faster, sort_keys=True, default=str) == json.dumps(
        default, sort_keys=True, default=str
    )
