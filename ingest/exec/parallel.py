"""Several files hashed and parsed at once in worker processes, results in the files' order.

Workers come from a `forkserver` (where the platform has one; else `spawn`): fresh interpreters
that share nothing with this process (which holds a DuckDB connection and threads), importing
the parsers once. Each worker hashes and parses one file at a time, one process per file, and
sends back its digest with the parsed tables or the error, pickled. At most `2 × workers` files
are in flight, so memory stays bounded however many files there are.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from commwall.ingest.errors import IngestError
from commwall.ingest.exec import forked
from commwall.ingest.formats import registry as formats
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.sources import sha256_of

#: Below this many bytes on disk in all, starting workers costs more than it saves.
MIN_BYTES = 64 << 20

Outcome = tuple[str | None, Parsed | None, Exception | None]


def hash_and_parse(path: Path, opts: ParseOptions) -> Outcome:
    """(sha256, parsed, None) or (sha256 when the file could be read, None, the error)."""
    try:
        digest = sha256_of(path, opts.max_bytes)
    except (IngestError, OSError) as e:
        return None, None, e
    try:
        return digest, formats.parse(path, opts), None
    except (IngestError, OSError) as e:
        return digest, None, e


def workers_for(paths: list[Path], jobs: int, cores: int) -> int:
    """How many worker processes to parse `paths` with: 1 (no pool) for one file or little
    data; else `jobs`, or with 0 as many as there are cores, at most one per file."""
    if jobs == 1 or len(paths) < 2:
        return 1
    try:
        size = sum(p.stat().st_size for p in paths)
    except OSError:
        return 1
    if jobs == 0 and size < MIN_BYTES:
        return 1
    return max(1, min(jobs or cores, len(paths)))


def outcomes(
    paths: list[Path], opts: ParseOptions, workers: int
) -> Generator[tuple[Path, Future[Outcome]], None, None]:
    """(path, future outcome) for every path, in order, parsed by `workers` processes (each
    decoding its file alone: the workers already use the cores)."""
    forkserver = "forkserver" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if forkserver else "spawn")
    if forkserver:  # no process outlives a killed command (ingest/exec/forkserver_guard.py)
        context.set_forkserver_preload(["__main__", "commwall.ingest.exec.forkserver_guard"])
    forked.mark_command()
    one = replace(opts, jobs=1)
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=forked.die_with_parent)
    try:
        todo = iter(paths)
        ahead: deque[tuple[Path, Future[Outcome]]] = deque()
        for path in todo:
            ahead.append((path, pool.submit(hash_and_parse, path, one)))
            if len(ahead) >= 2 * workers:
                break
        while ahead:
            yield ahead.popleft()
            for path in todo:
                ahead.append((path, pool.submit(hash_and_parse, path, one)))
                break
    finally:  # also when the caller stops early: drop what has not started
        pool.shutdown(wait=True, cancel_futures=True)
