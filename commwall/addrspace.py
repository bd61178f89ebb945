"""Running under a limit on the process's address space (`ulimit -v`, RLIMIT_AS), as HPC login
nodes set one.

Such a limit counts every byte a process maps, reserved or used, and the libraries commwall
runs on reserve address space after the machine's size, not after the limit: DuckDB starts a
worker thread per core and four I/O threads per worker (each with a stack, 8 MB by default),
glibc gives each thread that allocates a heap of its own (a 64 MB reservation, up to 8 per
core), OpenBLAS starts a thread per core with a buffer of its own, Arrow's allocator reserves
1 GiB at its first allocation, and DuckDB sizes its memory after the machine's memory. On a
node of many cores that is several GB before a row is read. Under a limit, `prepare` and
`connect` size all of these after the limit instead (`budget`); without one nothing changes.

The lowest layer: ingest, analysis and the front ends all open the store through `connect`,
and this package imports nothing of theirs.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import resource
except ImportError:  # pragma: no cover (Windows: no such limit)
    resource = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import duckdb

GIB = 1 << 30
#: Share of the limit DuckDB may use (its `memory_limit`): the rest is for the Python side of
#: a report (numpy and pandas frames of a rank's events), the libraries' code and the threads.
MEMORY_SHARE = 0.4
#: Address space per thread: one DuckDB worker thread (and one glibc heap, one Arrow and one
#: OpenBLAS thread) per GiB of the limit, at least one, at most the cores.
PER_THREAD = GIB
#: glibc's mallopt parameter for the number of heaps (M_ARENA_MAX in malloc.h).
_M_ARENA_MAX = -8
#: Environment variables read by libraries when they load (this process's, if it has not
#: loaded them yet, and its child processes'): thread counts and Arrow's allocator.
_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_ARENA_MAX")
_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def limit(hard: bool = False) -> int | None:
    """The process's address-space limit in bytes (RLIMIT_AS: the soft one, which applies, or
    the hard one, to which a process may raise its own), or None when unlimited or where the
    platform has none."""
    if resource is None:  # pragma: no cover
        return None
    try:
        soft, top = resource.getrlimit(resource.RLIMIT_AS)
    except (AttributeError, ValueError, OSError):  # pragma: no cover (no RLIMIT_AS here)
        return None
    value = top if hard else soft
    return None if value == resource.RLIM_INFINITY or value < 0 else int(value)


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (macOS)
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Budget:
    """What a process under an address-space limit of `limit` bytes allows itself."""

    limit: int
    threads: int  # DuckDB's worker threads, glibc's heaps, Arrow's and OpenBLAS's threads
    memory: int  # DuckDB's memory_limit, bytes


def budget(cap: int | None = None, n_cores: int | None = None) -> Budget | None:
    """The budget under the limit `cap` (default: this process's), or None without one."""
    cap = limit() if cap is None else cap
    if cap is None:
        return None
    n = cores() if n_cores is None else n_cores
    threads = max(1, min(n, cap // PER_THREAD))
    return Budget(limit=cap, threads=threads, memory=max(64 << 20, int(cap * MEMORY_SHARE)))


@cache
def prepare() -> Budget | None:
    """Size the process after its address-space limit (once; nothing without a limit):
    glibc's heaps capped from now on (mallopt), and the thread counts and Arrow's allocator
    (the system's, not mimalloc's 1 GiB reservation) set in the environment, for the libraries
    not loaded yet and for child processes; Arrow's thread pool resized if it is loaded. What
    the user set is left as it is. Call it before numpy and pyarrow are imported (the CLI does,
    first thing); `connect` calls it too."""
    b = budget()
    if b is None:
        return None
    user = {name for name in (*_THREAD_ENV, _POOL_ENV) if name in os.environ}
    for name in _THREAD_ENV:
        os.environ.setdefault(name, str(b.threads))
    os.environ.setdefault(_POOL_ENV, "system")
    if "MALLOC_ARENA_MAX" not in user:  # glibc read the user's at start
        _cap_heaps(b.threads)
    pa = sys.modules.get("pyarrow")
    if pa is not None and "OMP_NUM_THREADS" not in user:
        with contextlib.suppress(Exception):
            pa.set_cpu_count(min(pa.cpu_count(), b.threads))
    return b


def _cap_heaps(n: int) -> None:
    """At most `n` glibc heaps from now on (threads beyond share them); elsewhere nothing."""
    if not sys.platform.startswith("linux") or n < 1:
        return
    with contextlib.suppress(OSError, AttributeError):
        name = ctypes.util.find_library("c")
        if name:
            ctypes.CDLL(name).mallopt(_M_ARENA_MAX, n)


#: A DuckDB configuration, as duckdb.connect takes it.
Config = dict[str, str | bool | int | float | list[str]]


def duckdb_config() -> Config:
    """The configuration every DuckDB database commwall opens gets: empty without a limit;
    under one, `threads` and `async_threads` after the budget, and `memory_limit` (applied
    by `connect`, only where it lowers DuckDB's own default)."""
    b = prepare()
    if b is None:
        return {}
    return {"threads": b.threads, "async_threads": 1}


def connect(
    database: str | Path = ":memory:", read_only: bool = False
) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, sized after the address-space limit when there is one (the same
    configuration on every call, as DuckDB wants for two connections to one file)."""
    import duckdb  # noqa: PLC0415 (the CLI calls `prepare` before the libraries load)

    con = duckdb.connect(str(database), read_only=read_only, config=duckdb_config())
    b = prepare()
    if b is not None:
        row = con.execute("SELECT current_setting('memory_limit')").fetchone()
        own = None if row is None else _bytes(str(row[0]))
        if own is None or b.memory < own:
            con.execute(f"SET memory_limit = '{b.memory}B'")
    return con


_SIZE = re.compile(r"^\s*([\d.]+)\s*(?:([KMGTP])(i?)B|B|bytes?)?\s*$", re.IGNORECASE)


def _bytes(text: str) -> int | None:
    """DuckDB's printed size ("18.8 GiB", "512.0 MiB", "1000 bytes") in bytes, or None."""
    m = _SIZE.match(text)
    if m is None:
        return None
    unit = (m[2] or "").upper()
    if not unit:
        return int(float(m[1]))
    power = "KMGTP".index(unit) + 1
    return int(float(m[1]) * ((1 << 10 * power) if m[3] else 1000**power))
