"""Faults: `kill -9` during an ingest never damages the store nor other runs; no worker outlives a
killed command; temporary files of a killed process are reclaimed. (The long run, with 100 and
more kills, is `benchmarks/fuzz.py --kills N`.)"""

from __future__ import annotations

import gzip
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from commwall.ingest.formats.nsys import source as nsys_source
from tests.robust_support import (
    ROOT,
    SAMPLES,
    FailsOn,
    cli,
    descendants_alive,
    kill_trial,
    snapshot,
)

pytest_plugins = ["distributed_fixtures"]

DLRM = sorted((SAMPLES / "dlrm_8rank").glob("*.json.gz"))
GLOO = sorted((SAMPLES / "gloo_4rank_sleep").glob("rank*.json*"))
BIG = ROOT / "tests" / "data" / "kineto" / "hta_df_index_resolver_rank1of2"
NSYS = ROOT / "tests" / "data" / "nsys" / "nvfuser_1gpu"


def test_kill_9_during_ingest_damages_nothing(tmp_path: Path) -> None:
    db = tmp_path / "k.duckdb"
    assert subprocess.run(cli("ingest", *map(str, GLOO), "--db", str(db), "--run", "other",
                              "--quiet"), cwd=ROOT).returncode == 0  # fmt: skip
    before = snapshot(db, "other")
    rng = random.Random(20)
    for _ in range(3):
        out = kill_trial(db, "victim", DLRM, rng, max_s=2.5)
        assert snapshot(db, "other") == before
        assert out.victim_files in (0, len(DLRM))  # absent or complete, never partial
    done = subprocess.run(cli("ingest", *map(str, DLRM), "--db", str(db), "--run", "victim",
                              "--quiet"), cwd=ROOT)  # fmt: skip
    assert done.returncode == 0
    assert kill_trial(db, "victim", DLRM, rng, 0.0).victim_files == len(DLRM)


def test_no_worker_outlives_a_killed_ingest(tmp_path: Path) -> None:
    # three copies of a 53.7 MB trace parsed by two worker processes (each a second or more)
    files = []
    for i in range(3):
        files.append(tmp_path / f"copy{i}_rank{i}.json.gz")
        shutil.copy(BIG / "df_index_resolver.json.gz", files[-1])
    argv = cli("ingest", *map(str, files), "--db", str(tmp_path / "w.duckdb"), "--quiet",
               "--jobs", "2")  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.DEVNULL, start_new_session=True)
    me = psutil.Process(proc.pid)
    kids: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        kids |= {c.pid for c in me.children(recursive=True)}
        if len(kids) >= 3:  # the forkserver and two workers
            time.sleep(0.3)
            kids |= {c.pid for c in me.children(recursive=True)}
            break
        time.sleep(0.05)
    assert proc.poll() is None and len(kids) >= 3, "no worker processes seen"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert descendants_alive(sorted(kids)) == []


def test_temp_files_of_a_killed_process_are_reclaimed(tmp_path: Path) -> None:
    export = tmp_path / "one.sqlite.gz"
    src = next(NSYS.glob("*.sqlite.gz"))
    shutil.copy(src, export)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    code = (
        "import sys, time; from pathlib import Path; from commwall.ingest.formats.nsys.source import sqlite_file\n"
        f"with sqlite_file(Path({str(export)!r}), 1 << 30) as p:\n"
        "    print(p, flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    unpacked = Path(proc.stdout.readline().strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert unpacked.is_file()  # left behind: the process had no chance to clean up
    assert unpacked.read_bytes()[:16] == gzip.decompress(src.read_bytes())[:16]
    mine = tmp_path / f"{nsys_source.TEMP_PREFIX}{os.getpid()}-live"
    mine.mkdir()  # a directory of a process that is alive stays
    assert nsys_source.reclaim_temp(tmp_path) == [unpacked.parent]
    assert not unpacked.parent.exists() and mine.exists()


@pytest.mark.parametrize("jobs", [1])
def test_a_store_busy_with_another_ingest_is_waited_for(tmp_path: Path, jobs: int) -> None:
    db = tmp_path / "two.duckdb"
    first = subprocess.Popen(cli("ingest", *map(str, DLRM), "--db", str(db), "--run", "a",
                                 "--quiet", "--jobs", str(jobs)), cwd=ROOT)  # fmt: skip
    time.sleep(0.3)
    second = subprocess.run(cli("ingest", *map(str, GLOO), "--db", str(db), "--run", "b",
                                "--quiet"), cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert first.wait(120) == 0
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr
    assert len(snapshot(db, "a")) == len(DLRM) + 1 and len(snapshot(db, "b")) == len(GLOO) + 1


@pytest.mark.parametrize("on_dask", [False, True], ids=["serial", "dask"])
def test_a_parser_bug_in_distributed_ingest_is_an_error_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest, on_dask: bool
) -> None:
    # as in the local path: the bug becomes an IngestError naming the file (logged with its
    # traceback), the run lands whole or not at all, and --keep-going stores the others
    from commwall.ingest import store
    from commwall.ingest.errors import IngestError
    from commwall.ingest.exec import distributed

    kw: dict = {}
    if on_dask:
        from commwall.ingest.exec import cluster

        kw["executor"] = cluster.executor(request.getfixturevalue("dask_client"))
    bad = DLRM[2]
    hook = FailsOn(bad.name)
    con = store.connect(tmp_path / "d.duckdb")
    store.ingest(con, "other", GLOO)
    before = con.execute("SELECT count(*) FROM activities").fetchone()
    caplog.set_level("ERROR", logger="commwall.ingest")
    with pytest.raises(IngestError, match="please report it") as e:
        distributed.ingest(con, "victim", DLRM, tmp_path / "ds", parse=hook, **kw)
    assert e.value.path == str(bad) and "KeyError: 'a parser bug'" in e.value.problem
    assert "Traceback" in caplog.text and "a parser bug" in caplog.text and str(bad) in caplog.text
    assert con.execute("SELECT name FROM runs ORDER BY 1").fetchall() == [("other",)]
    assert con.execute("SELECT count(*) FROM activities").fetchone() == before
    assert con.execute("SELECT count(*) FROM shards").fetchone() == (0,)  # none in any run
    if not on_dask:  # on Dask a task already running when the run failed may still write its
        assert not list((tmp_path / "ds").rglob("*.parquet"))  # shard (docs/scale_out.md)

    summary = distributed.ingest(
        con, "victim", DLRM, tmp_path / "ds", parse=hook, keep_going=True, **kw
    )
    assert [(f.path, f.status) for f in summary.failed] == [(str(bad), "failed")]
    assert "please report it" in (summary.failed[0].error or "")
    ranks = con.execute(
        "SELECT DISTINCT r.rank FROM ranks r JOIN runs USING (run_id) WHERE runs.name = 'victim'"
    ).fetchall()
    # worker2's header, line 70: "distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 8}
    assert sorted(r for (r,) in ranks) == [0, 1, 3, 4, 5, 6, 7]
    con.close()
