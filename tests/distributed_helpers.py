"""Helpers of the distributed tests: ingest the same files locally and on a cluster, read the
report back, and a parse hook that kills its worker. Functions here also run on Dask workers
(importable there: worker processes inherit the test session's sys.path)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import duckdb

from commwall.analysis import db
from commwall.analysis.report.build import build_report
from commwall.ingest import store
from commwall.ingest.exec import cluster, distributed
from commwall.ingest.formats import registry as formats
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed


def report_of(db_path: Path, run: str) -> dict:
    """The run's full report, from a fresh analysis connection."""
    con = db.open_db(db_path)
    try:
        return build_report(con, run)
    finally:
        con.close()


def ingest_local(db_path: Path, run: str, paths: list[Path]) -> store.IngestSummary:
    """The embedded default: parse in process, rows into the database file."""
    con = store.connect(db_path)
    try:
        return store.ingest(con, run, paths)
    finally:
        con.close()


def ingest_cluster(
    db_path: Path, run: str, paths: list[Path], dataset: Path | str, client, **kw
) -> store.IngestSummary:
    """Parse on the cluster into Parquet shards under `dataset`, register in `db_path`."""
    con = store.connect(db_path)
    try:
        return distributed.ingest(con, run, paths, dataset, executor=cluster.executor(client), **kw)
    finally:
        con.close()


def parquet_files(root: Path) -> list[Path]:
    """Complete shards under a dataset directory (temporary names excluded)."""
    return sorted(root.rglob("*.parquet"))


def listed_shards(db_path: Path) -> list[str]:
    """The shards the store's manifest lists."""
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT path FROM shards").fetchall())
    finally:
        con.close()


def only_listed_on_disk(db_path: Path, root: Path) -> list[str]:
    """The manifest, checked to be exactly the shards under `root` (nothing left behind)."""
    listed = listed_shards(db_path)
    assert listed and listed == [str(p) for p in parquet_files(root)]
    return listed


class KillOnce:
    """A parse hook that SIGKILLs its own worker process on its first call (whichever worker
    gets there first: a marker file makes it once per session), then parses normally."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __call__(self, path: Path, opts: ParseOptions) -> Parsed:
        from distributed import get_worker

        get_worker()  # never kill anything but a Dask worker (raises ValueError elsewhere)
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return formats.parse(path, opts)
        os.write(fd, f"{os.getpid()} {path.name}".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


CONTENT_TABLES = ("ranks", "process_groups", "steps", "activities", "collectives")


def contents(db_path: Path, run: str) -> dict[str, list[tuple]]:
    """Every row of the run's tables as analysis sees them (shards included), without the
    ids, sorted: equal contents mean equal reports, at a fraction of a report's cost."""
    con = db.open_db(db_path)
    try:
        rid = db.run_id(con, run)
        return {
            t: con.execute(
                f"SELECT * EXCLUDE (run_id, file_id) FROM {t} WHERE run_id = ? ORDER BY ALL", [rid]
            ).fetchall()
            for t in CONTENT_TABLES
        }
    finally:
        con.close()
