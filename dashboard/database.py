"""The server's store: short-lived connections and one writer at a time per process.

DuckDB lets one process hold a file read-write while other processes cannot open it at all, and
refuses a read-only and a read-write connection to the same file in one process. The dashboard
therefore opens the store read-write for every operation and closes it right after (so that
`commwall ingest` from a shell can write between page loads), and serialises its own writes
with a process-wide lock, so that two browser sessions uploading at once both land intact.
Every opening waits while another process holds the file, as the CLI's do (ingest.store's
`while_held`: up to COMMWALL_WAIT seconds, set by `commwall serve --wait`), then raises
StoreBusy naming the holder.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

import commwall.addrspace as addrspace
from commwall.analysis import db
from commwall.ingest import store

DB_ENV = "COMMWALL_DB"
UPLOAD_ENV = "COMMWALL_UPLOAD_DIR"
WAIT_ENV = "COMMWALL_WAIT"


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


def wait_s() -> float:
    """How long an opening of the store waits while another process holds it: COMMWALL_WAIT
    seconds (`commwall serve --wait`), else ingest.store.WAIT_S."""
    try:
        value = float(os.environ.get(WAIT_ENV, ""))
    except ValueError:
        return store.WAIT_S
    return value if math.isfinite(value) and value >= 0 else store.WAIT_S


_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


#: Another process held the store file for longer than the wait (most likely a `commwall
#: ingest` in progress): the CLI's error, with its words.
StoreBusy = store.StoreBusyError


def _lock_for(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


class StoreFile:
    """One DuckDB store as the dashboard uses it."""

    def __init__(self, path: str | Path, wait: float | None = None) -> None:
        self.path = Path(path).resolve()
        self.lock = _lock_for(self.path)
        self.wait_s = wait_s() if wait is None else wait

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
        path = str(self.path)
        con = store.while_held(lambda: addrspace.connect(path), path, self.wait_s)
        try:
            yield db.load_modules(con)
        finally:
            con.close()

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A writable connection, held under this process's write lock."""
        with self.lock:
            con = store.connect(self.path, wait_s=self.wait_s)
            try:
                yield con
            finally:
                con.close()
