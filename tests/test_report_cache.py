"""A run's whole report kept beside the store (analysis/report/cache.py): a report read back is
the report computed without any cache, on a real gloo set, and its straggler is the one the
generator made; it is not used once the run, its name or the analysis code changes, or when it
is damaged; a report that a section failed to build, or that JSON would not give back exactly,
is never kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from cache_support import generate, report, uncached_report
from conftest import SAMPLES
from synthetic_traces import Scenario, insert_run, simulate, small_runs

from commwall.analysis.api import Store
from commwall.analysis.db import load_modules, run_id
from commwall.analysis.report import build as report_module
from commwall.analysis.report import cache as report_cache
from commwall.analysis.report import run_cache
from commwall.ingest import store

GLOO = SAMPLES / "gloo_4rank_sleep"


def kept(db: Path) -> list[Path]:
    """The reports kept beside store `db`."""
    return sorted(Path(f"{db}.cache").glob("report-run*.json"))


def keep(db: Path, run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `commwall ingest` does once a run has landed (analysis.api.Run.keep)."""
    monkeypatch.setenv(run_cache.ENV, "1")
    with Store(db) as s:
        s.run(run).keep()


@pytest.fixture
def no_building(monkeypatch: pytest.MonkeyPatch):
    """Make every section fail: a report that is still whole was read back, not built."""

    def boom(*_a: object) -> None:
        raise AssertionError("a section was built")

    def off() -> None:
        monkeypatch.setattr(report_module, "SECTIONS", {k: boom for k in report_module.SECTIONS})
        monkeypatch.setattr(report_module, "DERIVED", {k: boom for k in report_module.DERIVED})

    return off


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    return generate(tmp_path / "g.duckdb")


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return uncached_report(tmp_path_factory)


def test_a_kept_report_is_the_report_computed_without_any_cache(tmp_path, monkeypatch, no_building):
    db = tmp_path / "s.duckdb"
    with store.connect(db) as con:
        store.ingest(con, "gloo", sorted(GLOO.glob("rank*.pt.trace.json.gz")))
    uncached = report(db, "gloo", monkeypatch, cache=False)
    assert kept(db) == []  # a quick report is not kept, and the variable turns the cache off
    keep(db, "gloo", monkeypatch)
    assert len(kept(db)) == 1
    # read back in this process: the very dict the report computed, types and all (a tuple
    # read back as a list, or an int key as a string, would not compare equal here)
    monkeypatch.setenv(run_cache.ENV, "0")
    with store.connect(db, read_only=True) as raw:
        computed = report_module.build_report(load_modules(raw), "gloo")
    monkeypatch.setenv(run_cache.ENV, "1")
    no_building()
    with store.connect(db, read_only=True) as raw:
        assert report_module.build_report(load_modules(raw), "gloo") == computed
    again = report(db, "gloo", monkeypatch)
    assert again == uncached
    # the straggler the generator made (ground_truth.json) is named in the report read back
    truth = json.loads((GLOO / "ground_truth.json").read_text())
    flagged = [r["rank"] for r in again["stragglers"]["ranks"] if r.get("flagged")]
    assert flagged == [truth["straggler_rank"]]
    assert again["diagnosis"]["paragraph"] == uncached["diagnosis"]["paragraph"]


def test_a_report_that_took_long_is_kept_and_a_quick_one_is_not(tmp_path, monkeypatch):
    db = tmp_path / "g.duckdb"
    with store.connect(db) as con:
        insert_run(con, "a", simulate(Scenario(hosts=2, ranks_per_host=2, steps=3, straggler=3)))
    monkeypatch.setattr(report_cache, "MIN_SECONDS", 3600.0)
    report(db, "a", monkeypatch)
    assert kept(db) == []
    monkeypatch.setattr(report_cache, "MIN_SECONDS", 0.0)
    first = report(db, "a", monkeypatch)
    assert len(kept(db)) == 1 and report(db, "a", monkeypatch) == first


def test_a_file_ingested_into_the_run_makes_its_report_stale(tmp_path, monkeypatch):
    db = tmp_path / "s.duckdb"
    files = sorted(GLOO.glob("rank*.pt.trace.json.gz"))
    with store.connect(db) as con:
        store.ingest(con, "gloo", files[:3])
    keep(db, "gloo", monkeypatch)
    (old,) = kept(db)
    with store.connect(db) as con:
        store.ingest(con, "gloo", files[3:])  # rank 3 joins the run
    four = report(db, "gloo", monkeypatch)
    assert four["run_info"]["n_ranks"] == 4  # not the three-rank report kept before
    assert four == report(db, "gloo", monkeypatch, cache=False)
    keep(db, "gloo", monkeypatch)
    assert len(kept(db)) == 1 and kept(db) != [old]  # the stale report is gone


def test_rows_changed_without_a_file_and_a_renamed_run_are_not_read(tmp_path, monkeypatch):
    db = tmp_path / "g.duckdb"
    with store.connect(db) as con:
        insert_run(con, "a", simulate(Scenario(hosts=2, ranks_per_host=2, steps=3, straggler=3)))
    keep(db, "a", monkeypatch)
    with store.connect(db) as con:
        rid = run_id(con, "a")
        before = report_cache.fingerprint(con, rid)
        con.execute("DELETE FROM steps WHERE run_id = ? AND step = 2 AND rank = 0", [rid])
        assert report_cache.fingerprint(con, rid) != before
    assert report(db, "a", monkeypatch) == report(db, "a", monkeypatch, cache=False)
    keep(db, "a", monkeypatch)
    with store.connect(db) as con:
        assert store.rename_run(con, "a", "b")
    renamed = report(db, "b", monkeypatch)
    assert renamed["run"] == "b" and renamed == report(db, "b", monkeypatch, cache=False)


def test_every_file_of_the_analysis_code_is_part_of_the_fingerprint(tmp_path, monkeypatch):
    copy = tmp_path / "analysis"
    shutil.copytree(report_cache._PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(report_cache, "_PACKAGE", copy)
    digests = []
    for path in (copy / "sql" / "idle.sql", copy / "report" / "diagnosis.py", None):
        report_cache._code_digest.cache_clear()
        digests.append(report_cache._code_digest())
        if path is not None:
            path.write_text(path.read_text() + "\n")
    report_cache._code_digest.cache_clear()
    assert len(set(digests)) == 3


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"a": [1, 2.5, None, True, "x", {"b": float("nan")}]}, True),
        ({"a": np.float64(0.5)}, True),  # a float: JSON writes and reads it as one
        ({"a": {"b"}}, False),  # a set: JSON cannot write it
        ({"a": (1, 2)}, False),  # a tuple: read back as a list
        ({1: "rank"}, False),  # an int key: read back as "1"
        ({"a": np.int64(3)}, False),  # not an int to JSON
        ({"a": [{"b": object()}]}, False),
    ],
)
def test_only_what_json_gives_back_exactly_is_kept(value, ok):
    assert report_cache.faithful(value) is ok


def test_a_report_with_a_failed_section_is_not_kept(generated, monkeypatch):
    def broken(*_a: object) -> None:
        raise MemoryError("out of memory")  # transient: the next report may well succeed

    monkeypatch.setitem(report_module.SECTIONS, "replay", broken)
    keep(generated, "a", monkeypatch)
    assert kept(generated) == []


@pytest.mark.parametrize("damage", ["truncated", "format", "not a report"])
def test_a_damaged_report_is_not_used(generated, monkeypatch, damage, uncached):
    keep(generated, "a", monkeypatch)
    (path,) = kept(generated)
    doc = json.loads(path.read_text())
    if damage == "truncated":
        path.write_text(path.read_text()[:100])
    elif damage == "format":
        path.write_text(json.dumps({**doc, "format": 99}))
    else:
        path.write_text(json.dumps({**doc, "report": ["a list"]}))
    assert report(generated, "a", monkeypatch) == uncached


def test_a_cache_that_cannot_be_written_is_not_used(generated, monkeypatch, uncached):
    Path(f"{generated}.cache").write_text("a file where the directory would be")
    keep(generated, "a", monkeypatch)
    assert report(generated, "a", monkeypatch) == uncached


def test_only_the_most_recently_used_reports_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(report_cache, "KEEP", 2)
    db = small_runs(tmp_path / "k.duckdb")
    for name in "abc":
        keep(db, name, monkeypatch)
    assert {p.name.split("-")[1] for p in kept(db)} == {"run2", "run3"}


def test_ingest_keeps_the_report_that_the_cli_then_prints(tmp_path, monkeypatch, capsys):
    from commwall.cli.main import main

    db = tmp_path / "i.duckdb"
    files = [str(p) for p in sorted(GLOO.glob("rank*.pt.trace.json.gz"))]
    assert main(["ingest", *files, "--db", str(db), "--run", "g", "--quiet"]) == 0
    assert len(kept(db)) == 1
    capsys.readouterr()
    for variable in ("1", "0"):  # read back, then computed with no cache at all
        monkeypatch.setenv(run_cache.ENV, variable)
        assert main(["report", "--db", str(db), "--run", "g", "--format", "json"]) == 0
    printed, computed = capsys.readouterr().out.split("\n}\n", 1)
    assert json.loads(printed + "}") == json.loads(computed)
