"""What the tests of the two caches beside a store (the report cache, analysis/report/cache.py,
and the run cache, analysis/report/run_cache.py) share: a generated store of the same rows every
time, its report as a later command would print it, and that report computed without any cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_traces import Scenario, insert_run, simulate

from commwall.analysis.db import load_modules
from commwall.analysis.report import build as report_module
from commwall.analysis.report import cache as report_cache
from commwall.analysis.report import run_cache
from commwall.ingest import store


def report(db: Path, run: str, monkeypatch: pytest.MonkeyPatch, cache: bool = True) -> dict:
    """The JSON report of `run` from a fresh read-only connection, as text and back (what
    `commwall report --format json` prints); `cache`: the run cache on or off. Built through the
    module's attribute, so that a test's stand-in for `build_report`'s parts is used."""
    monkeypatch.setenv(run_cache.ENV, "1" if cache else "0")
    con = load_modules(store.connect(db, read_only=True))
    try:
        return json.loads(json.dumps(report_module.build_report(con, run), default=str))
    finally:
        con.close()


def generate(db: Path) -> Path:
    """A store at `db` with run "a" of a generated 4-rank job (the same rows every time)."""
    with store.connect(db) as con:
        insert_run(con, "a", simulate(Scenario(hosts=2, ranks_per_host=2, steps=3, straggler=3)))
    return db


def uncached_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The report of run "a" of a store made by `generate`, computed without any cache: the
    same rows give the same report whatever the store's path, so the tests that compare an
    unchanged generated store's report with it share this one computation."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_cache, "ENABLED", False)
        return report(generate(tmp_path_factory.mktemp("uncached") / "g.duckdb"), "a", mp, False)
