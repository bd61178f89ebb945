"""End to end at job scale: `commwall ingest` of a many-rank job, then the printed diagnosis,
embedded and on a local Dask cluster, with the two reports compared.

The job is the largest real trace in the repository (53.7 MB, 216 k events, as Kineto wrote it)
as ranks 0..N-1 of one job (distributedInfo rewritten, events unchanged: the real layout), 64
ranks by default (3.4 GB). Each command runs in a fresh process, measured from outside as in
benchmarks/ingest.py (wall seconds, CPU seconds of the whole process tree, peak memory; /proc is
sampled every 100 ms meanwhile, which costs the machine a little CPU); the Dask run starts
its own cluster of `--workers` local processes inside `commwall ingest`, so its time includes
the cluster's start, and the ingest's time includes computing the run's analysis tables for the
run cache, as `commwall ingest` does by default. The two stores' `report --format json` must be identical. Usage:

    python benchmarks/ingest_e2e.py [--ranks 64] [--workers 2] [--keep DIR] [--json OUT]

--json OUT also writes the timing rows, whether the reports agree and the machine as JSON (the
input of benchmarks/write_performance.py).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the ingest benchmark's helpers, loaded by path: as a module named `ingest` it would shadow
# the package of that name
_spec = importlib.util.spec_from_file_location("ingest_bench", ROOT / "benchmarks/ingest.py")
bench = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(bench)  # type: ignore[union-attr]
CLI = [sys.executable, "-m", "commwall"]
SAMPLE_S = 0.1  # /proc sampled this often: commands here run for minutes


def make_job(out: Path, ranks: int) -> float:
    """Write the rank files (kept when `out` has them from an earlier run with --keep); their
    total size in MB."""
    names = {f"rank{r}.json" for r in range(ranks)}
    if not out.is_dir() or {p.name for p in out.iterdir()} != names:
        with gzip.open(bench.REAL) as f:
            text = f.read()
        out.mkdir(parents=True, exist_ok=True)
        for old in out.iterdir():
            old.unlink()
        for r in range(ranks):
            (out / f"rank{r}.json").write_bytes(bench.ranked(text, r, ranks))
    return sum(p.stat().st_size for p in out.iterdir()) / 1e6


def on_disk(db: Path) -> float:
    """MB the store takes on disk: its file, its WAL and its Parquet shards (not the run cache,
    which is a cache)."""
    paths = [db, db.with_name(db.name + ".wal"), *db.with_name(db.name + ".shards").rglob("*")]
    return sum(p.stat().st_size for p in paths if p.is_file()) / 1e6


def one_way(
    label: str, traces: Path, db: Path, extra: list[str]
) -> tuple[dict, list[tuple], float]:
    """Ingest, then print the report (text, the diagnosis first); the JSON report, the rows
    of the timing table: (way, step, wall s, CPU s, peak MB), and the store's MB on disk."""
    run = ["--db", str(db), "--run", "job"]
    ingest = bench._run([*CLI, "ingest", str(traces), *run, "--quiet", *extra], True, SAMPLE_S)
    stored = on_disk(db)
    report = bench._run([*CLI, "report", *run], True, SAMPLE_S)
    js = subprocess.run([*CLI, "report", *run, "--format", "json"], capture_output=True, check=True)
    out = json.loads(js.stdout)
    paragraph = (out.get("diagnosis") or {}).get("paragraph") or "no diagnosis"
    print(f"[{label}] {paragraph[:400]}")
    total = (ingest[0] + report[0], ingest[1] + report[1], max(ingest[2], report[2]))
    rows = [(label, "ingest", *ingest), (label, "report", *report), (label, "total", *total)]
    return out, rows, stored


def differences(a: object, b: object, path: str = "$") -> list[str]:
    """JSON paths where two reports differ (at most a few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += differences(a[k], b[k], f"{path}.{k}")
        return out[:10]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [path]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2, help="local Dask workers (0: no Dask run)")
    ap.add_argument("--keep", type=Path, help="write the job here and keep it (default: temp)")
    ap.add_argument("--json", type=Path, help="write the timing rows here too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        traces = base / "traces"
        t = time.perf_counter()
        mb = make_job(traces, args.ranks)
        made = time.perf_counter() - t
        print(f"{args.ranks} rank files, {mb:,.0f} MB ({mb / args.ranks:.1f} MB each), made in {made:.0f} s")  # fmt: skip
        for old in base.glob("*.duckdb*"):  # stores, their WAL and shards from a kept run
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        ways = [("embedded", base / "embedded.duckdb", [])]
        if args.workers:
            dask = ["--workers", str(args.workers)]  # shards beside the store
            ways.append((f"Dask x{args.workers}", base / "dask.duckdb", dask))
        reports, rows, stores = [], [], []
        for label, db, extra in ways:
            rep, r, stored = one_way(label, traces, db, extra)
            reports.append(rep)
            rows += r
            stores.append(f"{label} {stored:,.0f} MB")
    print(f"\n{'way':<10} {'step':<7} {'wall s':>8} {'CPU s':>8} {'MB/s':>8} {'peak MB':>8}")
    for label, step, wall, cpu, peak in rows:
        print(f"{label:<10} {step:<7} {wall:>8.1f} {cpu:>8.1f} {mb / wall:>8.1f} {peak:>8.0f}")
    print(f"\nstore on disk after the ingest (file, WAL, shards): {'; '.join(stores)}")
    diff = differences(reports[0], reports[1]) if len(reports) == 2 else None
    if diff is not None:
        print("\nreports identical" if not diff else f"\nreports DIFFER at {diff}")
    if args.json:
        keys = ("way", "step", "wall_s", "cpu_s", "peak_mb")
        doc = {
            "benchmark": "ingest_e2e",
            "machine": bench.machine(),
            "ranks": args.ranks,
            "mb": mb,
            "rows": [dict(zip(keys, row, strict=True)) for row in rows],
            "stores_mb": stores,
            "reports_identical": None if diff is None else not diff,
        }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
