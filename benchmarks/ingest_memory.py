"""Peak memory of `commwall ingest` against the real size of the file, for every format.

Each case is one file ingested by `commwall ingest FILE --db NEW.duckdb` in a fresh process
(default `--jobs`, so a large Kineto file is decoded by forked workers too), into a new store
in a temporary directory. Peak memory is measured from outside, over the whole process tree:
the sum of the processes' proportional set sizes (a shared page split between its sharers),
sampled every 10 ms, and never less than the largest single process's peak resident set from
the kernel (os.wait4). Every file is made in a child process, so this process stays small (a
child's peak resident set as the kernel counts it includes the pages of the process that
started it).

Inputs: the real traces of the repository as seeds (a DLRM Kineto rank, HTA's 53.7 MB trace,
plain and gzipped, and that trace scaled up by repeating its events; Nsight exports; NCCL logs;
Flight Recorder dumps, JSON and pickle), the repository's generators (tests/nsys_synth.py,
benchmarks/nccl_log.py, whose lines come from tests/nccl_log_gen.py), and crafted files: a
`.json.gz` whose gzip trailer claims 4 GiB, a truncated `.json.gz`, a gzip bomb, one whose
trailer claims 4 GiB in front of junk, an NCCL log with a 40,000-character line and one with
a 50 MB line, and long strings in each format.

The size the bound is stated against is the file's real size: its bytes for a plain file;
for a gzip file the bytes it really inflates to, but no more than ingest may inflate (100 ×
the compressed size + 64 MiB, `ingest/sources.py`): a bomb is refused at that point. Whatever
a header or trailer claims plays no part. MB are 2**20 bytes. Usage:

    python benchmarks/ingest_memory.py            # every case, ~6 minutes on 2 cores
    python benchmarks/ingest_memory.py --quick    # the small and crafted cases, ~2 minutes
    python benchmarks/ingest_memory.py --only nsys fr
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
HTA = ROOT / "tests/data/kineto/hta_df_index_resolver_rank1of2/df_index_resolver.json.gz"
DLRM = ROOT / "sample_traces/dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz"
NSYS = ROOT / "tests/data/nsys/nsys_ai_2gpu/mfu_2gpu_before.sqlite.gz"
NCCL = ROOT / "tests/data/nccl/001_efa_ofi_2.6.4_p3dn_8node_64rank_aws_libfabric_ring_lines.log.gz"
FR_JSON = ROOT / "sample_traces/fr_skip/rank0.json.gz"
FR_PICKLE = ROOT / "sample_traces/fr_skip_pickle/rank0.pkl.gz"
MB = 1 << 20
#: What ingest may inflate from a gzip file of n bytes (ingest/sources.py: MAX_RATIO, RATIO_SLACK).
GZIP_RATIO, GZIP_SLACK = 100, 64 * MB
#: The bound stated in README.md and docs/robustness.md: peak ≤ K × real size + C_MB.
STATED_K, STATED_C_MB = 12.0, 300.0


@dataclass(frozen=True)
class Case:
    """One file to ingest: its format, a label, the maker that writes it and its argument."""

    fmt: str
    label: str
    kind: str
    arg: str = ""
    quick: bool = True


CASES = [
    Case("kineto", "DLRM rank (trivial)", "copy", str(DLRM)),
    Case("kineto", "HTA 53.7 MB", "kineto_scaled", "1", quick=False),
    Case("kineto", "HTA x2", "kineto_scaled", "2", quick=False),
    Case("kineto", "HTA x5", "kineto_scaled", "5", quick=False),
    Case("kineto", "HTA .json.gz", "kineto_scaled_gz", "1"),
    Case("kineto", "HTA x5 .json.gz", "kineto_scaled_gz", "5", quick=False),
    Case("kineto", "60,000-char names", "kineto_long", "800"),
    Case("kineto", "trailer claims 4 GiB", "gz_claim", str(HTA)),
    Case("kineto", "truncated .json.gz", "gz_truncated", str(HTA)),
    Case("kineto", "claim 4 GiB, junk", "gz_junk", "8"),
    Case("kineto", "gzip bomb", "kineto_bomb", "4"),
    Case("nsys", "real 2 GPUs", "gunzip", str(NSYS)),
    Case("nsys", "real 2 GPUs .gz", "copy", str(NSYS)),
    Case("nsys", "8 ranks x 1000 steps", "nsys_synth", "1000"),
    Case("nsys", "8 ranks x 4000 steps", "nsys_synth", "4000", quick=False),
    Case("nsys", "8 ranks x 8000 steps", "nsys_synth", "8000", quick=False),
    Case("nsys", "200,000-char texts", "nsys_long", "200000"),
    Case("nccl", "real 64 ranks .gz", "copy", str(NCCL)),
    Case("nccl", "generated 20 MB", "nccl_gen", "20"),
    Case("nccl", "generated 300 MB", "nccl_gen", "300", quick=False),
    Case("nccl", "generated 100 MB .gz", "nccl_gen_gz", "100", quick=False),
    Case("nccl", "40,000-char line", "nccl_line", "40000"),
    Case("nccl", "50 MB line", "nccl_line", str(50 * MB)),
    Case("fr", "real dump .json.gz", "copy", str(FR_JSON)),
    Case("fr", "real dump .pkl.gz", "copy", str(FR_PICKLE)),
    Case("fr", "JSON 20 MB", "fr_json", "20"),
    Case("fr", "JSON 100 MB", "fr_json", "100", quick=False),
    Case("fr", "pickle 20 MB", "fr_pickle", "20"),
    Case("fr", "pickle 60 MB", "fr_pickle", "60", quick=False),
    Case("fr", "1 MB names", "fr_long", "40"),
]


# ---- makers: each runs in a child process and returns (file written, bytes it inflates to)


def _gunzipped(path: Path) -> bytes:
    with gzip.open(path) as f:
        return f.read()


def make_copy(arg: str, out: Path) -> tuple[Path, int]:
    src = Path(arg)
    dest = out / src.name
    shutil.copyfile(src, dest)
    return dest, len(_gunzipped(src)) if src.suffix == ".gz" else src.stat().st_size


def make_gunzip(arg: str, out: Path) -> tuple[Path, int]:
    dest = out / Path(arg).name.removesuffix(".gz")
    dest.write_bytes(_gunzipped(Path(arg)))
    return dest, dest.stat().st_size


def _scaled_hta(k: int) -> bytes:
    from commwall.ingest import scaled  # noqa: PLC0415 (benchmarks/ingest.py: this directory comes first)

    return scaled(_gunzipped(HTA), k)


def make_kineto_scaled(arg: str, out: Path) -> tuple[Path, int]:
    dest = out / "rank1.json"
    dest.write_bytes(_scaled_hta(int(arg)))
    return dest, dest.stat().st_size


def make_kineto_scaled_gz(arg: str, out: Path) -> tuple[Path, int]:
    text = _scaled_hta(int(arg))
    dest = out / "rank1.json.gz"
    with gzip.open(dest, "wb", compresslevel=6) as f:
        f.write(text)
    return dest, len(text)


def make_kineto_long(arg: str, out: Path) -> tuple[Path, int]:
    """`arg` events whose names are 60,000 characters (under the 65,536 cut), all different."""
    events = [
        json.dumps(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"{i:08d}" + "x" * 59_992,
                "pid": 1,
                "tid": 1,
                "ts": 1_700_000_000_000_000 + 10 * i,
                "dur": 5,
            }
        )  # fmt: skip
        for i in range(int(arg))
    ]
    head = '{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}'
    dest = out / "rank0.json"
    dest.write_text(head + ', "traceEvents": [\n' + ",\n".join(events) + "\n]}\n")
    return dest, dest.stat().st_size


def make_gz_claim(arg: str, out: Path) -> tuple[Path, int]:
    """The real gzip file with its trailer's size field set to 4 GiB - 1."""
    data = bytearray(Path(arg).read_bytes())
    data[-4:] = b"\xff\xff\xff\xff"
    dest = out / "rank1.json.gz"
    dest.write_bytes(data)
    return dest, len(_gunzipped(Path(arg)))


def make_gz_truncated(arg: str, out: Path) -> tuple[Path, int]:
    """The first half of the real gzip file (what a killed copy leaves)."""
    data = Path(arg).read_bytes()
    dest = out / "rank1.json.gz"
    dest.write_bytes(data[: len(data) // 2])
    d = __import__("zlib").decompressobj(wbits=47)
    return dest, len(d.decompress(data[: len(data) // 2]))


def make_gz_junk(arg: str, out: Path) -> tuple[Path, int]:
    """A 1 KB Kineto trace gzipped, then `arg` MB of random bytes ending in a trailer that
    claims 4 GiB: the real content is 1 KB, the file `arg` MB."""
    text = b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}'
    junk = random.Random(0).randbytes(int(arg) * MB)
    dest = out / "rank0.json.gz"
    dest.write_bytes(gzip.compress(text) + junk + b"\xff\xff\xff\xff")
    return dest, len(text)


def make_kineto_bomb(arg: str, out: Path) -> tuple[Path, int]:
    """A Kineto header then spaces, as gzip members of 1 MB of spaces each (~1,000x): `arg` MB
    of file that would inflate to ~`arg` GB."""
    member = gzip.compress(b" " * MB, compresslevel=9)
    dest = out / "rank0.json.gz"
    n = 0
    with open(dest, "wb") as f:
        f.write(gzip.compress(b'{"schemaVersion": 1, "traceEvents": ['))
        while f.tell() < int(arg) * MB:
            f.write(member)
            n += MB
    return dest, n


def make_nsys_synth(arg: str, out: Path) -> tuple[Path, int]:
    sys.path.insert(0, str(ROOT / "tests"))
    from nsys_synth import make_spec, write_nsys  # noqa: PLC0415 (test helper)

    dest = out / f"synth_8x{arg}.sqlite"
    write_nsys(make_spec(0, ranks=8, steps=int(arg)), dest, payloads=True, torch_ranges=True)
    return dest, dest.stat().st_size


def make_nsys_long(arg: str, out: Path) -> tuple[Path, int]:
    """A generated export whose NVTX range texts and names are `arg` characters (cut to 4,096
    as they are read)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from nsys_synth import make_spec, write_nsys  # noqa: PLC0415 (test helper)

    dest = out / "long_text.sqlite"
    write_nsys(make_spec(0, ranks=2, steps=100), dest, payloads=True, long_text=int(arg))
    return dest, dest.stat().st_size


def make_nccl_gen(arg: str, out: Path, gz: bool = False) -> tuple[Path, int]:
    from nccl_log import write_log  # noqa: PLC0415 (benchmarks/nccl_log.py, this directory)

    dest = out / ("nccl.log.gz" if gz else "nccl.log")
    return dest, write_log(dest, int(arg), gz)


def make_nccl_line(arg: str, out: Path) -> tuple[Path, int]:
    """The real 64-rank log with a line of `arg` characters in its middle (an NCCL line for
    40,000; one line of no newline at all for more)."""
    lines = _gunzipped(NCCL).split(b"\n")
    long = lines[len(lines) // 2].split(b"NCCL INFO")[0] + b"NCCL INFO " + b"x" * int(arg)
    lines.insert(len(lines) // 2, long)
    dest = out / "nccl_long_line.log"
    dest.write_bytes(b"\n".join(lines))
    return dest, dest.stat().st_size


def _fr_dump(mb: int, long_names: bool = False) -> dict:
    """The real dump with its entries repeated (fresh objects, ids renumbered) to ~`mb` MB of
    JSON; with `long_names`, `mb` entries whose profiling names are 1 MB each."""
    dump = json.loads(_gunzipped(FR_JSON))
    real = dump["entries"]
    per = len(json.dumps(real[0]))
    n = mb if long_names else mb * MB // per
    entries = []
    for i in range(n):
        e = json.loads(json.dumps(real[i % len(real)]))
        e["record_id"] = e["op_id"] = e["collective_seq_id"] = i
        if long_names:
            e["profiling_name"] = f"{i:08d}" + "n" * (MB - 8)
        entries.append(e)
    dump["entries"] = entries
    return dump


def make_fr_json(arg: str, out: Path) -> tuple[Path, int]:
    dest = out / "rank0.json"
    dest.write_text(json.dumps(_fr_dump(int(arg))))
    return dest, dest.stat().st_size


def make_fr_pickle(arg: str, out: Path) -> tuple[Path, int]:
    dest = out / "rank0.pkl"
    dest.write_bytes(pickle.dumps(_fr_dump(int(arg)), protocol=4))
    return dest, dest.stat().st_size


def make_fr_long(arg: str, out: Path) -> tuple[Path, int]:
    dest = out / "rank0.json"
    dest.write_text(json.dumps(_fr_dump(int(arg), long_names=True)))
    return dest, dest.stat().st_size


MAKERS: dict[str, Callable[[str, Path], tuple[Path, int]]] = {
    "copy": make_copy,
    "gunzip": make_gunzip,
    "kineto_scaled": make_kineto_scaled,
    "kineto_scaled_gz": make_kineto_scaled_gz,
    "kineto_long": make_kineto_long,
    "gz_claim": make_gz_claim,
    "gz_truncated": make_gz_truncated,
    "gz_junk": make_gz_junk,
    "kineto_bomb": make_kineto_bomb,
    "nsys_synth": make_nsys_synth,
    "nsys_long": make_nsys_long,
    "nccl_gen": make_nccl_gen,
    "nccl_gen_gz": lambda arg, out: make_nccl_gen(arg, out, gz=True),
    "nccl_line": make_nccl_line,
    "fr_json": make_fr_json,
    "fr_pickle": make_fr_pickle,
    "fr_long": make_fr_long,
}


# ---- measuring


def _pss_mb(pid: int) -> float:
    """Proportional set size of `pid` and its descendants, MB."""
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return 0.0
    pss = 0
    for p in procs:
        try:
            pss += p.memory_full_info().pss
        except psutil.Error:
            continue
    return pss / MB


def peak_of(cmd: list[str], every: float = 0.01) -> tuple[float, int, str, float]:
    """(peak MB of the process tree, exit status, the error line of stderr, wall seconds)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, done = [0.0], threading.Event()

    def sample() -> None:
        while not done.wait(every):
            peak[0] = max(peak[0], _pss_mb(proc.pid))

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    watcher.join()
    said = [ln for ln in err.splitlines() if "error" in ln] or err.splitlines() or [""]
    return (
        max(peak[0], usage.ru_maxrss / 1024),
        os.waitstatus_to_exitcode(status),
        said[0],
        time.perf_counter() - t,
    )


@dataclass
class Row:
    fmt: str
    kind: str  # the maker: files of one kind differ in size only
    label: str
    on_disk: int  # bytes of the file
    inflated: int  # bytes it really inflates to (= on_disk for a plain file)
    peak: float  # MB
    gz: bool
    outcome: str
    wall: float

    @property
    def real_mb(self) -> float:
        """The size the bound is stated against (module docstring), MB."""
        size = self.inflated
        if self.gz:
            size = min(size, GZIP_RATIO * self.on_disk + GZIP_SLACK)
        return size / MB


def measure(case: Case, tmp: Path, i: int) -> Row:
    """Make the case's file in a child process, ingest it into a new store, remove both."""
    d = tmp / f"case{i}"
    d.mkdir()
    made = subprocess.run(
        [sys.executable, __file__, "--make", case.kind, case.arg, str(d)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    path, inflated = json.loads(made.stdout.splitlines()[-1])
    path = Path(path)
    db = d / "store.duckdb"
    cmd = [sys.executable, "-m", "commwall", "ingest", str(path), "--db", str(db), "--run", "m"]
    cmd.append("--no-prepare")  # the ingest alone, not the analysis after it
    peak, code, last, wall = peak_of([*cmd, "--quiet"])
    outcome = "stored" if code == 0 else "refused: " + _short(last.split(f"{path.name}: ")[-1])
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    row = Row(
        case.fmt, case.kind, case.label, path.stat().st_size, inflated, peak, gz, outcome, wall
    )
    shutil.rmtree(d)
    return row


def _short(message: str, n: int = 60) -> str:
    return message if len(message) <= n else message[: n - 1] + "…"


# ---- the table and the bound


HEAD = (
    f"{'format':<7} {'file':<24} {'on disk MB':>10} {'inflated MB':>11} {'real MB':>8} "
    f"{'peak MB':>8} {'- base':>7} {'ratio':>6} {'wall s':>6}  outcome"
)


def line(r: Row, base: float) -> str:
    ratio = (r.peak - base) / r.real_mb if r.real_mb >= 1 else float("nan")
    return (
        f"{r.fmt:<7} {r.label:<24} {r.on_disk / MB:10.2f} {r.inflated / MB:11.1f} "
        f"{r.real_mb:8.1f} {r.peak:8.0f} {r.peak - base:7.0f} {ratio:6.2f} {r.wall:6.1f}  "
        f"{r.outcome}"
    )


def hull(rows: list[Row]) -> list[tuple[float, float]]:
    """The lines peak = k × real MB + C that lie above every row and touch two of them, of
    slope k ≥ 0: the edges of the rows' upper convex hull, as (k, C), the largest k first (a
    larger multiple buys a smaller constant; any other line above every row is beaten by one
    of these at every size)."""
    up: list[tuple[float, float]] = []
    for pt in sorted({(r.real_mb, r.peak) for r in rows}):
        while len(up) >= 2 and _turn(up[-2], up[-1], pt) >= 0:
            up.pop()
        up.append(pt)
    lines = []
    for i in range(len(up) - 1):
        (s1, p1), (s2, p2) = up[i], up[i + 1]
        if s2 > s1 and p2 >= p1:
            k = (p2 - p1) / (s2 - s1)
            lines.append((k, p1 - k * s1))
    return lines + [(0.0, max(r.peak for r in rows))]


def _turn(a: tuple[float, float], b: tuple[float, float], c: tuple[float, float]) -> float:
    """> 0 when a, b, c turn left (b lies below the line from a to c)."""
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])


def report(rows: list[Row], base: float) -> None:
    print(f"\nbaseline (the trivial ingest, {rows[0].label}): {base:.0f} MB")
    print(
        "fitted bounds (peak <= k x real MB + C MB over every row; each has the least C for its k):"
    )
    for k, c in hull(rows):
        print(f"  k = {k:6.2f}, C = {c:5.0f} MB")
    print("(peak - base) / real MB, the largest over the files of 10 MB or more, per format:")
    for fmt in dict.fromkeys(r.fmt for r in rows):
        big = [r for r in rows if r.fmt == fmt and r.real_mb >= 10]
        if big:
            worst = max(big, key=lambda r: (r.peak - base) / r.real_mb)
            print(f"  {fmt:<7} {(worst.peak - base) / worst.real_mb:5.2f} ({worst.label})")
    print(
        "growth with size, extra MB of peak per MB of file (files of one kind, smallest to largest):"
    )
    for kind in dict.fromkeys(r.kind for r in rows if r.kind != "copy"):
        same = sorted((r for r in rows if r.kind == kind), key=lambda r: r.real_mb)
        lo, hi = same[0], same[-1]
        if hi.real_mb > lo.real_mb + 10:
            grow = (hi.peak - lo.peak) / (hi.real_mb - lo.real_mb)
            print(f"  {hi.fmt:<7} {grow:5.2f} ({lo.label} to {hi.label})")
    c = max(r.peak - STATED_K * r.real_mb for r in rows)
    over = [r for r in rows if r.peak > STATED_K * r.real_mb + STATED_C_MB]
    print(
        f"stated bound: peak <= {STATED_K:g} x real MB + {STATED_C_MB:g} MB: "
        + ("holds for every row" if not over else "EXCEEDED by " + ", ".join(r.label for r in over))
        + f" (the least constant for k = {STATED_K:g} here: {c:.0f} MB)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the small and crafted cases only")
    ap.add_argument("--only", nargs="*", default=[], help="formats to run (kineto nsys nccl fr)")
    ap.add_argument("--make", nargs=3, metavar=("KIND", "ARG", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        path, inflated = MAKERS[args.make[0]](args.make[1], Path(args.make[2]))
        print(json.dumps([str(path), inflated]))
        return
    cases = [
        c for c in CASES if (c.quick or not args.quick) and (not args.only or c.fmt in args.only)
    ]
    if CASES[0] not in cases:
        cases.insert(0, CASES[0])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    print(HEAD, flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="commwall-mem-") as tmp:
        for i, case in enumerate(cases):
            rows.append(measure(case, Path(tmp), i))
            print(line(rows[-1], rows[0].peak), flush=True)
    report(rows, rows[0].peak)


if __name__ == "__main__":
    main()
