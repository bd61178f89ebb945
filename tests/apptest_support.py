"""Streamlit AppTest runs of the dashboard over a store: the app opened on a run and a page,
with Streamlit's caches cleared around every test of a module that imports `fresh_caches`."""

from __future__ import annotations

import pytest
import streamlit as st
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from commwall.dashboard import nav
from commwall.dashboard.database import DB_ENV, UPLOAD_ENV

APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture(autouse=True)
def fresh_caches():
    """Streamlit's caches cleared before and after each test (a module imports it to use it)."""
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()  # closes nothing: the dashboard holds no open connection


def open_app(db, monkeypatch, tmp_path, run=None, page=None, timeout: int = 120) -> AppTest:
    """The dashboard over store `db`, on run `run` and page `page` (a key of nav.PAGES),
    uploads under `tmp_path`; fails on an exception in the page."""
    monkeypatch.setenv(DB_ENV, str(db))
    monkeypatch.setenv(UPLOAD_ENV, str(tmp_path / "uploads"))
    at = AppTest.from_file(APP, default_timeout=timeout)
    if run:
        at.session_state["run"] = run
    at.run()
    if page:
        at.switch_page(nav.path(page)).run()
    assert not at.exception, at.exception
    return at
