"""The worker tasks (ingest/exec/shard_writer.py) on their own: layout, failures as data, merging."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from conftest import DLRM
from distributed_helpers import contents, only_listed_on_disk

from commwall.ingest import store
from commwall.ingest.exec import distributed, shard_writer
from commwall.ingest.exec.shard_writer import Shard, ShardJob, merge_groups, parse_to_shards
from commwall.ingest.sources import sha256_of

pytest_plugins = ["distributed_fixtures"]

GOOD = sorted(DLRM.glob("*.gz"))


def job(path, tmp_path, **kw):
    return ShardJob(str(path), "my run/1", 3, 42, shard_writer.dataset_url(tmp_path / "ds"), **kw)


def test_a_file_becomes_one_shard_per_table_and_rank(tmp_path):
    res = parse_to_shards(job(GOOD[0], tmp_path))
    assert res.status == "parsed" and res.sha256 == sha256_of(GOOD[0])
    assert {s.table for s in res.shards} == set(shard_writer.SHARDED)
    assert set(res.tables) >= {"ranks", "steps"} and not set(res.tables) & {"activities"}
    for s in res.shards:
        assert s.rank == 0
        assert s.path == str(
            tmp_path / "ds" / "run=my_run_1" / f"table={s.table}" / "rank=0"
            / f"42-{res.sha256[:16]}.parquet"
        )  # fmt: skip
        t = pq.read_table(s.path)
        assert t.num_rows == s.n_rows > 0
        assert t.column_names[:3] == ["run_id", "file_id", "rank"]
        assert set(t.column("run_id").to_pylist()) == {3}
        assert set(t.column("file_id").to_pylist()) == {42}
    assert not list((tmp_path / "ds").rglob("*.tmp-*"))  # written under a temporary name


def test_bad_and_known_files_come_back_as_data(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X"')
    res = parse_to_shards(job(bad, tmp_path))
    assert res.status == "failed" and "not valid JSON" in res.problem and not res.shards
    res = parse_to_shards(job(GOOD[0], tmp_path), known=frozenset({sha256_of(GOOD[0])}))
    assert res.status == "skipped" and not res.shards and not (tmp_path / "ds").exists()


def test_merge_groups_cut_by_size_and_count_in_rank_order(monkeypatch):
    shards = [Shard("collectives", r, f"p{r}", 1, 10) for r in (3, 0, 2, 1, 4)]
    groups = merge_groups(shards, limit=25)
    assert [[s.rank for s in g] for g in groups] == [[0, 1], [2, 3], [4]]
    assert [len(g) for g in merge_groups(shards, limit=0)] == [1] * 5
    assert [len(g) for g in merge_groups(shards)] == [5]
    monkeypatch.setattr(shard_writer, "MERGE_PARTS", 2)
    assert [len(g) for g in merge_groups(shards)] == [2, 2, 1]
    monkeypatch.setattr(shard_writer, "MERGE_SMALL", 10)  # big enough already: left alone
    assert [len(g) for g in merge_groups(shards)] == [1] * 5
    big = Shard("collectives", 2, "big", 1, 30)
    monkeypatch.setattr(shard_writer, "MERGE_SMALL", 30)
    monkeypatch.setattr(shard_writer, "MERGE_PARTS", 512)
    groups = merge_groups([*shards[:2], big, *shards[3:]])
    assert [[s.rank for s in g] for g in groups] == [[0, 1], [2], [3, 4]]


@pytest.mark.parametrize("merge_bytes,n_shards", [(0, 16), (60_000, None)])
def test_merged_or_not_the_rows_are_the_same(
    tmp_path, monkeypatch, local_store, merge_bytes, n_shards
):
    monkeypatch.setattr(shard_writer, "MERGE_BYTES", merge_bytes)
    db_path = tmp_path / "s.duckdb"
    con = store.connect(db_path)
    distributed.ingest(con, "dlrm_8rank", GOOD, tmp_path / "ds")
    merged = con.execute(
        "SELECT count(*) FROM shards WHERE file_id IS NULL AND rank IS NULL"
    ).fetchone()[0]
    con.close()
    listed = only_listed_on_disk(db_path, tmp_path / "ds")  # merged parts were deleted
    if n_shards:
        assert len(listed) == n_shards and merged == 0
    else:
        assert 2 < len(listed) < 16 and merged > 0
    assert contents(db_path, "dlrm_8rank") == local_store.contents("dlrm_8rank")


def test_adding_to_a_run_skips_known_content_and_refuses_known_ranks(tmp_path, local_store):
    db_path, ds = tmp_path / "s.duckdb", tmp_path / "ds"
    con = store.connect(db_path)
    first = distributed.ingest(con, "dlrm_8rank", GOOD[:4], ds)
    clash = sorted((DLRM.parent / "gloo_4rank_compute").glob("rank0.*"))
    second = distributed.ingest(con, "dlrm_8rank", GOOD + clash, ds, keep_going=True)
    con.close()
    assert [f.status for f in first.files] == ["ingested"] * 4
    assert [f.status for f in second.files] == ["skipped"] * 4 + ["ingested"] * 4 + ["failed"]
    assert "rank 0 is already in this run" in second.files[-1].error
    assert contents(db_path, "dlrm_8rank") == local_store.contents("dlrm_8rank")
    only_listed_on_disk(db_path, ds)
