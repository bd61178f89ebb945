"""Faults on a real LocalCluster: a bad file fails alone (--keep-going) or stops the run; a worker
killed mid-ingest is retried; an interrupted or killed driver leaves no half run behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest
from conftest import DLRM, ROOT
from distributed_helpers import (
    KillOnce,
    contents,
    ingest_cluster,
    listed_shards,
    only_listed_on_disk,
    parquet_files,
    report_of,
)

from commwall.ingest.errors import IngestError
from commwall.ingest.exec import shard_writer

pytest_plugins = ["distributed_fixtures"]

GOOD = sorted(DLRM.glob("*.gz"))


def with_bad_file(tmp_path):
    """The DLRM files plus a truncated gzip claiming to be rank 8."""
    bad = tmp_path / "worker8_truncated.pt.trace.json.gz"
    bad.write_bytes(GOOD[0].read_bytes()[:20000])
    return [*GOOD[:4], bad, *GOOD[4:]], bad


def runs_in(db_path):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute("SELECT name FROM runs").fetchall(), con.execute(
            "SELECT count(*) FROM shards"
        ).fetchone()[0]
    finally:
        con.close()


def test_bad_file_fails_alone_with_keep_going(tmp_path, dask_client, local_store):
    paths, bad = with_bad_file(tmp_path)
    db_path = tmp_path / "s.duckdb"
    summary = ingest_cluster(
        db_path, "dlrm_8rank", paths, tmp_path / "ds", dask_client, keep_going=True
    )
    assert summary.committed
    assert [f.path for f in summary.failed] == [str(bad)]
    assert str(bad) in summary.failed[0].error and "truncated gzip" in summary.failed[0].error
    assert sum(f.status == "ingested" for f in summary.files) == len(GOOD)
    assert contents(db_path, "dlrm_8rank") == local_store.contents("dlrm_8rank")
    only_listed_on_disk(db_path, tmp_path / "ds")  # the bad file's shards are gone


def test_bad_file_without_keep_going_stores_nothing(tmp_path, dask_client):
    paths, bad = with_bad_file(tmp_path)
    db_path = tmp_path / "s.duckdb"
    with pytest.raises(IngestError, match="truncated gzip") as e:
        ingest_cluster(db_path, "dlrm_8rank", paths, tmp_path / "ds", dask_client)
    assert e.value.path == str(bad)
    assert runs_in(db_path) == ([], 0)


def test_killed_worker_is_retried_and_the_run_completes(
    tmp_path, dask_client, local_store, monkeypatch
):
    monkeypatch.setattr(shard_writer, "MERGE_BYTES", 0)  # keep one shard per (file, table)
    marker = tmp_path / "killed"
    db_path = tmp_path / "s.duckdb"
    summary = ingest_cluster(
        db_path, "dlrm_8rank", GOOD, tmp_path / "ds", dask_client, parse=KillOnce(marker)
    )
    assert marker.exists(), "no worker was killed"
    pid = int(marker.read_text().split()[0])
    assert pid != os.getpid()
    assert [f.status for f in summary.files] == ["ingested"] * len(GOOD)
    assert len(only_listed_on_disk(db_path, tmp_path / "ds")) == 2 * len(GOOD)
    assert report_of(db_path, "dlrm_8rank") == local_store.report("dlrm_8rank")


def test_interrupted_driver_leaves_no_run(tmp_path, dask_client, local_store):
    db_path = tmp_path / "s.duckdb"
    seen = []

    def interrupt(path, result):
        seen.append(path)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest_cluster(db_path, "dlrm_8rank", GOOD, tmp_path / "ds", dask_client, on_file=interrupt)
    assert runs_in(db_path) == ([], 0)
    # the same command again lands the whole run
    summary = ingest_cluster(db_path, "dlrm_8rank", GOOD, tmp_path / "ds", dask_client)
    assert summary.committed and contents(db_path, "dlrm_8rank") == local_store.contents(
        "dlrm_8rank"
    )


@pytest.mark.slow
def test_killed_driver_leaves_no_half_run(tmp_path, dask_client, generated):
    """SIGKILL `commwall ingest --scheduler` once its first shards exist: the store has no trace
    of the run (shards already written are in no manifest), and ingesting again completes."""
    db_path, ds = tmp_path / "s.duckdb", tmp_path / "ds"
    cmd = [
        sys.executable, "-m", "commwall", "ingest", str(generated.paths[0].parent), "--db",
        str(db_path), "--run", "gen", "--scheduler", dask_client.cluster.scheduler_address,
        "--dataset", str(ds), "--quiet",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (ds.exists() and parquet_files(ds)) and proc.poll() is None:
        assert time.monotonic() < deadline, "no shard appeared"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "the ingest finished before it could be killed"
    assert parquet_files(ds), "the driver was killed before any shard was written"
    assert runs_in(db_path) == ([], 0)
    summary = ingest_cluster(db_path, "gen", generated.paths, ds, dask_client)
    assert sum(f.status == "ingested" for f in summary.files) == len(generated.paths)
    listed = listed_shards(db_path)
    assert runs_in(db_path) == ([("gen",)], len(listed))
    assert set(listed) < {str(p) for p in parquet_files(ds)}  # + the killed run's orphans
    assert contents(db_path, "gen") == generated.local.contents("gen")
