"""How to keep a run's session tables between commands: write and read-back times per format.

The run is the scale benchmarks' (benchmarks/stragglers.py --build: N ranks x 2,000 collectives
over 10 steps, stored directly as rows). In one process: the run's analysis session computes its
tables (the run cache turned off), then each way of keeping them writes every table and reads
it back into TEMP tables, timed in wall seconds, with its size on disk:

* `run_cache` (what analysis/report/run_cache.py does: Parquet with snappy, a manifest, renamed into
  place; read back with its type checks), Parquet uncompressed, and a DuckDB file (ATTACH).

Then one read of each cached macro through its dispatch (analysis/dispatch.py) against the same
read of its TEMP table directly: what a section pays per read inside a session. Usage:

    python benchmarks/run_cache.py [--ranks 1024] [--collectives 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package
os.environ["COMMWALL_CACHE"] = "0"  # the session computes; the writes below are timed apart

from commwall.analysis.db import open_db  # noqa: E402
from commwall.analysis.dispatch import table  # noqa: E402
from commwall.analysis.report import run_cache, session  # noqa: E402


def size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def timed(fn) -> float:  # noqa: ANN001
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--collectives", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        cmd = [sys.executable, str(ROOT / "benchmarks" / "stragglers.py"), "--build"]
        cmd += ["--db", str(db), "--ranks", str(args.ranks), "--collectives", str(args.collectives)]
        subprocess.run(cmd, check=True, capture_output=True)
        con = open_db(db)
        con.execute("SET enable_progress_bar = false")
        rid = 1
        print(f"{args.ranks} ranks x {args.collectives} collectives, load {os.getloadavg()[0]:.1f}")
        t = time.perf_counter()
        with session.run_session(con, rid) as names:
            print(f"session: the {len(names)} tables computed in {time.perf_counter() - t:.2f} s")
            temp = {n: f"temp.{table(n, rid)}" for n in names}
            print(f"{'kept as':28s} {'write s':>8s} {'read s':>7s} {'MB':>7s}")

            os.environ["COMMWALL_CACHE"] = "1"
            w = timed(lambda: run_cache.save(con, rid, names, "", float("inf")))
            got: list[str] = []

            def read_cache() -> None:
                got[:] = run_cache.load(con, rid, names)[0]

            # load creates the session's own table names: move the computed ones aside first
            for n in names:
                con.execute(f"ALTER TABLE {temp[n]} RENAME TO {table(n, rid)}_kept")
            r = timed(read_cache)
            assert sorted(got) == sorted(names), "the entry was not read back"
            for n in names:
                con.execute(f"DROP TABLE {temp[n]}")
                con.execute(f"ALTER TABLE temp.{table(n, rid)}_kept RENAME TO {table(n, rid)}")
            print(f"{'run_cache (Parquet, snappy)':28s} {w:8.2f} {r:7.2f} "
                  f"{size_mb(Path(f'{db}.cache')):7.0f}")  # fmt: skip

            out = Path(tmp) / "plain"
            out.mkdir()

            def write_plain() -> None:
                for n in names:
                    con.execute(
                        f"COPY (SELECT * FROM {temp[n]}) TO '{out / n}.parquet' "
                        "(FORMAT parquet, COMPRESSION uncompressed)"
                    )

            def read_plain() -> None:
                for n in names:
                    con.execute(
                        f"CREATE TEMP TABLE p_{n} AS FROM read_parquet('{out / n}.parquet')"
                    )

            w, r = timed(write_plain), timed(read_plain)
            print(f"{'Parquet, uncompressed':28s} {w:8.2f} {r:7.2f} {size_mb(out):7.0f}")

            file = Path(tmp) / "kept.duckdb"

            def write_duckdb() -> None:
                con.execute(f"ATTACH '{file}' AS kept (READ_WRITE)")
                con.execute("BEGIN")
                for n in names:
                    con.execute(f"CREATE TABLE kept.{n.lstrip('_')} AS FROM {temp[n]}")
                con.execute("COMMIT")
                con.execute("DETACH kept")

            def read_duckdb() -> None:
                con.execute(f"ATTACH '{file}' AS kept (READ_ONLY)")
                for n in names:
                    con.execute(f"CREATE TEMP TABLE d_{n} AS FROM kept.{n.lstrip('_')}")
                con.execute("DETACH kept")

            w, r = timed(write_duckdb), timed(read_duckdb)
            print(f"{'DuckDB file':28s} {w:8.2f} {r:7.2f} {size_mb(file):7.0f}")

            print(f"\n{'one read of':24s} {'dispatch ms':>11s} {'table ms':>9s}")
            for n in names:
                via = timed(lambda n=n: con.execute(f"SELECT count(*) FROM {n}({rid})").fetchall())
                direct = timed(
                    lambda n=n: con.execute(f"SELECT count(*) FROM {temp[n]}").fetchall()
                )
                print(f"{n:24s} {via * 1e3:11.1f} {direct * 1e3:9.1f}")
        shutil.rmtree(f"{db}.cache", ignore_errors=True)


if __name__ == "__main__":
    main()
