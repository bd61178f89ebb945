"""The parsing side of an ingest: for each path, in order, its sha256 and parsed tables.

Files are hashed on a background thread while they parse, or first when the run likely has
them already (same path and size), so that content the run holds is skipped; several files
with enough data between them are parsed by worker processes ahead of the transaction that
stores them (ingest/exec/parallel.py). A parser bug becomes an IngestError naming the file.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import duckdb

from commwall.ingest.errors import IngestError, log_parser_failure, parser_failure
from commwall.ingest.exec import forked, parallel
from commwall.ingest.formats import registry as formats
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.sources import refuse_by_size, sha256_of

Pending = Callable[[], tuple[str, Parsed | None]]


def guarded(path: Path, outcome: Pending) -> tuple[str, Parsed | None]:
    """The outcome of parsing `path`; a parser bug (any exception other than IngestError or
    OSError) becomes an IngestError naming the file, logged with its traceback, so that it
    never takes the command down and `keep_going` still stores the other files."""
    try:
        return outcome()
    except (IngestError, OSError):
        raise
    except Exception as e:
        log_parser_failure(path, e)
        raise parser_failure(path, e) from e


def parse_outcomes(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    paths: list[Path],
    opts: ParseOptions,
    parse: Callable[[Path, ParseOptions], Parsed] | None,
    hasher: ThreadPoolExecutor,
) -> Generator[tuple[Path, Pending], None, None]:
    """Each path, in order, with a call giving (sha256, parsed file or None when run `rid`
    already has the content). Several files with enough data between them (ParseOptions.jobs)
    are parsed by worker processes ahead of the caller; the rest here, one at a time."""
    parse_one = parse or formats.parse

    def one(path: Path) -> Parsed:
        return parse_one(path, opts)

    workers = 1 if parse else parallel.workers_for(paths, opts.jobs, forked.cores())
    known = set(
        con.execute("SELECT path, size_bytes FROM files WHERE run_id = ?", [rid]).fetchall()
    )
    seen = [(str(p), _size(p)) in known for p in paths]
    if workers == 1:
        for p, was in zip(paths, seen, strict=True):
            yield p, partial(_parse_here, con, rid, p, one, hasher, was, opts.max_bytes)
        return
    fresh = [p for p, was in zip(paths, seen, strict=True) if not was]
    ahead = parallel.outcomes(fresh, opts, workers)
    try:
        for p, was in zip(paths, seen, strict=True):
            if was:  # likely a file the run has: hash first, here
                yield p, partial(_parse_here, con, rid, p, one, hasher, True, opts.max_bytes)
            else:
                _, future = next(ahead)
                yield p, partial(lambda f: _settle(con, rid, f.result()), future)
    finally:
        ahead.close()


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _settle(
    con: duckdb.DuckDBPyConnection, rid: int, outcome: parallel.Outcome
) -> tuple[str, Parsed | None]:
    """(sha256, parsed or None) of a hash-and-parse outcome: content the run has is skipped,
    even when the file no longer parses; otherwise a parse error is raised."""
    digest, parsed, error = outcome
    if digest is not None and _has_digest(con, rid, digest):
        return digest, None
    if error is not None:
        raise error
    assert digest is not None  # hash_and_parse gives a digest whenever it gives no error
    return digest, parsed


def _parse_here(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    path: Path,
    parse: Callable[[Path], Parsed],
    hasher: ThreadPoolExecutor,
    seen: bool,
    max_bytes: int,
) -> tuple[str, Parsed | None]:
    """(sha256, parsed file), parsed None when run `rid` already has this content. The hash is
    taken on another thread while the file is parsed, unless `seen` (the run has a file of this
    path and size): then it is likely the same file, and hashing first spares a parse."""
    if seen:
        digest = sha256_of(path, max_bytes)
        return digest, None if _has_digest(con, rid, digest) else parse(path)
    refuse_by_size(path, _size(path) or 0, max_bytes)  # before a byte is hashed or parsed
    pending = hasher.submit(sha256_of, path, max_bytes)
    try:
        parsed, error = parse(path), None
    except IngestError as e:
        parsed, error = None, e
    return _settle(con, rid, (pending.result(), parsed, error))


def background() -> None:
    """Lower this thread's priority (Linux schedules threads apart), so that hashing takes the
    CPU time parsing leaves idle rather than slowing the parse down."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _has_digest(con: duckdb.DuckDBPyConnection, rid: int, digest: str) -> bool:
    sql = "SELECT 1 FROM files WHERE run_id = ? AND sha256 = ?"
    return con.execute(sql, [rid, digest]).fetchone() is not None
