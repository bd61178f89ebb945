"""The store's lock policy: waiting while another process holds a DuckDB store, and the error
that says who holds it.

DuckDB lets one process write a store and refuses to open it while another process writes it
(or, for a writer, while readers hold it). Every step that opens a store (an ingest, its
preparation of analysis tables, the read commands, the dashboard) goes through `while_held`,
which retries and finally raises StoreBusyError, never DuckDB's own text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

T = TypeVar("T")


class StoreError(Exception):
    """The database itself is unusable (wrong schema version, locked, not DuckDB)."""


class StoreBusyError(StoreError):
    """Another process held the store's lock for longer than this step would wait: says, in
    one line, which store, who holds it (`holder`, with `pid` when DuckDB names it) and for
    how long this step waited (`wait_s`; None when unknown)."""

    def __init__(self, db: str | Path, holder: str, pid: int | None, wait_s: float | None) -> None:
        self.db, self.holder, self.pid, self.wait_s = str(db), holder, pid, wait_s
        waited = "" if wait_s is None else f"; waited {wait_s:g} s"
        super().__init__(
            f"the store {db} is in use by {holder}{waited} — try again when it has finished, "
            "or pass --wait SECONDS to wait longer"
        )

    def __reduce__(self) -> tuple:
        return (type(self), (self.db, self.holder, self.pid, self.wait_s))


# The lock policy, one rule for every step that opens a store (an ingest, its preparation of
# analysis tables, the read commands, the dashboard): DuckDB lets one process write a store
# and refuses to open it while another process writes it (or while readers hold it, for a
# writer). A step that meets that lock tries again, pausing RETRY_S, doubled after each try
# up to RETRY_MAX_S, until its wait (`--wait`, WAIT_S by default) is over; then it stops with
# StoreBusyError, never DuckDB's own text. `while_held` is that rule; every opening goes
# through it.

#: How long a step that opens the store waits, by default, while another process holds it.
WAIT_S = 60.0
#: The first pause before a waiting step tries the lock again; doubled after each try.
RETRY_S = 0.05
#: The longest pause between two tries.
RETRY_MAX_S = 0.5
_LOCK_PID = re.compile(r"\(PID (\d+)\)")
_LOCK_FILE = re.compile(r'lock on file "([^"]*)"')
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def lock_conflict(e: BaseException) -> bool:
    """Whether `e` is DuckDB's error for a store whose lock another process holds."""
    return isinstance(e, duckdb.IOException) and "lock" in str(e).lower()


def _holder(e: BaseException) -> tuple[str, int | None]:
    """Who holds the store, in words, and its PID, from DuckDB's lock error `e`."""
    m = _LOCK_PID.search(str(e))
    if m is None:
        return "another process", None
    pid = int(m[1])
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = ""
    cmd = _UNPRINTABLE.sub(" ", cmd)
    cmd = cmd if len(cmd) <= 120 else cmd[:120] + "…"
    return f"process {pid}" + (f" ({cmd})" if cmd else ""), pid


def lock_holder(e: BaseException) -> str | None:
    """Who holds the store, in words, when `e` is DuckDB's lock conflict; else None."""
    return _holder(e)[0] if lock_conflict(e) else None


def busy(
    e: BaseException, db: str | Path | None = None, wait_s: float | None = None
) -> StoreBusyError | None:
    """The one error for DuckDB's lock conflict `e` on store `db` (default: the file DuckDB
    names) after waiting `wait_s` seconds; None when `e` is no lock conflict."""
    if not lock_conflict(e):
        return None
    if db is None:
        m = _LOCK_FILE.search(str(e))
        db = m[1] if m else "file"
    holder, pid = _holder(e)
    return StoreBusyError(db, holder, pid, wait_s)


def while_held(
    open_: Callable[[], T],
    db: str | Path,
    wait_s: float = WAIT_S,
    on_wait: Callable[[str], None] | None = None,
) -> T:
    """`open_()` (anything that opens the store `db`), tried again while another process
    holds the store, for up to `wait_s` seconds (telling `on_wait` once, in words, who holds
    it); then StoreBusyError names the holder and says when to retry. Other errors pass."""
    deadline = time.monotonic() + wait_s
    pause = RETRY_S
    told = False
    while True:
        try:
            return open_()
        except Exception as e:
            err = busy(e, db, wait_s)
            if err is None:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise err from e
            if on_wait is not None and not told:
                on_wait(f"{db} is in use by {err.holder}; waiting up to {wait_s:g} s for it")
                told = True
            time.sleep(min(pause, left))
            pause = min(2 * pause, RETRY_MAX_S)
