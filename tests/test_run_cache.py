"""A run's session tables kept between processes (analysis/report/run_cache.py): a report read from the
cache equals the report computed without it, on real traces and on a generated run; the entry is
not used once the run's rows change (a file ingested into the run, rows added another way) or
when it is damaged, and a cache that cannot be written is simply not used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cache_support import generate, report, uncached_report
from conftest import SAMPLES
from synthetic_traces import small_runs

from commwall.analysis.db import load_modules, run_id
from commwall.analysis.report import cache as report_cache
from commwall.analysis.report import run_cache, session
from commwall.ingest import store

GLOO = SAMPLES / "gloo_4rank_sleep"


def entries(db: Path) -> list[Path]:
    base = Path(f"{db}.cache")
    return sorted(p for p in base.glob("run*") if p.is_dir()) if base.is_dir() else []


#: The tables an entry keeps: every cached one but those computed again from them.
KEPT = sorted(set(session.CACHED) - run_cache.RECOMPUTED)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every cache every session reads from: the tables each load returned."""
    seen: list[list[str]] = []
    real = run_cache.load

    def spy(con, rid, names):  # noqa: ANN001, ANN202
        out = real(con, rid, names)
        seen.append(out[0])
        return out

    monkeypatch.setattr(run_cache, "load", spy)
    monkeypatch.setattr(run_cache, "MIN_SECONDS", 0.0)  # these runs are small: cache them anyway
    # these tests are about the tables: a whole report kept beside them (analysis/
    # report_cache.py, tests/test_report_cache.py) would be read instead of them
    monkeypatch.setattr(report_cache, "load", lambda con, rid, baseline=None: (None, ""))
    return seen


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    return generate(tmp_path / "g.duckdb")


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return uncached_report(tmp_path_factory)


def test_a_real_run_read_back_gives_the_report_computed_without_the_cache(
    tmp_path, monkeypatch, loads
):
    db = tmp_path / "s.duckdb"
    with store.connect(db) as con:
        store.ingest(con, "gloo", sorted(GLOO.glob("rank*.pt.trace.json.gz")))
    uncached = report(db, "gloo", monkeypatch, cache=False)
    assert entries(db) == []  # the variable turns it off: nothing written
    first = report(db, "gloo", monkeypatch)  # computes and writes the entry
    assert len(entries(db)) == 1 and loads[-1] == []
    again = report(db, "gloo", monkeypatch)  # reads it
    assert sorted(loads[-1]) == KEPT
    assert first == uncached and again == uncached
    # the straggler the generator made (ground_truth.json) is named from the cached tables too
    truth = json.loads((GLOO / "ground_truth.json").read_text())
    flagged = [r["rank"] for r in again["stragglers"]["ranks"] if r.get("flagged")]
    assert flagged == [truth["straggler_rank"]]


def test_a_file_ingested_into_the_run_makes_its_entry_stale(tmp_path, monkeypatch, loads):
    db = tmp_path / "s.duckdb"
    files = sorted(GLOO.glob("rank*.pt.trace.json.gz"))
    with store.connect(db) as con:
        store.ingest(con, "gloo", files[:3])
    three = report(db, "gloo", monkeypatch)
    old = entries(db)
    with store.connect(db) as con:
        store.ingest(con, "gloo", files[3:])  # rank 3 joins the run
    four = report(db, "gloo", monkeypatch)
    assert loads[-1] == []  # not read from the three-rank entry
    assert four == report(db, "gloo", monkeypatch, cache=False)
    assert three["run_info"]["n_ranks"] == 3 and four["run_info"]["n_ranks"] == 4
    assert len(entries(db)) == 1 and entries(db) != old  # the stale entry is gone


def test_rows_changed_without_a_file_change_the_fingerprint(generated, monkeypatch, loads):
    report(generated, "a", monkeypatch)
    with store.connect(generated) as con:
        rid = run_id(con, "a")
        before = run_cache.fingerprint(con, rid)
        con.execute("DELETE FROM steps WHERE run_id = ? AND step = 2 AND rank = 0", [rid])
        assert run_cache.fingerprint(con, rid) != before
    changed = report(generated, "a", monkeypatch)
    assert loads[-1] == []
    assert changed == report(generated, "a", monkeypatch, cache=False)


def test_the_code_is_part_of_the_fingerprint(generated, monkeypatch):
    with store.connect(generated, read_only=True) as con:
        before = run_cache.fingerprint(con, 1)
        monkeypatch.setattr(run_cache, "_code_digest", lambda: "other code")
        assert run_cache.fingerprint(con, 1) != before


@pytest.mark.parametrize("damage", ["truncated table", "types", "manifest", "missing table"])
def test_a_damaged_entry_is_not_used(generated, monkeypatch, loads, damage, uncached):
    report(generated, "a", monkeypatch)
    (entry,) = entries(generated)
    manifest = json.loads((entry / "manifest.json").read_text())
    if damage == "truncated table":
        path = entry / "collective_ranks.parquet"
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "types":
        manifest["tables"]["run_summary"][0][1] += "[]"  # a list of what it was
        (entry / "manifest.json").write_text(json.dumps(manifest))
    elif damage == "manifest":
        (entry / "manifest.json").write_text("{not json")
    else:
        (entry / "step_windows.parquet").unlink()
    assert report(generated, "a", monkeypatch) == uncached
    assert loads[-1] == []
    with store.connect(generated, read_only=True) as con:  # no table of the failed load is left
        left = con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0]
    assert left == 0


def test_a_cache_that_cannot_be_written_is_not_used(generated, monkeypatch, loads, uncached):
    Path(f"{generated}.cache").write_text("a file where the directory would be")
    assert report(generated, "a", monkeypatch) == uncached
    assert loads[-1] == []


def test_no_cache_for_a_store_in_memory_or_when_turned_off(generated, monkeypatch):
    import duckdb

    assert run_cache.directory(duckdb.connect()) is None
    with store.connect(generated, read_only=True) as con:
        assert run_cache.directory(con) == Path(f"{generated}.cache")
        monkeypatch.setenv(run_cache.ENV, "0")
        assert run_cache.directory(con) is None


def test_only_the_most_recently_used_entries_are_kept(tmp_path, monkeypatch, loads):
    monkeypatch.setattr(run_cache, "KEEP", 2)
    db = small_runs(tmp_path / "k.duckdb")
    for name in "abc":
        report(db, name, monkeypatch)
    kept = {p.name.split("-")[0] for p in entries(db)}
    assert kept == {"run2", "run3"}


def test_entries_beyond_the_byte_budget_are_removed_oldest_first(tmp_path, monkeypatch, loads):
    db = small_runs(tmp_path / "b.duckdb")
    report(db, "a", monkeypatch)
    (first,) = entries(db)
    size = sum(f.stat().st_size for f in first.iterdir())
    # room for two entries of this size, not three (the runs are alike, so are their entries)
    monkeypatch.setattr(run_cache, "BUDGET", int(2.5 * size))
    for name in "bc":
        report(db, name, monkeypatch)
    kept = {p.name.split("-")[0] for p in entries(db)}
    assert kept == {"run2", "run3"}


def test_small_runs_are_not_written(generated, monkeypatch):
    monkeypatch.setattr(run_cache, "MIN_SECONDS", 3600.0)
    report(generated, "a", monkeypatch)
    assert entries(generated) == []


def test_ingest_prepares_the_run_so_that_its_first_report_reads_it(tmp_path, monkeypatch, loads):
    from commwall.cli.main import main

    monkeypatch.setattr(run_cache, "MIN_SECONDS", 3600.0)  # the ingest keeps them however fast
    db = tmp_path / "i.duckdb"
    files = [str(p) for p in sorted(GLOO.glob("rank*.pt.trace.json.gz"))]
    assert main(["ingest", *files, "--db", str(db), "--run", "g", "--quiet"]) == 0
    assert len(entries(db)) == 1 and loads == [[]]  # computed once, by the ingest, and kept
    report(db, "g", monkeypatch)
    assert sorted(loads[-1]) == KEPT  # the first report reads them back
    assert main(["ingest", *files, "--db", str(tmp_path / "n.duckdb"), "--no-prepare"]) == 0
    assert entries(tmp_path / "n.duckdb") == [] and len(loads) == 2  # not even computed


def test_a_run_that_cannot_be_prepared_is_still_ingested(tmp_path, monkeypatch, capsys):
    from commwall.analysis.api import Run
    from commwall.cli.main import main

    def fail(self):  # noqa: ANN001, ANN202
        raise RuntimeError("out of memory")

    monkeypatch.setattr(Run, "keep", fail)
    db = tmp_path / "f.duckdb"
    files = [str(p) for p in sorted(GLOO.glob("rank*.pt.trace.json.gz"))]
    assert main(["ingest", *files, "--db", str(db), "--run", "g", "--quiet"]) == 0
    assert "analysis tables not prepared (out of memory)" in capsys.readouterr().err
    assert report(db, "g", monkeypatch)["run_info"]["n_ranks"] == 4


def test_a_writer_killed_midway_leaves_nothing_that_lasts(generated, monkeypatch, loads, uncached):
    import os

    base = Path(f"{generated}.cache")
    old, new = base / ".tmp-killed-long-ago", base / ".tmp-writing-now"
    for p in (old, new):
        p.mkdir(parents=True)
        (p / "collective_ranks.parquet").write_bytes(b"PAR1 half written")
    os.utime(old, (0, 0))
    report(generated, "a", monkeypatch)  # writes its entry, and prunes
    assert not old.exists() and new.exists()  # another writer may still be at work on `new`
    assert len(entries(generated)) == 1 and report(generated, "a", monkeypatch) == uncached
    assert sorted(loads[-1]) == KEPT  # the half-written ones were not read


def test_a_run_in_parquet_shards_is_kept_and_its_shards_are_in_the_fingerprint(
    tmp_path, monkeypatch, loads
):
    from commwall.cli.main import main

    db = tmp_path / "d.duckdb"
    files = [str(p) for p in sorted(GLOO.glob("rank*.pt.trace.json.gz"))]
    argv = ["ingest", *files, "--db", str(db), "--run", "g", "--quiet"]
    assert main([*argv, "--dataset", str(tmp_path / "shards")]) == 0
    assert report(db, "g", monkeypatch) == report(db, "g", monkeypatch, cache=False)
    assert sorted(loads[1]) == KEPT  # the report read what the ingest kept
    with store.connect(db) as con:
        assert con.execute("SELECT count(*) FROM shards").fetchone()[0] > 0
        before = run_cache.fingerprint(load_modules(con), 1)
        con.execute("UPDATE shards SET size_bytes = size_bytes + 1")  # a shard rewritten
        assert run_cache.fingerprint(con, 1) != before


@pytest.mark.parametrize("manifest", ["[1, 2]", '{"format": 1, "fingerprint": null}', "null"])
def test_a_foreign_manifest_is_not_read(generated, monkeypatch, loads, manifest, uncached):
    report(generated, "a", monkeypatch)
    (entry,) = entries(generated)
    (entry / "manifest.json").write_text(manifest)
    assert report(generated, "a", monkeypatch) == uncached and loads[-1] == []


def test_a_store_whose_run_cannot_be_fingerprinted_is_reported_without_the_cache(
    generated, monkeypatch, loads
):
    Path(f"{generated}.cache").mkdir()
    with store.connect(generated) as con:
        con.execute("DROP TABLE files")  # a store this commwall did not write
    uncached = report(generated, "a", monkeypatch, cache=False)
    assert uncached["summary"] is not None  # the run itself is still there to report
    assert report(generated, "a", monkeypatch) == uncached
    assert loads[-1] == [] and entries(generated) == []
