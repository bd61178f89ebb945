"""nsys ingest speed and memory: rows/s and peak RSS on the largest bundled export, and on
synthetic exports scaled up with the test generator (tests/nsys_synth.py).

Each measurement runs in a fresh process; peak RSS is taken from outside (os.wait4), and the
parse time (pure `ingest.formats.registry.parse`, no store) is printed by the child. Rows/s counts the
rows read from the export's activity tables (kernels, memcpy, memset, runtime calls, NVTX).
The peer column: those tables read into pandas with no analysis (see PEER), CPU seconds.
Usage:

    python benchmarks/nsys.py [--steps 1000 4000] [--ranks 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LARGEST = ROOT / "tests/data/nsys/nsys_ai_2gpu/mfu_2gpu_before.sqlite.gz"
SOURCE_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
)
CHILD = """
import json, sys, time
from ingest.formats import registry as formats
t, c = time.perf_counter(), time.process_time()
p = formats.parse(sys.argv[1])
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"seconds": wall, "cpu": cpu, "rows_out": p.n_rows}))
"""
#: The nearest peer that runs here: no tool installable with pip reads nsys exports (nsys
#: recipes need NVIDIA's nsys; nsys-ai is not on PyPI), but SQLite-based ones start by reading
#: the activity tables into pandas, so that step alone, with no analysis, is the floor compared.
PEER = """
import json, sqlite3, sys, time
import pandas as pd
t, c = time.perf_counter(), time.process_time()
con = sqlite3.connect(sys.argv[1])
have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
frames = [pd.read_sql_query(f"SELECT * FROM {t}", con) for t in sys.argv[2:] if t in have]
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"seconds": wall, "cpu": cpu, "rows_out": sum(len(f) for f in frames)}))
"""


def source_rows(path: Path) -> int:
    """Rows of the activity tables the parser reads."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = sum(
        con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in SOURCE_TABLES if t in have
    )
    con.close()
    return n


def run(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB, stdout) of a command in its own process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {proc.stderr.read().decode()[-2000:]}")
    return time.perf_counter() - t, usage.ru_maxrss / 1024, out


def bench(label: str, path: Path, rows_in: int, repeat: int, tmp: Path) -> None:
    """Best-of-`repeat` parse wall and CPU time, rows/s on each (CPU time is steadier on a busy
    machine), peak RSS, and a full `commwall ingest` (wall time, peak RSS)."""
    best, cpu, rss, rows_out = float("inf"), float("inf"), 0.0, 0
    peer_cpu, peer_rss = float("inf"), 0.0
    for _ in range(repeat):
        _, peak, out = run([sys.executable, "-c", CHILD, str(path)])
        got = json.loads(out)
        best, cpu, rss = min(best, got["seconds"]), min(cpu, got["cpu"]), max(rss, peak)
        rows_out = got["rows_out"]
        if path.suffix != ".gz":  # the peer reads plain SQLite only
            _, peak, out = run([sys.executable, "-c", PEER, str(path), *SOURCE_TABLES])
            peer_cpu, peer_rss = min(peer_cpu, json.loads(out)["cpu"]), max(peer_rss, peak)
    db = tmp / f"{label}.duckdb"
    wall, ingest_rss, _ = run(
        [sys.executable, "-m", "commwall", "ingest", str(path), "--db", str(db), "--quiet",
         "--no-prepare"]
    )  # fmt: skip
    size = path.stat().st_size / 2**20
    print(
        f"{label:<34} {size:6.1f} {rows_in:>9,} {rows_out:>9,} {best:7.2f} {cpu:7.2f} "
        f"{rows_in / best:>9,.0f} {rows_in / cpu:>9,.0f} {rss:7.0f} {wall:8.2f} {ingest_rss:7.0f}"
        + (f" {peer_cpu:7.2f} {peer_rss:7.0f}" if peer_rss else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="*", default=[1000, 4000])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from nsys_synth import make_spec, write_nsys  # noqa: PLC0415 (test helper, path set above)

    _, base_rss, _ = run(
        [sys.executable, "-c", "import commwall.ingest.formats.registry, pyarrow.compute"]
    )
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"RSS after imports alone: {base_rss:.0f} MiB"
    )
    print(
        f"{'input':<34} {'MiB':>6} {'rows in':>9} {'rows out':>9} {'parse s':>7} {'cpu s':>7} "
        f"{'rows/s':>9} {'rows/cpu':>9} {'RSS MiB':>7} {'ingest s':>8} {'RSS MiB':>7} "
        f"{'peer cpu':>7} {'RSS MiB':>7}"
    )
    print("peer: the activity tables read into pandas (read_sql_query), no analysis; cpu s")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        plain = tmp / "mfu_2gpu_before.sqlite"
        subprocess.run(["gunzip", "-c", str(LARGEST)], stdout=plain.open("wb"), check=True)
        bench("mfu_2gpu_before.sqlite (real)", plain, source_rows(plain), args.repeat, tmp)
        bench("mfu_2gpu_before.sqlite.gz (real)", LARGEST, source_rows(plain), args.repeat, tmp)
        for steps in args.steps:
            path = tmp / f"synth_{args.ranks}x{steps}.sqlite"
            spec = make_spec(0, ranks=args.ranks, steps=steps)
            write_nsys(spec, path, payloads=True, torch_ranges=True)
            label = f"synthetic {args.ranks} ranks x {steps} steps"
            bench(label, path, source_rows(path), args.repeat, tmp)


if __name__ == "__main__":
    main()
