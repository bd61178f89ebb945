"""Fault trials shared by the tests and `benchmarks/fuzz.py`: `kill -9` of an ingest at a random
moment, and what must hold afterwards."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"


def cli(*argv: str) -> list[str]:
    """The command line running `commwall ARGV` with this interpreter."""
    return [sys.executable, "-m", "commwall", *argv]


def snapshot(db: Path, run: str) -> list[tuple]:
    """Every activity and file row of `run`, for comparing a run before and after faults."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT a.rank, a.ts, a.dur, a.name FROM activities a JOIN runs USING (run_id) "
            "WHERE runs.name = ? ORDER BY ALL",
            [run],
        ).fetchall()
        files = con.execute(
            "SELECT f.sha256 FROM files f JOIN runs USING (run_id) WHERE runs.name = ? ORDER BY 1",
            [run],
        ).fetchall()
    finally:
        con.close()
    return [*files, (len(rows), hash(tuple(rows)))]


@dataclass
class KillOutcome:
    """One trial: when the kill came, how many files of the killed run are stored, and which
    of the command's processes were still running 5 s after it was killed."""

    after_s: float
    finished_first: bool
    victim_files: int
    survivors: list[int]


def kill_trial(db: Path, victim: str, paths: list[Path], rng: random.Random, max_s: float,
               jobs: int = 0) -> KillOutcome:  # fmt: skip
    """Start `commwall ingest PATHS --run VICTIM` and SIGKILL it after a random 0..max_s s;
    returns what the store holds of the victim run afterwards (files stored)."""
    argv = cli("ingest", *map(str, paths), "--db", str(db), "--run", victim, "--quiet")
    proc = subprocess.Popen(
        [*argv, "--jobs", str(jobs)], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    after = rng.uniform(0, max_s)
    survivors: list[int] = []
    try:
        proc.wait(after)
        finished = True
    except subprocess.TimeoutExpired:
        finished = False
        helpers = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        survivors = descendants_alive(helpers)
    con = duckdb.connect(str(db), read_only=True)  # the store always opens
    try:
        n = con.execute(
            "SELECT count(*) FROM files JOIN runs USING (run_id) WHERE runs.name = ?", [victim]
        ).fetchone()[0]
    finally:
        con.close()
    return KillOutcome(after, finished, n, survivors)


def _descendants(pid: int) -> list[int]:
    import psutil  # noqa: PLC0415

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def descendants_alive(pids: list[int], timeout_s: float = 5.0) -> list[int]:
    """Those of `pids` still running after up to `timeout_s` (zombies count as gone)."""
    import psutil  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


class FailsOn:
    """A parse hook with a parser bug: raises KeyError on the file named `name` and parses the
    others normally (picklable, so that it runs on Dask workers too)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, path: Path, opts: object) -> object:
        from commwall.ingest.formats import registry as formats  # noqa: PLC0415 (on the worker)

        if path.name == self.name:
            raise KeyError("a parser bug")
        return formats.parse(path, opts)  # type: ignore[arg-type]


def hold_store(db: Path) -> subprocess.Popen:
    """A process holding the DuckDB file `db` open until its stdin is closed."""
    hold = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb,sys; c=duckdb.connect({str(db)!r}); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert hold.stdout is not None and hold.stdout.readline().strip() == "held"
    return hold
