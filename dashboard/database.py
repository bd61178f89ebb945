"""The server's store: short-lived connections and one writer at a time per process.

DuckDB lets one process hold a file read-write while other processes cannot open it at all, and
refuses a read-only and a read-write connection to the same file in one process. The dashboard
therefore opens the store read-write for every operation and closes it right after (so that
`commwall ingest` from a shell can write between page loads), and serialises its own writes
with a process-wide lock, so that two browser sessions uploading at once both land intact.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from analysis import db
from ingest import store

DB_ENV = "COMMWALL_DB"
UPLOAD_ENV = "COMMWALL_UPLOAD_DIR"


def db_path() -> Path:
    """The store this server shows (set by `commwall serve` in COMMWALL_DB)."""
    value = os.environ.get(DB_ENV)
    if not value:
        raise RuntimeError(
            f"{DB_ENV} is not set: start the dashboard with `commwall serve --db FILE`"
        )
    return Path(value).resolve()


def upload_root() -> Path:
    """Where uploads are saved: COMMWALL_UPLOAD_DIR, else `<store>-uploads/` beside the store."""
    value = os.environ.get(UPLOAD_ENV)
    p = db_path()
    return Path(value).resolve() if value else p.with_name(p.stem + "-uploads")


_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


class StoreBusy(RuntimeError):
    """Another process holds the store file (most likely a `commwall ingest` in progress)."""


def _lock_for(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


def _is_lock_conflict(e: BaseException | None) -> bool:
    return isinstance(e, duckdb.IOException) and "lock" in str(e).lower()


def _busy(path: Path, e: BaseException) -> StoreBusy:
    holder = store.lock_holder(e) or "another process"
    return StoreBusy(
        f"The store {path.name} is in use by {holder} (probably a `commwall ingest` that is "
        "still running). Try again when it has finished."
    )


class StoreFile:
    """One DuckDB store as the dashboard uses it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self.lock = _lock_for(self.path)

    def version(self) -> tuple:
        """Changes whenever anything is written to the store (file and WAL stat)."""
        out: list = []
        for p in (self.path, self.path.with_name(self.path.name + ".wal")):
            try:
                s = os.stat(p)
                out += [s.st_mtime_ns, s.st_size]
            except FileNotFoundError:
                out += [None, None]
        return tuple(out)

    def ensure(self) -> None:
        """Create the store (schema included) when it does not exist yet."""
        with self.writing():
            pass

    @contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection with the analysis macros loaded, closed on exit."""
        try:
            con = duckdb.connect(str(self.path))
        except duckdb.IOException as e:
            if _is_lock_conflict(e):
                raise _busy(self.path, e) from e
            raise
        try:
            yield db.load_modules(con)
        finally:
            con.close()

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A writable connection, held under this process's write lock."""
        with self.lock:
            try:
                con = store.connect(self.path)
            except store.StoreError as e:
                if (cause := e.__cause__) is not None and _is_lock_conflict(cause):
                    raise _busy(self.path, cause) from e
                raise
            try:
                yield con
            finally:
                con.close()
