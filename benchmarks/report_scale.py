"""How the full report's cost grows with the run: 8 to 4,096 ranks.

For each scale a synthetic run (the straggler benchmark's scenario: tests/synthetic_traces.py,
8 ranks per host, 10 steps, one compute straggler, random host clock offsets) is stored directly
as the rows ingest would write, then `build_report` runs in a fresh process under a DuckDB
memory limit; wall time, CPU time and peak RSS are measured from outside (os.wait4). The child
times the run's analysis session (the tables every section shares, computed once) and every
report section, and the table says which step dominates, and the cost per million
(collective x rank) calls, which stays flat when nothing grows faster than linearly. Usage:

    python benchmarks/report_scale.py [--ranks 8 64 256 1024] [--collectives 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package


def child(db: str, memory_limit: str) -> None:
    """Build the report of run 'bench'; print the seconds spent per section as JSON."""
    from analysis import report
    from analysis.db import open_db

    t = time.perf_counter()
    con = open_db(db)
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    spent = {"open": time.perf_counter() - t}

    def timed(key: str, fn):  # noqa: ANN001, ANN202
        def run(*a):  # noqa: ANN002, ANN202
            t0 = time.perf_counter()
            try:
                return fn(*a)
            finally:
                spent[key] = time.perf_counter() - t0

        return run

    session = report.run_session

    @contextmanager
    def timed_session(c, rid):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        with session(c, rid) as cached:
            spent["session"] = time.perf_counter() - t0
            yield cached

    report.run_session = timed_session
    report.SECTIONS = {k: timed(k, f) for k, f in report.SECTIONS.items()}
    report.DERIVED = {k: timed(k, f) for k, f in report.DERIVED.items()}
    t = time.perf_counter()
    rep = report.build_report(con, "bench", keep_going=False)
    spent["total report"] = time.perf_counter() - t
    flagged = [s["rank"] for s in (rep["stragglers"] or {}).get("ranks", []) if s.get("flagged")]
    print(json.dumps({"spent": spent, "flagged": flagged}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256, 1024])
    p.add_argument("--collectives", type=int, default=2000, help="per rank, over 10 steps")
    p.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit of the report")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.db, args.memory_limit)
        return
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, "
          f"memory_limit {args.memory_limit}, {args.collectives} collectives per rank")  # fmt: skip
    head = f"{'ranks':>6} {'calls':>10} {'report s':>9} {'cpu s':>7} {'peak MiB':>9}"
    print(f"{head} {'s per M calls':>13}  dominant section (s)  straggler found/truth")
    for ranks in args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.duckdb"
            cmd = [sys.executable, str(ROOT / "benchmarks" / "stragglers.py"), "--build"]
            cmd += ["--db", str(db), "--ranks", str(ranks), "--collectives", str(args.collectives)]
            truth = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
            wall, cpu, rss, got = run_child(db, args.memory_limit)
            spent = got["spent"]
            sections = {k: v for k, v in spent.items() if k not in ("open", "total report")}
            top = max(sections, key=sections.get)
            calls = truth["rows"]["collectives"]
            print(f"{ranks:6d} {calls:10d} {spent['total report']:9.2f} {cpu:7.2f} {rss:9.0f} "
                  f"{spent['total report'] / calls * 1e6:13.2f}  {top} ({sections[top]:.2f})"
                  f"  {got['flagged']}/{truth['straggler_rank']}")  # fmt: skip
            print("       " + ", ".join(f"{k} {v:.2f}" for k, v in sections.items()))


def run_child(db: Path, memory_limit: str) -> tuple[float, float, float, dict]:
    """(wall s, CPU s, peak RSS MiB, the child's JSON) of one report in its own process."""
    cmd = [sys.executable, __file__, "--child", "--db", str(db), "--memory-limit", memory_limit]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out = proc.stdout.read().decode()  # type: ignore[union-attr]
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise RuntimeError(f"report failed: {err[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
