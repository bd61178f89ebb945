"""Mutation fuzzing of ingest and the report over real seeds of every format.

Each input is a real seed file (Kineto trace, Nsight Systems export, NCCL log, Flight Recorder
dump) changed by a few random mutations: bytes flipped, numbers swapped for awkward ones (2⁶³,
400 digits, 1e300, -1), strings for long, escaped or invalid UTF-8 ones, pieces cut out,
repeated or truncated, gzip wrapping (truncated, or with a lying trailer), SQLite cells set to
text, blobs, huge integers or reals. Inputs run in a worker process through the same path as
`commwall ingest` (a fresh in-memory store) and then the report; the parent guards it: a worker
that dies by a signal is a native crash, one that spends `timeout_s` seconds of CPU (and of
wall-clock time) on an input, or stays silent for WALL_FACTOR times that (stuck without
computing), a hang (it is killed and
replaced). Hangs are judged on CPU time so that a loaded machine, which slows every input down,
does not make slow inputs look like hangs. Outcomes: *accepted* (stored, the stored times inside 1970-2200, the report built),
*rejected* (an IngestError naming the file), *crash* (anything else: an exception, an error not
naming the file, an invariant broken). Used by tests/test_fuzz.py (a short run) and
benchmarks/fuzz.py (a long one).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
#: (name for the mutated file, seed): real files of every format, small enough to run fast.
SEEDS = [
    ("dlrm_rank0.json", ROOT / "sample_traces/dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz"),
    ("fr_rank0.pt.trace.json", ROOT / "sample_traces/fr_op/rank0.pt.trace.json.gz"),
    ("fr_rank0.json", ROOT / "sample_traces/fr_op/rank0.json.gz"),
    ("fr_rank0.pkl", ROOT / "sample_traces/fr_skip_pickle/rank0.pkl.gz"),
    ("nsys_report.sqlite", ROOT / "tests/data/nsys/nvfuser_1gpu/report2_nsys2024.6.sqlite.gz"),
    ("nccl.log", ROOT / "tests/data/nccl/003_ib_opa_2.7.8_bigscience_1node_4xV100_p2p_ipc_doubletree.log.gz"),
]  # fmt: skip
NUMBERS = [b"9223372036854775808", b"18446744073709551616", b"-1", b"0", b"1e300", b"-1e300",
           b"9" * 400, b"2147483648", b"1.5", b"9200000000000000.0", b"null", b'"7"', b"[]"]  # fmt: skip
#: Sizes, counts and rank numbers a header may claim (nranks, world size, counts, sizes).
CLAIMS = [b"1000000000", b"2147483647", b"2147483648", b"4294967296", b"9223372036854775807"]
#: Terminal sequences: OSC 52 (clipboard), OSC 0 (title), clear screen, cursor report, 8-bit
#: CSI, reset, 8-bit and 7-bit DCS.
ESCAPES = [b"\x1b]52;c;cHduZWQ=\x07", b"\x1b]0;t\x07", b"\x1b[2J", b"\x1b[6n", "\x9b2J".encode(),
           b"\x1bc", "\x90+q\x9c".encode(), b"\x1bP+q\x1b\\"]  # fmt: skip
STRINGS = ['"\\u001b[2J\\u001b]0;x\\u0007"', '"' + "x" * 70000 + '"', '"caf\xe9"', '""',
           '"ProfilerStep#99999999999999999999"', '"ncclKernel_AllReduce"', "{}",
           '"\\u001b]52;c;eA==\\u0007\\u009b6n"', "null", "[]"]  # fmt: skip
SQL_VALUES = ["garbage", b"\x00" * 10, 2**63 - 1, -(2**63), 1.8e19, -1, None, "x" * 200_000]
#: A worker silent for this many times the CPU limit of an input hangs, even without computing.
WALL_FACTOR = 4
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.){0,80}"')


def seeds() -> list[tuple[str, bytes]]:
    """The seeds' contents (gunzipped), and a generated nsys export with what the real one
    lacks: NCCL NVTX ranges with payloads and their schema, PyTorch's ranges, RANK in the
    captured environment."""
    from tests.nsys_synth import make_spec, write_nsys  # noqa: PLC0415

    out = [(name, gzip.decompress(p.read_bytes())) for name, p in SEEDS]
    with tempfile.TemporaryDirectory() as d:
        spec = make_spec(seed=0, ranks=2, steps=3)
        path = write_nsys(spec, Path(d) / "x.sqlite", payloads=True, torch_ranges=True,
                          env_rank=True)  # fmt: skip
        out.append(("nsys_payloads.sqlite", path.read_bytes()))
    return out


def _swap(
    rng: random.Random, data: bytes, pattern: re.Pattern[bytes], values: list[bytes]
) -> bytes:
    matches = list(pattern.finditer(data, rng.randrange(max(1, len(data) - 4096)), len(data)))[:64]
    if not matches:
        return data
    m = rng.choice(matches)
    return data[: m.start()] + rng.choice(values) + data[m.end() :]


def _bytes_mutation(rng: random.Random, data: bytes) -> bytes:
    """One mutation of a text format."""
    n = len(data)
    kind = rng.randrange(10)
    if kind == 8:  # a header's claim where a number was
        return _swap(rng, data, _NUMBER, CLAIMS)
    if kind == 9:  # a terminal sequence inside a line or a string
        a = rng.randrange(n)
        return data[:a] + rng.choice(ESCAPES) + data[a:]
    if kind == 0:  # flip a few bytes
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind in (1, 2):
        return _swap(rng, data, _NUMBER, NUMBERS)
    if kind == 3:
        return _swap(rng, data, _STRING, [s.encode("utf-8", "surrogateescape") if "\xe9" not in s
                                          else s.encode("latin-1") for s in STRINGS])  # fmt: skip
    if kind == 4:  # cut a piece out
        a = rng.randrange(n)
        return data[:a] + data[a + rng.randint(1, 4096) :]
    if kind == 5:  # repeat a piece
        a = rng.randrange(n)
        piece = data[a : a + rng.randint(1, 4096)]
        return data[:a] + piece * rng.randint(2, 50) + data[a:]
    if kind == 6:  # truncate
        return data[: rng.randrange(n)]
    return data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))


def _sqlite_mutation(rng: random.Random, data: bytes) -> bytes:
    """One mutation of an SQLite export: a cell set to an awkward value, or page bytes flipped."""
    if rng.random() < 0.25:
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.sqlite"
        path.write_bytes(data)
        con = sqlite3.connect(path)
        try:
            tables = [
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            t = rng.choice(tables)
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            if cols:
                col = rng.choice(cols)
                value = rng.choice(SQL_VALUES)
                con.execute(
                    f'UPDATE "{t}" SET "{col}" = ? WHERE rowid IN '
                    f'(SELECT rowid FROM "{t}" ORDER BY random() LIMIT {rng.choice((1, 1, 5, 1000))})',
                    [value],
                )
                con.commit()
        except (sqlite3.Error, UnicodeDecodeError, OverflowError):
            pass  # a file an earlier mutation broke: kept as it is
        finally:
            con.close()
        return path.read_bytes()


def make_input(rng: random.Random, pool: list[tuple[str, bytes]], out: Path) -> Path:
    """A mutated seed written under `out`: a few mutations, sometimes gzipped (and then perhaps
    truncated or given a trailer that lies)."""
    name, data = rng.choice(pool)
    sqlite = name.endswith(".sqlite")
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        if data:
            data = _sqlite_mutation(rng, data) if sqlite else _bytes_mutation(rng, data)
    if rng.random() < 0.15:
        data = gzip.compress(data, 1)
        name += ".gz"
        r = rng.random()
        if r < 0.3:
            data = data[: rng.randrange(max(1, len(data)))]
        elif r < 0.5:
            data = data[:-4] + b"\xff\xff\xff\xff"
    path = out / name
    path.write_bytes(data)
    return path


# --- the worker: runs inputs, says what happened ------------------------------------------


class _Session:
    """The worker's store: one in-memory database with the analysis macros loaded once; each
    input is ingested as run "f" and deleted afterwards."""

    def __init__(self) -> None:
        from commwall.analysis.db import load_modules  # noqa: PLC0415 (the worker imports once)
        from commwall.ingest import store  # noqa: PLC0415

        self.con = load_modules(store.connect(":memory:"))


_SESSION: list[_Session] = []


def run_one(path: Path, report: bool = True) -> dict:
    """Ingest `path` as run "f" of the worker's in-memory store, check what was stored and,
    with `report`, build the report: the outcome."""
    from commwall.analysis.report.build import build_report  # noqa: PLC0415
    from commwall.ingest import store  # noqa: PLC0415
    from commwall.ingest.errors import IngestError  # noqa: PLC0415
    from commwall.ingest.options import ParseOptions  # noqa: PLC0415
    from commwall.ingest.schema import MAX_NS  # noqa: PLC0415

    if not _SESSION:
        _SESSION.append(_Session())
    con = _SESSION[0].con
    try:
        try:
            store.ingest(con, "f", [path], ParseOptions(jobs=1))
        except IngestError as e:
            if str(path) not in str(e) or "please report it" in str(e):
                return {"outcome": "crash", "where": f"IngestError: {e}"[:300]}
            return {"outcome": "rejected"}
        for t in ("activities", "steps", "collectives"):
            bad = con.execute(
                f"SELECT count(*) FROM {t} WHERE ts < 0 OR ts > ? OR dur < 0 OR dur > ? - ts",
                [MAX_NS, MAX_NS],
            ).fetchone()[0]
            if bad:
                return {"outcome": "crash", "where": f"invariant: {bad} {t} rows out of range"}
        failed: dict = {}
        if report:
            built = build_report(con, "f")
            json.dumps(built, default=str)
            failed = built.get("analysis_errors") or {}
            if shown := _raw_controls(built):
                return {"outcome": "crash", "where": f"printed raw: {shown}"[:300]}
        return {"outcome": "accepted", "report": report, "section_failures": sorted(failed.items())}
    except Exception as e:  # noqa: BLE001 (that is what is being looked for)
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{type(e).__name__}@{Path(frame.filename).name}:{frame.lineno}: {e}"
        return {"outcome": "crash", "where": where[:300]}
    finally:
        store.delete_run(con, "f")


def _raw_controls(report: dict) -> str | None:
    """Where the text the CLI prints of `report` (the whole report, the NCCL and hang pages)
    holds a control character a terminal would act on; None when nowhere. Rendering the pages
    also checks that no odd value takes a page down."""
    from commwall.cli.commands._output import fmt_table, printable  # noqa: PLC0415
    from commwall.cli.text_report import render_text  # noqa: PLC0415
    from commwall.dashboard.hang_text import render_hang  # noqa: PLC0415
    from commwall.dashboard.nccl_text import render_nccl  # noqa: PLC0415

    pages = {
        "report": lambda: render_text(report, fmt_table),
        "nccl": lambda: render_nccl(report["nccl"], fmt_table) if "nccl" in report else "",
        "hang": lambda: render_hang(report["hang"], fmt_table) if "hang" in report else "",
    }
    for name, page in pages.items():
        m = _TERMINAL.search(printable(page(), None))
        if m:
            return f"{name}: {m.group()!r}"
    return None


#: What a terminal acts on: C0 controls but newline and tab, DEL, C1 controls.
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def serve(memory_limit: int = 4 << 30) -> None:
    """The worker loop: an input path per line on stdin, a JSON outcome per line on stdout."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    results = os.fdopen(os.dup(1), "w")  # outcomes only: whatever else prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        report, path = line.rstrip("\n").split(" ", 1)
        cpu = time.process_time()
        _self_test(Path(path).name)
        out = run_one(Path(path), report == "1")
        out["rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["cpu_s"] = time.process_time() - cpu
        results.write(json.dumps(out) + "\n")
        results.flush()


def _self_test(name: str) -> None:
    """Inputs named to check the guard itself: one that computes forever, one that waits
    forever, one that dies by a signal."""
    if name == SELF_TEST_HANG:
        while True:
            pass
    if name == SELF_TEST_STUCK:
        time.sleep(3600)
    if name == SELF_TEST_DIE:
        os.kill(os.getpid(), signal.SIGSEGV)


SELF_TEST_HANG, SELF_TEST_STUCK = "commwall-fuzz-hang", "commwall-fuzz-stuck"
SELF_TEST_DIE = "commwall-fuzz-die"


# --- the parent: guards the worker, counts ---------------------------------------------------


@dataclass
class Stats:
    """What a campaign found. `examples`: a signature → the saved input that showed it."""

    tried: int = 0
    rejected: int = 0
    accepted: int = 0
    crashes: int = 0
    hangs: int = 0
    native: int = 0
    section_failures: int = 0
    reports: int = 0
    peak_rss_mb: float = 0.0
    seconds: float = 0.0
    slowest_cpu_s: float = 0.0  # the most CPU one input took (ingest, and report when built)
    slowest: str = ""  # that input: its size and outcome
    examples: dict[str, str] = field(default_factory=dict)
    kinds: Counter = field(default_factory=Counter)

    def line(self) -> str:
        """One line of counts."""
        return (
            f"tried {self.tried}, rejected {self.rejected}, accepted {self.accepted}, "
            f"crashes {self.crashes}, hangs {self.hangs}, native crashes {self.native}, "
            f"reports built {self.reports} (with a section failed: {self.section_failures}), "
            f"peak memory "
            f"{self.peak_rss_mb:.0f} MB, {self.seconds:.0f} s "
            f"({self.tried / max(self.seconds, 1e-9):.1f} inputs/s); "
            f"slowest input {self.slowest_cpu_s:.1f} s of CPU ({self.slowest})"
        )


_COUNTERS = {"crash": "crashes", "hang": "hangs", "native": "native"}


class _Worker:
    def __init__(self) -> None:
        code = "from tests.fuzzing import serve; serve()"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env={**os.environ, "COMMWALL_FUZZ": "1"},
        )  # fmt: skip

    def run(self, path: Path, timeout_s: float, report: bool) -> dict:
        """The outcome of one input (see `poll`)."""
        self.submit(path, report)
        while (out := self.poll(timeout_s, 1.0)) is None:
            pass
        return out

    def submit(self, path: Path, report: bool) -> None:
        """Hand the worker an input (one at a time)."""
        assert self.proc.stdin is not None
        self.start, self.cpu = time.monotonic(), self._cpu()
        self.proc.stdin.write(f"{int(report)} {path}\n")
        self.proc.stdin.flush()

    def poll(self, timeout_s: float, wait_s: float = 0.0) -> dict | None:
        """The outcome of the input submitted, waiting up to `wait_s` for it; None while it
        runs. {"outcome": "hang", ...} when it has taken `timeout_s` seconds both of wall-clock
        time and of the worker's CPU (all its threads), or WALL_FACTOR times that of wall-clock
        time; {"outcome": "native", ...} when the worker died."""
        assert self.proc.stdout is not None
        if not select.select([self.proc.stdout], [], [], wait_s)[0]:
            used, waited = self._cpu() - self.cpu, time.monotonic() - self.start
            if min(used, waited) >= timeout_s or waited >= WALL_FACTOR * timeout_s:
                self.proc.kill()
                self.proc.wait()
                where = f"{used:.0f} s of CPU in {waited:.0f} s"
                return {"outcome": "hang", "where": where, "cpu_s": used}
            return None
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            return {"outcome": "native", "where": f"worker exited with {code}"}
        return json.loads(line)

    def _cpu(self) -> float:
        """CPU seconds the worker has used (0 once it is gone)."""
        try:
            t = psutil.Process(self.proc.pid).cpu_times()
        except psutil.Error:
            return 0.0
        return t.user + t.system

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def campaign(n: int, seed: int = 0, timeout_s: float = 30.0, budget_s: float | None = None,
             keep: Path | None = None, progress: bool = False,
             report_rate: float = 0.1, workers: int = 1) -> Stats:  # fmt: skip
    """Run up to `n` mutated inputs (stopping after `budget_s` seconds) on `workers` guarded
    worker processes at once, building the report for a `report_rate` share of them (it costs
    ten times an ingest); inputs that crash or hang are kept under `keep` when given. The
    inputs depend only on `seed`, not on `workers`."""
    rng = random.Random(seed)
    pool = seeds()
    stats = Stats()
    start = time.monotonic()
    idle = [_Worker() for _ in range(workers)]
    busy: dict[_Worker, Path] = {}
    made = 0
    with tempfile.TemporaryDirectory(prefix="commwall-fuzz-") as tmp:
        try:
            while True:
                over = budget_s is not None and time.monotonic() - start > budget_s
                while idle and made < n and not over:
                    case = Path(tmp) / str(made)
                    case.mkdir()
                    path = make_input(rng, pool, case)
                    worker = idle.pop()
                    worker.submit(path, rng.random() < report_rate)
                    busy[worker] = path
                    made += 1
                if not busy:
                    break
                select.select([w.proc.stdout for w in busy], [], [], 1.0)  # any done, or 1 s
                for worker in list(busy):
                    if (out := worker.poll(timeout_s)) is None:
                        continue
                    path = busy.pop(worker)
                    if out["outcome"] in ("hang", "native"):
                        worker.close()
                        worker = _Worker()
                    idle.append(worker)
                    _count(stats, out, path, keep)
                    if progress and stats.tried % 500 == 0:
                        stats.seconds = time.monotonic() - start
                        print(stats.line(), file=sys.stderr, flush=True)
        finally:
            for worker in [*idle, *busy]:
                worker.close()
    stats.seconds = time.monotonic() - start
    return stats


def _count(stats: Stats, out: dict, path: Path, keep: Path | None) -> None:
    """Count one outcome; the input is deleted unless it is the first example of its kind."""
    stats.tried += 1
    kind = out["outcome"]
    stats.peak_rss_mb = max(stats.peak_rss_mb, out.get("rss_kb", 0) / 1024)
    if out.get("cpu_s", 0) > stats.slowest_cpu_s:
        stats.slowest_cpu_s = out["cpu_s"]
        report_too = " with the report" if out.get("report") else ""
        stats.slowest = f"{path.name}, {path.stat().st_size:,} B, {kind}{report_too}"
    examples = len(stats.examples)
    if kind == "rejected":
        stats.rejected += 1
    elif kind == "accepted":
        stats.accepted += 1
        stats.reports += out["report"]
        stats.section_failures += bool(out["section_failures"])
        for key, why in out["section_failures"]:
            _example(stats, f"section {key}: {why}"[:160], path, keep)
    else:
        counter = _COUNTERS[kind]
        setattr(stats, counter, getattr(stats, counter) + 1)
        # a hang's signature is its seed (the time it took varies)
        where = path.name if kind == "hang" else out.get("where", path.name)
        _example(stats, f"{kind}: {where}"[:160], path, keep)
    if len(stats.examples) == examples:  # a long run would otherwise fill the disk
        shutil.rmtree(path.parent, ignore_errors=True)


def _example(stats: Stats, signature: str, path: Path, keep: Path | None) -> None:
    stats.kinds[signature] += 1
    if signature in stats.examples:
        return
    saved = path
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        saved = keep / f"{len(stats.examples):03d}_{path.name}"
        saved.write_bytes(path.read_bytes())
    stats.examples[signature] = str(saved)
