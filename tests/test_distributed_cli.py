"""`commwall ingest --workers/--scheduler/--dataset`: the same rows as the embedded default
(hence the same report: test_distributed_same_answers.py), failures in the summary, progress over
files, and no Dask import unless asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import DLRM, ROOT
from distributed_helpers import contents, only_listed_on_disk

from commwall.cli.main import main

pytest_plugins = ["distributed_fixtures"]

GLOB = str(DLRM / "*.gz")


@pytest.fixture
def local_rows(local_store):
    """The DLRM run's rows, ingested the embedded way."""
    return local_store.contents("dlrm_8rank")


def test_scheduler_gives_the_same_rows(tmp_path, dask_client, local_rows, capsys):
    db, ds = tmp_path / "s.duckdb", tmp_path / "ds"
    addr = dask_client.cluster.scheduler_address
    argv = ["ingest", GLOB, "--db", str(db), "--run", "dlrm", "--scheduler", addr]
    assert main([*argv, "--dataset", str(ds)]) == 0
    err = capsys.readouterr().err
    assert "8 file(s) ingested, 0 already present, 0 failed" in err
    assert "8/8 files" in err  # the progress bar counts files as the cluster finishes them
    assert len(only_listed_on_disk(db, ds)) == 2  # merged: one shard per table
    assert contents(db, "dlrm") == local_rows
    # ingesting again is a no-op, as with the embedded default
    assert main([*argv, "--dataset", str(ds), "--quiet"]) == 0
    assert "0 file(s) ingested, 8 already present" in capsys.readouterr().err


def test_workers_start_a_local_cluster_and_keep_going(tmp_path, local_rows, capsys):
    bad = tmp_path / "in" / "broken_rank9.json"
    bad.parent.mkdir()
    bad.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X"')
    db = tmp_path / "s.duckdb"
    argv = ["ingest", GLOB, str(bad), "--db", str(db), "--run", "dlrm", "--workers", "2"]
    assert main([*argv, "--keep-going", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "8 file(s) ingested, 0 already present, 1 failed" in err
    assert f"failed: {bad}: " in err
    shards = tmp_path / "s.duckdb.shards"  # the default dataset, beside the store
    assert len(only_listed_on_disk(db, shards)) == 2
    assert contents(db, "dlrm") == local_rows


def test_dataset_alone_shards_in_process(tmp_path, local_rows, capsys):
    db = tmp_path / "s.duckdb"
    argv = ["ingest", GLOB, "--db", str(db), "--run", "dlrm", "--dataset", str(tmp_path / "ds")]
    assert main([*argv, "--quiet"]) == 0
    assert len(only_listed_on_disk(db, tmp_path / "ds")) == 2
    assert contents(db, "dlrm") == local_rows


@pytest.mark.parametrize("mode", ["embedded", "scheduler"])
def test_dask_is_imported_only_for_a_cluster(tmp_path, mode, request):
    """The default and --dataset alone never import Dask; --scheduler does (the check works)."""
    one = str(sorted(DLRM.glob("*.gz"))[0])
    argvs = [
        ["ingest", one, "--db", str(tmp_path / "a.duckdb")],
        ["ingest", one, "--db", str(tmp_path / "b.duckdb"), "--dataset", str(tmp_path / "ds")],
    ]
    if mode == "scheduler":
        addr = request.getfixturevalue("dask_client").cluster.scheduler_address
        argvs = [[*argvs[1], "--scheduler", addr]]
    code = (
        "import sys; from commwall.cli.main import main; "
        f"assert all(main(a + ['--quiet']) == 0 for a in {argvs!r}); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("['dask', 'distributed']" if mode == "scheduler" else "[]")
