"""Ingest speed and memory: commwall against Holistic Trace Analysis, measured in the same run.

Inputs: the largest real trace in the repo (53.7 MB, HTA's df_index_resolver rank 1), byte for
byte as Kineto wrote it, and the same trace scaled up (x2, x5 → 269 MB) by repeating its events
shifted in time, in the same layout; and a many-ranks case: the trace as ranks 0..7 of one job,
8 files (HTA loads ranks in parallel processes; commwall parses files in worker processes);
with --gzip, each one-file case also gzipped (level 6, as `gzip` does), for gzip against plain.
Each tool runs in a fresh process, timed from outside. CPU seconds are user + system time of
the whole process tree (see `_run`): on a machine shared with other work the wall time grows
with the load, MB per CPU second hardly does.
Memory is the peak over the whole process tree (commwall decodes a large file in two
processes): the sum of the processes' proportional set sizes (physical memory, a shared page
split between its sharers), sampled every 10 ms, and never less than the largest single
process's peak resident set from the kernel (os.wait4). Usage:

    python benchmarks/ingest.py [--scales 1 2 5] [--ranks 8] [--gzip] [--dirs DIR ...] [--no-hta]
                                [--json OUT]

--json OUT also writes every measured row and the machine it ran on as JSON (the input of
benchmarks/write_performance.py).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests/data/kineto/hta_df_index_resolver_rank1of2/df_index_resolver.json.gz"
EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')
TS = re.compile(rb'("ts": )(\d+)')
TICKS = os.sysconf("SC_CLK_TCK")


def scaled(text: bytes, k: int) -> bytes:
    """The trace with its events repeated k times, each copy shifted past the previous one,
    keeping the file's own layout (this trace's timestamps are integer µs)."""
    start = EVENTS.search(text).end()
    end = text.rindex(b"]")  # the array ends the trace; only scalars follow it
    events = text[start:end].rstrip()
    ts = [int(m[2]) for m in TS.finditer(events)]
    span = max(ts) - min(ts) + 1000
    copies = [
        TS.sub(lambda m, d=i * span: m[1] + str(int(m[2]) + d).encode(), events) for i in range(k)
    ]
    return text[:start] + b",\n".join(copies) + b"\n  " + text[end:]


def _tree_sample(root: int) -> tuple[float, dict[int, float]]:
    """Physical memory of `root` and its descendants, MB (the sum of their proportional set
    sizes: a page shared by n processes counts 1/n in each), and each one's own CPU seconds."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                parent[int(d)] = int(fields[1])
                cpu[int(d)] = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
            except (OSError, IndexError, ValueError):
                continue
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    kb = 0
    for p in tree:
        try:
            with open(f"/proc/{p}/smaps_rollup", "rb") as f:
                kb += sum(int(line.split()[1]) for line in f if line.startswith(b"Pss:"))
        except (OSError, IndexError, ValueError):
            continue
    return kb / 1024, {p: cpu[p] for p in tree if p in cpu}


def measure(cmd: Callable[[str], list[str]]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak MB of the process tree) of the command `cmd(tag)`: wall
    time from a run of its own (tag "timed"), since sampling /proc costs CPU; CPU and memory
    from a sampled run (tag "sampled")."""
    wall, _, _ = _run(cmd("timed"), sample=False)
    _, cpu, peak = _run(cmd("sampled"), sample=True)
    return wall, cpu, peak


def _run(cmd: list[str], sample: bool, every: float = 0.01) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MB), /proc sampled `every` seconds when `sample`. CPU: user + system
    time of the process and the children it waited for (os.wait4), or, when more, the sum of
    every process of the tree as last sampled (worker processes whose parent is not waited for,
    such as a forkserver's, escape wait4)."""
    peak = [0.0]
    seen: dict[int, float] = {}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sampler() -> None:
        while not done.wait(every):
            mb, cpu = _tree_sample(proc.pid)
            peak[0] = max(peak[0], mb)
            seen.update(cpu)

    watcher = threading.Thread(target=sampler, daemon=True)
    if sample:
        watcher.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    done.set()
    if sample:
        watcher.join()
    if status != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {proc.stderr.read().decode()[-2000:]}")
    cpu = max(usage.ru_utime + usage.ru_stime, sum(seen.values()))
    return wall, cpu, max(peak[0], usage.ru_maxrss / 1024)


def ranked(text: bytes, rank: int, world: int) -> bytes:
    """The trace as rank `rank` of `world` (distributedInfo rewritten; events unchanged)."""
    info = b'"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d}' % (rank, world)
    return re.sub(rb'"distributedInfo": \{[^}]*\}', info, text, count=1)


def make(args: argparse.Namespace) -> None:
    """Child process: write one case's files."""
    with gzip.open(REAL) as f:
        text = f.read()
    kind, k, out = args.make
    k, out = int(k), Path(out)
    if kind == "scale":
        (out / "rank1.json").write_bytes(scaled(text, k))
    elif kind == "gzip":
        with gzip.open(out / "rank1.json.gz", "wb", compresslevel=6) as f:
            f.write(scaled(text, k))
    else:
        for r in range(k):
            (out / f"rank{r}.json").write_bytes(ranked(text, r, k))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scales", type=int, nargs="*", default=[1, 2, 5], help="one-file cases")
    ap.add_argument("--ranks", type=int, default=8, help="files in the many-ranks case (0: none)")
    ap.add_argument(
        "--dirs", type=Path, nargs="*", default=[], help="directories of your own traces, as is"
    )
    ap.add_argument("--gzip", action="store_true", help="each one-file case gzipped too")
    ap.add_argument("--no-hta", action="store_true", help="skip the peer")
    ap.add_argument("--json", type=Path, help="write the measured rows here too")
    ap.add_argument("--make", nargs=3, metavar=("KIND", "K", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        make(args)
        return
    hta_ok = (
        not args.no_hta
        and subprocess.run([sys.executable, "-c", "import hta"], capture_output=True).returncode
        == 0
    )
    cases = [(f"x{k}", "scale", k) for k in args.scales]
    cases += [(f"x{k}.gz", "gzip", k) for k in args.scales if args.gzip]
    cases += [(f"{args.ranks} ranks", "ranks", args.ranks)] if args.ranks else []
    cases += [(d.name, "dir", d) for d in args.dirs]
    rows: list[tuple] = []
    print(HEAD, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, kind, k) in enumerate(cases):
            d = k if kind == "dir" else Path(tmp) / f"case{i}"
            if kind != "dir":
                d.mkdir()
                # made in a child process: the kernel's peak RSS of a process started from this
                # one can include this one's, so this one must stay small
                cmd = [sys.executable, __file__, "--make", kind, str(k), str(d)]
                subprocess.run(cmd, check=True)
            mb = sum(f.stat().st_size for f in d.iterdir()) / 1e6  # as stored (gzip: compressed)
            cw = [
                sys.executable,
                "-m",
                "commwall",
                "ingest",
                str(d),
                "--quiet",
                "--no-prepare",
                "--db",
            ]
            wall, cpu, rss = measure(
                lambda tag, i=i, cw=cw: [*cw, str(Path(tmp) / f"{i}-{tag}.duckdb")]
            )
            rows.append(("commwall", label, mb, wall, cpu, rss))
            print(line(rows[-1]), flush=True)
            if hta_ok and kind != "gzip":  # gzip is compared with plain, for commwall alone
                code = f"from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir={str(d)!r})"
                wall, cpu, rss = measure(lambda tag, code=code: [sys.executable, "-c", code])
                rows.append(("HTA 0.5.0", label, mb, wall, cpu, rss))
                print(line(rows[-1]), flush=True)
    report(rows, [label for label, _, _ in cases], hta_ok)
    if args.json:
        write_json(args.json, rows)


_COLUMNS = ("MB", "wall s", "MB/s", "CPU s", "MB/CPU-s", "peak MB", "peak/MB")
HEAD = f"{'tool':<10} {'case':>8}" + "".join(f" {h:>8}" for h in _COLUMNS)


def line(row: tuple) -> str:
    """One measured row of the table (printed as soon as it is measured)."""
    tool, label, mb, wall, cpu, rss = row
    cells = (mb, wall, mb / wall, cpu, mb / cpu, rss, rss / mb)
    return f"{tool:<10} {label:>8}" + "".join(f" {v:>8.2f}" for v in cells)


def machine() -> dict:
    """The machine a benchmark ran on and when, for the tables made from its JSON."""
    model = ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
                      if ln.startswith("model name")), "")  # fmt: skip
        mem = Path("/proc/meminfo").read_text().split()[1]  # MemTotal, kB
        memory_gib = round(int(mem) / 2**20, 1)
    except (OSError, IndexError, ValueError):
        memory_gib = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "memory_gib": memory_gib,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }


def write_json(out: Path, rows: list[tuple]) -> None:
    """The measured rows, one object each, with the machine they were measured on."""
    keys = ("tool", "case", "mb", "wall_s", "cpu_s", "peak_mb")
    doc = {
        "benchmark": "ingest",
        "machine": machine(),
        "rows": [dict(zip(keys, row, strict=True)) for row in rows],
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")


def report(rows: list[tuple], labels: list[str], hta_ok: bool) -> None:
    """The ratios to HTA (same files, same run) and of gzip to plain."""
    by = {(t, c): (mb / w, mb / cpu, r) for t, c, mb, w, cpu, r in rows}
    if hta_ok:
        print("\nratios (same files, same run), commwall ÷ HTA:")
        for label in (lb for lb in labels if ("HTA 0.5.0", lb) in by):
            (cs, cc, cr), (hs, hc, hr) = by[("commwall", label)], by[("HTA 0.5.0", label)]
            print(
                f"  {label}: throughput {cs / hs:.1f}x (per CPU second {cc / hc:.1f}x), "
                f"memory {cr / hr:.2f}x"
            )
    times = {(t, c): (w, cpu) for t, c, _, w, cpu, _ in rows}
    gz = [(label, label[: -len(".gz")]) for label in labels if label.endswith(".gz")]
    if gz:
        print("\ngzip ÷ plain, same trace (commwall wall time; CPU time):")
    for label, plain in gz:
        (zw, zc), (pw, pc) = times[("commwall", label)], times[("commwall", plain)]
        print(f"  {label}: {zw / pw:.2f}x the time; {zc / pc:.2f}x the CPU")


if __name__ == "__main__":
    main()
