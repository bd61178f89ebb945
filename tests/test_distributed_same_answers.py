"""Same answers: a run ingested locally and through a real LocalCluster (Parquet shards read in
place) gives an identical report, on the real multi-rank sets and on a generated 256-rank run."""

from __future__ import annotations

import duckdb
import pytest
from distributed_fixtures import REAL
from distributed_helpers import contents, ingest_cluster, only_listed_on_disk, report_of

pytest_plugins = ["distributed_fixtures"]

#: Sets whose full report is compared too (gloo_4rank_sleep has the format of gloo_4rank_compute).
REPORTED = ("dlrm_8rank", "gloo_4rank_compute")


def stored_rows(db_path, table):
    """Rows of `table` inside the database file itself (not in shards)."""
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_sets_give_the_same_report(name, tmp_path, dask_client, local_store):
    paths = sorted(REAL[name].glob("*.json.gz"))
    sharded = tmp_path / "sharded.duckdb"
    summary = ingest_cluster(sharded, name, paths, tmp_path / "ds", dask_client)
    assert summary.committed and [f.status for f in summary.files] == ["ingested"] * len(paths)
    # the big tables really live in shards (merged: one per table): the database holds none
    assert stored_rows(sharded, "activities") == stored_rows(sharded, "collectives") == 0
    assert len(only_listed_on_disk(sharded, tmp_path / "ds")) == 2
    assert contents(sharded, name) == local_store.contents(name)
    if name in REPORTED:  # the same rows; the report, through the shard views, on two formats
        dist = report_of(sharded, name)
        assert dist["ranks"] and dist == local_store.report(name)


@pytest.mark.slow
def test_generated_256_rank_run(tmp_path, dask_client, generated):
    sharded = tmp_path / "sharded.duckdb"
    summary = ingest_cluster(sharded, "gen", generated.paths, tmp_path / "ds", dask_client)
    assert sum(f.status == "ingested" for f in summary.files) == 256
    assert stored_rows(sharded, "collectives") == 0
    rows = contents(sharded, "gen")
    assert len(rows["collectives"]) == 256 * len(generated.sim.ops)
    assert len({r[0] for r in rows["collectives"]}) == 256
    assert rows == generated.local.contents("gen")
    dist = report_of(sharded, "gen")
    assert dist == generated.local.report("gen")
    assert dist["stragglers"]["flagged"] == [generated.sim.truth()["straggler_rank"]]
