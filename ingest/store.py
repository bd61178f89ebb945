"""The DuckDB store: open it (creating the schema), and land parsed files as one transaction.

The lock policy every opening follows is in store_lock.py (its names are re-exported here);
how the files of an ingest are hashed and parsed, in store_parse.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

import commwall.addrspace as addrspace
from commwall.ingest.errors import IngestError, UnknownFormat, shown_name
from commwall.ingest.exec import heap
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.schema import SCHEMA_VERSION, ddl
from commwall.ingest.store_lock import WAIT_S as WAIT_S
from commwall.ingest.store_lock import StoreBusyError as StoreBusyError
from commwall.ingest.store_lock import StoreError as StoreError
from commwall.ingest.store_lock import busy as busy
from commwall.ingest.store_lock import while_held as while_held
from commwall.ingest.store_parse import background, guarded, parse_outcomes


def connect(
    db: str | Path,
    read_only: bool = False,
    wait_s: float = WAIT_S,
    on_wait: Callable[[str], None] | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open (and, when writable, create or check) a commwall store, waiting while another
    process holds it (`while_held`)."""
    try:
        con = while_held(lambda: addrspace.connect(db, read_only), db, wait_s, on_wait)
    except duckdb.Error as e:
        raise StoreError(f"{db}: cannot open database ({e})") from e
    if not read_only:
        con.execute(ddl())
        con.execute(
            "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
            [str(SCHEMA_VERSION)],
        )
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or int(row[0]) != SCHEMA_VERSION:
        con.close()
        found = None if row is None else row[0]
        raise StoreError(f"{db}: schema version {found}, this commwall reads {SCHEMA_VERSION}")
    return con


@dataclass
class FileResult:
    """What happened to one file: `status` is ingested | skipped (already in the run) |
    unknown_format (of no format commwall reads, found in a directory or an upload: left out,
    `error` says why) | failed."""

    path: str
    status: str
    format: str | None = None
    ranks: list[int] = field(default_factory=list)
    rows: int = 0
    error: str | None = None
    dropped: int = 0  # events left out for values that cannot be right (detail says why)
    dropped_reason: str | None = None
    clamped: int = 0  # events stored with a value changed to fit (e.g. a negative duration)
    clamped_reason: str | None = None

    def count(self, detail: dict) -> None:
        """Take the parser's counts of dropped and clamped events from a file's detail."""
        self.dropped = detail.get("dropped_events", 0)
        self.dropped_reason = detail.get("dropped_reason")
        self.clamped = detail.get("clamped_events", 0)
        self.clamped_reason = detail.get("clamped_reason")


@dataclass
class IngestSummary:
    """The outcome of one ingest command."""

    run: str
    run_id: int | None
    committed: bool
    files: list[FileResult] = field(default_factory=list)

    @property
    def failed(self) -> list[FileResult]:
        """Files that could not be ingested."""
        return [f for f in self.files if f.status == "failed"]

    @property
    def unknown(self) -> list[FileResult]:
        """Files of no known format that were left out (found in a directory or an upload)."""
        return [f for f in self.files if f.status == UNKNOWN_FORMAT]


#: FileResult.status of a file of no known format that was left out.
UNKNOWN_FORMAT = "unknown_format"


def unknown_sentence(files: list[FileResult]) -> str | None:
    """ "skipped 2 files of no known format: ground_truth.json, README.txt", or None."""
    if not files:
        return None
    names = ", ".join(shown_name(Path(f.path).name) for f in files[:8])
    more = f" and {len(files) - 8} more" if len(files) > 8 else ""
    n = len(files)
    return f"skipped {n} file{'s' if n > 1 else ''} of no known format: {names}{more}"


def ensure_run(
    con: duckdb.DuckDBPyConnection, run: str, notes: str | None, new_id: int | None = None
) -> int:
    """The id of run `run`, inserting the run (with id `new_id` when given) if it is new."""
    row = con.execute("SELECT run_id FROM runs WHERE name = ?", [run]).fetchone()
    if row:
        return row[0]
    rid = new_id
    if rid is None:
        rid = _scalar(con, "SELECT nextval('run_id_seq')")
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    con.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", [rid, run, notes, now])
    return rid


def _check_ranks(con: duckdb.DuckDBPyConnection, rid: int, path: Path, parsed: Parsed) -> None:
    new = parsed.ranks()
    if not new:
        return
    clash = con.execute(
        "SELECT r.rank, f.path FROM ranks r LEFT JOIN files f USING (file_id) "
        "WHERE r.run_id = ? AND list_contains(?, r.rank) LIMIT 1",
        [rid, new],
    ).fetchone()
    if clash:
        raise rank_clash(path, clash[0], clash[1])


def rank_clash(path: str | Path, rank: int, source: str | None) -> IngestError:
    """The error for a file bringing a rank that the run already has from file `source`."""
    problem = f"rank {rank} is already in this run (from {source}); use another --run"
    return IngestError(path, problem)


#: Rows in one of DuckDB's row groups (its default). An insert that DuckDB splits across
#: threads leaves a partly filled row group per thread, which the checkpoint then rewrites,
#: leaving the old blocks free in the file: for benchmarks/ingest_e2e.py's 64 rank files
#: (123 k activities each) on two threads the store came out at 214 MB instead of 125 MB and
#: the ingest 3-4 s slower.
ROW_GROUP = 122_880


def _insert(
    con: duckdb.DuckDBPyConnection, rid: int, fid: int, parsed: Parsed, threads: int
) -> None:
    """Add a parsed file's rows, each table on at most `threads` of DuckDB's threads and on no
    more than it has whole row groups for (ROW_GROUP)."""
    heap.give_back()  # what parsing freed, before DuckDB takes its copy of the rows
    for table in list(parsed.tables):
        rows = parsed.tables[table].num_rows
        if rows == 0:
            continue
        con.execute(f"SET threads = {max(1, min(threads, rows // ROW_GROUP))}")
        # DuckDB scans one chunk faster than many; the chunked original is dropped before
        # DuckDB copies the rows, so that a large file's columns are not held twice meanwhile
        parsed_rows = parsed.tables[table] = parsed.tables[table].combine_chunks()
        # read through DuckDB's scan of this frame's variable, not a registered view: a view
        # dropped inside a transaction keeps its Arrow table alive until the transaction ends,
        # and an ingest is one transaction, so every file's rows stayed in memory to the end
        con.execute(
            f"INSERT INTO {table} BY NAME SELECT ? AS run_id, ? AS file_id, * FROM parsed_rows",
            [rid, fid],
        )
        del parsed_rows


def ingest(
    con: duckdb.DuckDBPyConnection,
    run: str,
    paths: list[Path],
    opts: ParseOptions | None = None,
    notes: str | None = None,
    keep_going: bool = False,
    on_file: Callable[[Path, FileResult], None] | None = None,
    parse: Callable[[Path, ParseOptions], Parsed] | None = None,
    skippable: Collection[Path] = (),
    finish: Callable[[duckdb.DuckDBPyConnection, int], None] | None = None,
) -> IngestSummary:
    """Parse `paths` and store them as run `run` (created if new) in one transaction.

    The run lands whole or not at all: on the first bad file everything is rolled back and
    the IngestError re-raised, unless `keep_going`, in which case bad files are recorded in the
    summary and the others land. A file whose sha256 is already in the run is skipped.
    `on_file` is called after each file (for progress bars); `parse` replaces format
    detection (used by distributed ingest, which parses elsewhere). A file of `skippable` (those
    found by walking a directory) that is of no known format (UnknownFormat) is left out and
    listed (`IngestSummary.unknown`), not an error. `finish(con, run_id)` runs last, inside the
    transaction, when the run is about to land (the checks of a capture directory:
    ingest/capture_manifest.py); what it raises rolls the ingest back."""
    opts = opts or ParseOptions()
    skip = set(skippable)
    summary = IngestSummary(run=run, run_id=None, committed=False)
    hasher = ThreadPoolExecutor(1, thread_name_prefix="sha256", initializer=background)
    # DuckDB's thread count is the database's, not the cursor's: other cursors of the same
    # database (the dashboard's) run on what `_insert` sets until the ingest gives it back
    threads = int(_scalar(con, "SELECT current_setting('threads')"))
    con.execute("BEGIN TRANSACTION")
    outcomes = None
    try:
        rid = ensure_run(con, run, notes)
        summary.run_id = rid
        outcomes = parse_outcomes(con, rid, paths, opts, parse, hasher)
        for path, outcome in outcomes:
            result = FileResult(path=str(path), status="ingested")
            try:
                digest, parsed = guarded(path, outcome)
                if parsed is None:
                    result.status = "skipped"
                else:
                    _check_ranks(con, rid, path, parsed)
                    fid = _scalar(con, "SELECT nextval('file_id_seq')")
                    con.execute(
                        "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [
                            fid,
                            rid,
                            str(path),
                            digest,
                            path.stat().st_size,
                            parsed.format,
                            parsed.n_rows,
                            json.dumps(parsed.detail),
                            datetime.now(timezone.utc).replace(tzinfo=None),
                        ],
                    )
                    _insert(con, rid, fid, parsed, threads)
                    result.format, result.ranks, result.rows = (
                        parsed.format,
                        parsed.ranks(),
                        parsed.n_rows,
                    )
                    result.count(parsed.detail)
            except (IngestError, OSError) as e:
                err = e if isinstance(e, IngestError) else IngestError(path, str(e))
                if isinstance(err, UnknownFormat) and path in skip:
                    result.status, result.error = UNKNOWN_FORMAT, err.problem
                elif not keep_going:
                    raise err from e
                else:
                    result.status, result.error = "failed", str(err)
            summary.files.append(result)
            if on_file:
                on_file(path, result)
        if not any(f.status == "ingested" for f in summary.files) and not _run_has_files(con, rid):
            con.execute("ROLLBACK")
            return summary
        if finish is not None:
            finish(con, rid)
        con.execute("COMMIT")
        summary.committed = True
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        with contextlib.suppress(duckdb.Error):  # as the connection had it
            con.execute(f"SET threads = {threads}")
        if outcomes is not None:
            outcomes.close()  # stops worker processes still parsing after a failure
        hasher.shutdown()
    _checkpoint(con)
    return summary


#: DuckDB's buffer pool while it folds a committed ingest into the store file. Left at DuckDB's
#: default (80 % of the machine's memory), benchmarks/ingest_e2e.py's 64-rank job of 3.4 GB
#: peaked at 1,393 MB doing it on closing the store; capped here, 658-671 MB.
CHECKPOINT_MEMORY = "256MB"


def _checkpoint(con: duckdb.DuckDBPyConnection) -> None:
    """Fold what was just committed into the store file now, with DuckDB's buffer pool capped
    at CHECKPOINT_MEMORY unless the connection has a limit of its own (left as it is). Closing
    the store would otherwise do it with the whole default pool. Nothing is lost if it cannot be
    done now (another transaction open): the data is committed, and DuckDB folds it later."""
    try:
        capped = _scalar(con, _MEMORY_LIMIT) == _default_memory_limit()
        if capped:
            con.execute(f"SET memory_limit = '{CHECKPOINT_MEMORY}'")
        try:
            con.execute("CHECKPOINT")
        finally:
            if capped:
                con.execute("RESET memory_limit")
    except duckdb.Error:
        return


_MEMORY_LIMIT = "SELECT value FROM duckdb_settings() WHERE name = 'memory_limit'"


@cache
def _default_memory_limit() -> str:
    """DuckDB's default memory limit here (a share of the machine's memory), as it prints it
    (asked of a database with commwall's thread counts: addrspace.duckdb_config)."""
    with duckdb.connect(config=addrspace.duckdb_config()) as con:
        return str(_scalar(con, _MEMORY_LIMIT))


def _run_has_files(con: duckdb.DuckDBPyConnection, rid: int) -> bool:
    return _scalar(con, "SELECT count(*) FROM files WHERE run_id = ?", [rid]) > 0


def _scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> Any:
    """The value of a query that always returns one row (a count, a sequence's next value)."""
    row = con.execute(sql, params or []).fetchone()
    if row is None:  # pragma: no cover - SQL that always returns one row
        raise RuntimeError(f"no row from {sql}")
    return row[0]


def data_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Tables holding per-run rows (every table with a run_id column, except runs)."""
    rows = con.execute(
        "SELECT DISTINCT table_name FROM information_schema.columns "
        "WHERE column_name = 'run_id' AND table_name <> 'runs' AND table_schema = 'main'"
    ).fetchall()
    return sorted(r[0] for r in rows)


def delete_run(con: duckdb.DuckDBPyConnection, run: str) -> bool:
    """Delete a run and all its rows; False when there is no such run."""
    row = con.execute("SELECT run_id FROM runs WHERE name = ?", [run]).fetchone()
    if not row:
        return False
    con.execute("BEGIN TRANSACTION")
    try:
        for t in data_tables(con):
            con.execute(f"DELETE FROM {t} WHERE run_id = ?", [row[0]])
        con.execute("DELETE FROM runs WHERE run_id = ?", [row[0]])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return True


def rename_run(con: duckdb.DuckDBPyConnection, old: str, new: str) -> bool:
    """Rename a run; False when there is no run `old`."""
    row = con.execute("SELECT run_id FROM runs WHERE name = ?", [old]).fetchone()
    if not row:
        return False
    con.execute("UPDATE runs SET name = ? WHERE run_id = ?", [new, row[0]])
    return True
