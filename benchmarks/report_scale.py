"""How the full report's cost grows with the run: 8 to 4,096 ranks.

For each scale a synthetic run (the straggler benchmark's scenario: tests/synthetic_traces.py,
8 ranks per host, 10 steps, one compute straggler, random host clock offsets) is stored directly
as the rows ingest would write, then `build_report` runs in a fresh process under a DuckDB
memory limit; wall time, CPU time and peak RSS are measured from outside (os.wait4). The child
times the run's analysis session (the tables every section shares, computed once; each of its
tables apart, "session:" rows) and every report section, in wall and CPU seconds (the CPU
seconds of the process, all threads; on a machine shared with other work they are the fairer
figure), and the table says which step dominates (by CPU seconds), and the CPU seconds per
million (collective x rank) calls, which stays flat when nothing grows faster than linearly.
Then the same report runs again in a fresh process ("kept"): a later command on the same run,
which reads the whole report back (analysis/report/cache.py) that the first wrote when building
it took long enough; and once more with that report removed ("warm"), which reads the session's
tables from the run cache (analysis/report/run_cache.py) that the first wrote when computing them took
long enough, and builds every section from them (the first run's figures include both writes).
"report s", "kept s" and "warm s" are build_report's own time; "cpu s" and "peak MiB" those of
the whole process (the interpreter and its imports included).
Usage:

    python benchmarks/report_scale.py [--ranks 8 64 256 1024 4096] [--collectives 2000] [--json OUT]

--json OUT also writes each scale's figures and the machine it ran on as JSON (the input of
benchmarks/write_performance.py).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package


def child(db: str, memory_limit: str) -> None:
    """Build the report of run 'bench'; print the wall and CPU seconds spent per section (and
    per table of the session) as JSON."""
    from commwall.analysis.db import open_db
    from commwall.analysis.report import build as report
    from commwall.analysis.report import session

    t, c = time.perf_counter(), time.process_time()
    con = open_db(db)
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    spent = {"open": time.perf_counter() - t}
    cpu = {"open": time.process_time() - c}

    def timed(key: str, fn):  # noqa: ANN001, ANN202
        def run(*a):  # noqa: ANN002, ANN202
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*a)
            finally:
                spent[key] = time.perf_counter() - t0
                cpu[key] = time.process_time() - c0

        return run

    # the session lists the run as cached right after computing each table: time between those
    redefine, mark = session._set_runs, [0.0, 0.0]

    def timed_redefine(c, name, runs):  # noqa: ANN001, ANN202
        redefine(c, name, runs)
        now, now_cpu = time.perf_counter(), time.process_time()
        spent[f"session: {name}"], cpu[f"session: {name}"] = now - mark[0], now_cpu - mark[1]
        mark[:] = now, now_cpu

    sweep = session._sweep_tables

    def timed_sweep(c, rid):  # noqa: ANN001, ANN202  (the one sweep, apart from its tables)
        t0, c0 = time.perf_counter(), time.process_time()
        out = sweep(c, rid)
        spent["session: sweep"] = time.perf_counter() - t0
        cpu["session: sweep"] = time.process_time() - c0
        mark[0] += spent["session: sweep"]  # the table being made is timed without it
        mark[1] += cpu["session: sweep"]
        return out

    @contextmanager
    def timed_session(c, rid):  # noqa: ANN001, ANN202
        t0, c0 = time.perf_counter(), time.process_time()
        mark[:] = t0, c0
        session._set_runs, session._sweep_tables = timed_redefine, timed_sweep
        try:
            with session.run_session(c, rid) as cached:
                spent["session"] = time.perf_counter() - t0
                cpu["session"] = time.process_time() - c0
                session._set_runs, session._sweep_tables = redefine, sweep
                yield cached
        finally:
            session._set_runs, session._sweep_tables = redefine, sweep

    report.run_session = timed_session
    report.SECTIONS = {k: timed(k, f) for k, f in report.SECTIONS.items()}
    # "stragglers" and "model" are read again in context (DERIVED): time those apart
    report.DERIVED = {k: timed(f"{k} (in context)", f) for k, f in report.DERIVED.items()}
    t = time.perf_counter()
    rep = report.build_report(con, "bench", keep_going=False)
    spent["total report"] = time.perf_counter() - t
    flagged = [s["rank"] for s in (rep["stragglers"] or {}).get("ranks", []) if s.get("flagged")]
    digest = hashlib.sha256(json.dumps(rep, sort_keys=True, default=str).encode()).hexdigest()
    print(json.dumps({"spent": spent, "cpu": cpu, "flagged": flagged, "digest": digest}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256, 1024])
    p.add_argument("--collectives", type=int, default=2000, help="per rank, over 10 steps")
    p.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit of the report")
    p.add_argument("--json", type=Path, help="write each scale's figures here too")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.db, args.memory_limit)
        return
    doc = {"benchmark": "report_scale", "machine": machine(), "rows": []}
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, "
          f"memory_limit {args.memory_limit}, {args.collectives} collectives per rank")  # fmt: skip
    head = f"{'ranks':>6} {'calls':>10} {'report s':>9} {'cpu s':>7} {'peak MiB':>9}"
    head += f" {'kept s':>7} {'kept cpu':>8} {'kept MiB':>8}"
    head += f" {'warm s':>7} {'warm cpu':>8} {'warm MiB':>8}"
    print(
        f"{head} {'cpu s per M calls':>17}  dominant step (s, cpu s)  straggler found/truth"
        "  (the three reports identical)"
    )
    for ranks in args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.duckdb"
            cmd = [sys.executable, str(ROOT / "benchmarks" / "stragglers.py"), "--build"]
            cmd += ["--db", str(db), "--ranks", str(ranks), "--collectives", str(args.collectives)]
            truth = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
            wall, cpu, rss, got = run_child(db, args.memory_limit)
            # a later command on the same run reads the whole report back (analysis/
            # report_cache.py), which the first wrote when building it took long enough
            _, kept_cpu, kept_rss, kept = run_child(db, args.memory_limit)
            # without that report, a later command reads the session's tables from the run
            # cache (analysis/report/run_cache.py) and builds every section from them
            for path in Path(f"{db}.cache").glob("report-*.json"):
                path.unlink()
            _, warm_cpu, warm_rss, warm = run_child(db, args.memory_limit)
            if not got["digest"] == kept["digest"] == warm["digest"]:
                raise SystemExit(f"{ranks} ranks: the three reports differ")
            spent, cpus = got["spent"], got["cpu"]
            # the steps: the session's tables and the sections (the session is their sum)
            steps = {k: v for k, v in cpus.items() if k not in ("open", "session")}
            top = max(steps, key=steps.get)
            calls = truth["rows"]["collectives"]
            print(f"{ranks:6d} {calls:10d} {spent['total report']:9.2f} {cpu:7.2f} {rss:9.0f} "
                  f"{kept['spent']['total report']:7.2f} {kept_cpu:8.2f} {kept_rss:8.0f} "
                  f"{warm['spent']['total report']:7.2f} {warm_cpu:8.2f} {warm_rss:8.0f} "
                  f"{cpu / calls * 1e6:17.2f}  {top} ({spent[top]:.2f}, "
                  f"{cpus[top]:.2f})  {got['flagged']}/{truth['straggler_rank']}")  # fmt: skip
            doc["rows"].append(
                {
                    "ranks": ranks,
                    "calls": calls,
                    "first_s": spent["total report"],
                    "first_process_s": wall,
                    "first_cpu_s": cpu,
                    "first_peak_mib": rss,
                    "kept_s": kept["spent"]["total report"],
                    "kept_cpu_s": kept_cpu,
                    "kept_peak_mib": kept_rss,
                    "tables_only_s": warm["spent"]["total report"],
                    "tables_only_cpu_s": warm_cpu,
                    "tables_only_peak_mib": warm_rss,
                    "dominant_step": top,
                    "straggler_found": got["flagged"],
                    "straggler_truth": truth["straggler_rank"],
                }
            )
            if args.json:  # after every scale: a long run interrupted keeps what it measured
                args.json.write_text(json.dumps(doc, indent=1) + "\n")
            for k in ("open", "session", *steps):
                print(f"       {k:34s} {spent[k]:7.2f} s {cpus[k]:7.2f} cpu s")
            print(f"       {'warm: session (read back)':34s} {warm['spent']['session']:7.2f} s "
                  f"{warm['cpu']['session']:7.2f} cpu s")  # fmt: skip
            for k, v in warm["spent"].items():  # the later report's sections
                if k not in ("session", "total report") and not k.startswith("session:"):
                    print(f"       {'warm: ' + k:34s} {v:7.2f} s {warm['cpu'][k]:7.2f} cpu s")


def machine() -> dict:
    """The machine a benchmark ran on and when, for the tables made from its JSON."""
    model, memory_gib = "", None
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
                      if ln.startswith("model name")), "")  # fmt: skip
        memory_gib = round(int(Path("/proc/meminfo").read_text().split()[1]) / 2**20, 1)
    except (OSError, IndexError, ValueError):
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "memory_gib": memory_gib,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }


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
