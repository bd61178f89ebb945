"""Ingest speed and memory: commwall against Holistic Trace Analysis, measured in the same run.

Inputs: the largest real trace in the repo (53.7 MB, HTA's df_index_resolver rank 1) and the same
trace scaled up by repeating its events shifted in time (x2, x5 → ~234 MB). Each tool runs in a
fresh process; wall time and peak RSS are taken from outside (os.wait4). Usage:

    python benchmarks/ingest.py [--scales 1 2 4] [--no-hta]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests/data/kineto/hta_df_index_resolver_rank1of2/df_index_resolver.json.gz"


def scaled(doc: dict, k: int) -> dict:
    """The trace with its events repeated k times, each copy shifted past the previous one."""
    ev = doc["traceEvents"]
    ts = [e["ts"] for e in ev if isinstance(e.get("ts"), (int, float))]
    span = max(ts) - min(ts) + 1000
    out = []
    for i in range(k):
        for e in ev:
            if isinstance(e.get("ts"), (int, float)):
                e = {**e, "ts": e["ts"] + i * span}
            out.append(e)
    return {**doc, "traceEvents": out}


def measure(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of a command run in its own process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 2, 5])
    ap.add_argument("--no-hta", action="store_true", help="skip the peer")
    ap.add_argument("--make", nargs=2, metavar=("K", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:  # child process: write one scaled trace
        with gzip.open(REAL) as f:
            Path(args.make[1]).write_text(json.dumps(scaled(json.load(f), int(args.make[0]))))
        return
    hta_ok = (
        not args.no_hta
        and subprocess.run([sys.executable, "-c", "import hta"], capture_output=True).returncode
        == 0
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in args.scales:
            d = Path(tmp) / f"x{k}"
            d.mkdir()
            trace = d / "rank1.json"
            # made in a child process: a forked child's peak RSS counts the parent's pages, so
            # the measuring parent must stay small
            subprocess.run([sys.executable, __file__, "--make", str(k), str(trace)], check=True)
            mb = trace.stat().st_size / 1e6
            db = Path(tmp) / f"x{k}.duckdb"
            cw = [
                sys.executable,
                "-m",
                "dashboard",
                "ingest",
                str(trace),
                "--db",
                str(db),
                "--quiet",
            ]
            wall, rss = measure(cw)
            rows.append(("commwall", k, mb, wall, rss))
            if hta_ok:
                code = f"from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir={str(d)!r})"
                wall, rss = measure([sys.executable, "-c", code])
                rows.append(("HTA 0.5.0", k, mb, wall, rss))
    print(
        f"{'tool':<10} {'scale':>5} {'MB':>8} {'wall s':>8} {'MB/s':>8} {'peak RSS MB':>12} {'RSS/file':>9}"
    )
    for tool, k, mb, wall, rss in rows:
        print(
            f"{tool:<10} {k:>5} {mb:>8.1f} {wall:>8.2f} {mb / wall:>8.1f} {rss:>12.0f} {rss / mb:>9.2f}"
        )
    if hta_ok:
        print("\nratios (same file, same run): commwall throughput ÷ HTA, commwall peak RSS ÷ HTA")
        by = {(t, k): (mb / w, r) for t, k, mb, w, r in rows}
        for k in args.scales:
            (cs, cr), (hs, hr) = by[("commwall", k)], by[("HTA 0.5.0", k)]
            print(f"  x{k}: throughput {cs / hs:.1f}x, memory {cr / hr:.2f}x")


if __name__ == "__main__":
    main()
