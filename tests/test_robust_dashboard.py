"""The dashboard with a report section that fails: every page is drawn, the failure is named
(the section's reason above the page), and no page shows a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from commwall.analysis.report import build as report_mod
from commwall.dashboard import nav
from commwall.dashboard.database import DB_ENV, UPLOAD_ENV
from tests.robust_support import ROOT, SAMPLES
from tests.test_robust_cli import _broken_section

APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from commwall.ingest import store  # noqa: PLC0415

    path = tmp_path_factory.mktemp("d") / "s.duckdb"
    con = store.connect(path)
    store.ingest(con, "gloo", sorted((SAMPLES / "gloo_4rank_sleep").glob("rank*.json*")))
    con.close()
    return path


@pytest.mark.parametrize("page", list(nav.PAGES))
def test_every_page_survives_a_failing_section(db, page, monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(report_mod.SECTIONS, "stragglers", _broken_section)
    monkeypatch.setenv(DB_ENV, str(db))
    monkeypatch.setenv(UPLOAD_ENV, str(tmp_path / "uploads"))
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(nav.path(page)).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    if page not in ("upload", "compare"):  # pages of all runs, not of the selected one
        assert any("float division by zero" in e for e in errors), (page, errors)
