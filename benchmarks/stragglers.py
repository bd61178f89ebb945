"""Matching, clock alignment and straggler analysis at scale: 1,024 ranks x 2,000 collectives.

A synthetic run (tests/synthetic_traces.py: 128 hosts x 8 ranks, 10 steps x 200 collectives,
random host clock offsets of +-5 ms, rank 437 a compute straggler by 300 µs per collective) is
stored directly as the rows ingest would write (2.0 M collectives, 4.1 M kernel activities).
Each analysis query then runs in a fresh process under a DuckDB memory limit; wall time, CPU
time and peak RSS are measured from outside (os.wait4); the first row is the cost of starting
Python, opening the store and loading the macros. The answers are printed next to the ground
truth. Usage:

    python benchmarks/stragglers.py [--ranks 1024] [--collectives 2000] [--memory-limit 2GB]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package
sys.path.append(str(ROOT / "tests"))

from synthetic_traces import Scenario, insert_run, simulate  # noqa: E402

from commwall.analysis.db import open_db  # noqa: E402
from commwall.ingest import store  # noqa: E402

QUERIES = {
    "startup (no query)": "SELECT 1",
    "collective_matches": "SELECT count(*), count(DISTINCT ik) FROM collective_matches(1)",
    "clock_offsets": "SELECT max(abs(offset_ns)), max(residual_ns) FROM clock_offsets(1)",
    "collective_instances": "SELECT count(*), median(busbw_GBps), sum((NOT causal)::INT) "
    "FROM collective_instances(1)",
    "collective_ranks": "SELECT count(*), sum(wait_ns) FROM collective_ranks(1)",
    "straggler_ranks": "SELECT list(rank ORDER BY rank) FILTER (WHERE flagged), "
    "list(kind) FILTER (WHERE flagged) FROM straggler_ranks(1)",
}
TABLES = ("collectives", "activities", "steps", "ranks")
RANKS_PER_HOST = 8
STEPS = 10


def scenario(ranks: int, collectives: int) -> Scenario:
    """The benchmark run: one compute straggler, random per-host clock offsets."""
    hosts = ranks // RANKS_PER_HOST
    offsets = np.random.default_rng(7).uniform(-5000, 5000, hosts)
    return Scenario(
        hosts=hosts,
        ranks_per_host=RANKS_PER_HOST,
        steps=STEPS,
        collectives_per_step=collectives // STEPS,
        straggler=min(437, ranks - 1),
        delay_us=300.0,
        clock_offsets_us=tuple(offsets),
        seed=1,
    )


def build(path: Path, scn: Scenario) -> dict:
    """Simulate and store the run as run 1 of a new store at `path`; returns the truth."""
    sim = simulate(scn)
    con = store.connect(path)
    rid = insert_run(con, "bench", sim)
    rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    con.close()
    assert rid == 1
    return {**sim.truth(), "rows": rows}


def run_query(db: str, name: str, memory_limit: str) -> None:
    """Child process: run one query and print its answer."""
    con = open_db(db)
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    print(con.execute(QUERIES[name]).fetchall())


def measure(db: Path, name: str, memory_limit: str) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, answer) of one query in its own process."""
    cmd = [sys.executable, __file__, "--child", name, "--db", str(db)]
    cmd += ["--memory-limit", memory_limit]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out = proc.stdout.read().decode().strip()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise RuntimeError(f"{name} failed: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--collectives", type=int, default=2000)
    p.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit per query")
    p.add_argument("--child", choices=tuple(QUERIES), help=argparse.SUPPRESS)
    p.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        run_query(args.db, args.child, args.memory_limit)
        return
    scn = scenario(args.ranks, args.collectives)
    if args.build:
        print(json.dumps(build(Path(args.db), scn)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        # built in a child: a big parent would inflate the children's peak RSS (fork)
        t = time.perf_counter()
        cmd = [sys.executable, __file__, "--build", "--db", str(db)]
        cmd += ["--ranks", str(args.ranks), "--collectives", str(args.collectives)]
        truth = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
        print(f"built {args.ranks} ranks x {args.collectives} collectives in "
              f"{time.perf_counter() - t:.1f} s: {truth['rows']}")  # fmt: skip
        print(f"truth: straggler rank {truth['straggler_rank']} ({truth['mode']}), "
              f"max |host offset| {max(abs(v) for v in truth['offsets_ns'].values()) / 1e3:.1f} µs")  # fmt: skip
        print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, "
              f"memory_limit {args.memory_limit}")  # fmt: skip
        print(f"{'query':22} {'wall s':>7} {'cpu s':>7} {'peak RSS MiB':>13}  answer")
        for name in QUERIES:
            wall, cpu, rss, out = measure(db, name, args.memory_limit)
            print(f"{name:22} {wall:7.2f} {cpu:7.2f} {rss:13.0f}  {out}")
        con = open_db(db)
        got = dict(con.execute("SELECT host, offset_ns FROM clock_offsets(1)").fetchall())
        err = max(abs(got[h] - ns) for h, ns in truth["offsets_ns"].items())
        print(f"clock offsets: {len(got)} hosts, max error vs truth {err} ns")


if __name__ == "__main__":
    main()
