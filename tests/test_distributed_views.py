"""Analysis over Parquet shards (analysis/shards.py): temp views under the tables' names, same
columns, per-run pruning, fsspec URLs, and stores without shards left as they were."""

from __future__ import annotations

import shutil

import duckdb
import pytest
from conftest import DLRM, SAMPLES
from distributed_helpers import contents, ingest_local

from commwall.analysis import db
from commwall.analysis.shards import attach
from commwall.ingest import store
from commwall.ingest.exec import distributed
from commwall.ingest.schema import ddl

GLOO = SAMPLES / "gloo_4rank_compute"
SLEEP = SAMPLES / "gloo_4rank_sleep"
SHARDED = ["activities", "collectives"]


def temp_views(con):
    return sorted(
        r[0]
        for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal"
        ).fetchall()
    )


def sharded(db_path, run, paths, dataset):
    con = store.connect(db_path)
    try:
        return distributed.ingest(con, run, paths, dataset)  # in process: no Dask
    finally:
        con.close()


pytest_plugins = ["distributed_fixtures"]


def test_store_without_shards_gets_no_views(local_store, tmp_path):
    con = db.open_db(local_store.path)
    assert temp_views(con) == [] and attach(con) == []
    con.close()
    # a store made before the shards table existed opens as before
    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute(ddl())
    con.execute("DROP TABLE shards")
    con.close()
    con = db.open_db(old)
    assert temp_views(con) == []
    assert con.execute("SELECT count(*) FROM activities").fetchone() == (0,)


def test_views_have_the_tables_columns(local_store, tmp_path):
    store_path = tmp_path / "s.duckdb"
    sharded(store_path, "dlrm_8rank", sorted(DLRM.glob("*.gz")), tmp_path / "ds")
    con = db.open_db(store_path)
    assert temp_views(con) == SHARDED
    plain = duckdb.connect(str(local_store.path), read_only=True)
    for t in SHARDED:
        cols = "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND {} ORDER BY column_index"  # fmt: skip
        view = con.execute(cols.format("database_name = 'temp'"), [t]).fetchall()
        assert view == plain.execute(cols.format("NOT internal"), [t]).fetchall()


def test_runs_are_pruned_and_mixed_with_local_rows(local_store, tmp_path):
    """Two sharded runs and one embedded run in a store: each reads as its local twin, and a
    query of one run never opens the other run's shards (deleted here to prove it)."""
    store_path = tmp_path / "s.duckdb"
    sharded(store_path, "dlrm_8rank", sorted(DLRM.glob("*.gz")), tmp_path / "ds")
    sharded(store_path, "gloo_4rank_compute", sorted(GLOO.glob("*.gz")), tmp_path / "ds")
    ingest_local(store_path, "gloo_4rank_sleep", sorted(SLEEP.glob("*.gz")))
    shutil.rmtree(tmp_path / "ds" / "run=gloo_4rank_compute")
    for run in ("dlrm_8rank", "gloo_4rank_sleep"):
        assert contents(store_path, run) == local_store.contents(run)
    with pytest.raises(duckdb.InvalidInputException, match="activities shards unreadable"):
        contents(store_path, "gloo_4rank_compute")  # a broken run fails loudly, and alone
    con = store.connect(store_path)
    assert store.delete_run(con, "gloo_4rank_compute")
    assert con.execute("SELECT DISTINCT run_id FROM shards").fetchall() == [
        (db.run_id(con, "dlrm_8rank"),)
    ]
    con.close()


def test_fsspec_url_dataset(local_store, tmp_path):
    """Shards under a URL DuckDB cannot read by itself (memory://) go through fsspec."""
    store_path = tmp_path / "s.duckdb"
    paths = sorted(DLRM.glob("*.gz"))
    assert sharded(store_path, "dlrm_8rank", paths, "memory://commwall-test").committed
    con = duckdb.connect(str(store_path), read_only=True)
    urls = [r[0] for r in con.execute("SELECT path FROM shards").fetchall()]
    con.close()
    assert len(urls) == 2 and all(u.startswith("memory://") for u in urls)
    assert contents(store_path, "dlrm_8rank") == local_store.contents("dlrm_8rank")
