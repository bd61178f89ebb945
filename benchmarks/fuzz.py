"""The long fuzz run and the kill -9 trials (the short ones run in the test suite).

Fuzz: mutated real seeds of every format (Kineto, Nsight Systems, NCCL logs, Flight Recorder)
through ingest and the report in a guarded worker process (tests/fuzzing.py); prints inputs
tried, clean rejections, accepted, crashes, hangs, native crashes and peak memory, and one
example input per distinct crash. Kills: `commwall ingest` of the 8-rank DLRM set into a store
holding another run, SIGKILLed at a random moment, N times; after each the store must open, the
other run be unchanged and the killed run absent or complete; at the end a retry must succeed.
Usage:

    python benchmarks/fuzz.py --inputs 100000 [--seed 0] [--workers 4] [--timeout 30] [--keep DIR]
    python benchmarks/fuzz.py --inputs 0 --kills 100
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import fuzzing  # noqa: E402 (after the path is set)
from tests.robust_support import cli, kill_trial, snapshot  # noqa: E402

SAMPLES = ROOT / "sample_traces"


def fuzz(args: argparse.Namespace) -> int:
    """The fuzz campaign; exit status 1 when anything crashed or hung."""
    stats = fuzzing.campaign(
        args.inputs, args.seed, args.timeout, args.budget_s, args.keep, progress=True,
        report_rate=args.report_rate, workers=args.workers,
    )  # fmt: skip
    print(stats.line())
    for signature, n in stats.kinds.most_common():
        print(f"  {n} × {signature}\n      e.g. {stats.examples[signature]}")
    return 1 if stats.crashes or stats.hangs or stats.native else 0


def kills(args: argparse.Namespace) -> int:
    """The kill -9 trials; exit status 1 when any check failed."""
    victim_files = sorted((SAMPLES / "dlrm_8rank").glob("*.json.gz"))
    other_files = sorted((SAMPLES / "gloo_4rank_sleep").glob("rank*.json*"))
    rng = random.Random(args.seed)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="commwall-kills-") as tmp:
        db = Path(tmp) / "kills.duckdb"
        argv = cli("ingest", *map(str, other_files), "--db", str(db), "--run", "other", "--quiet")
        subprocess.run(argv, cwd=ROOT, check=True)
        before = snapshot(db, "other")
        t = time.monotonic()
        argv = cli("ingest", *map(str, victim_files), "--db", str(db), "--run", "victim", "--quiet")
        subprocess.run([*argv, "--jobs", str(args.jobs)], cwd=ROOT, check=True)
        whole_s = time.monotonic() - t  # kills are spread over 1.2 x the time of a whole ingest
        _delete(db, "victim")
        survivors = 0
        counts = {"absent": 0, "complete": 0, "finished before the kill": 0}
        for i in range(args.kills):
            out = kill_trial(db, "victim", victim_files, rng, 1.2 * whole_s, jobs=args.jobs)
            ok = snapshot(db, "other") == before and out.victim_files in (0, len(victim_files))
            survivors += len(out.survivors)
            ok &= not out.survivors
            failures += not ok
            key = "finished before the kill" if out.finished_first else (
                "complete" if out.victim_files else "absent")  # fmt: skip
            counts[key] += 1
            if not ok:
                print(f"  kill {i}: after {out.after_s:.2f} s, {out.victim_files} files: FAILED")
            if out.victim_files:  # start the next trial from a store without the run
                _delete(db, "victim")
        retry = subprocess.run(
            cli("ingest", *map(str, victim_files), "--db", str(db), "--run", "victim", "--quiet"),
            cwd=ROOT,
        )  # fmt: skip
        failures += retry.returncode != 0
    print(
        f"kills {args.kills}: killed run absent {counts['absent']}, complete "
        f"{counts['complete']}, finished before the kill {counts['finished before the kill']}; "
        f"a whole ingest {whole_s:.1f} s; processes outliving a kill: {survivors}; "
        f"every check passed (store opens, other run unchanged, killed run absent or complete, no survivor): {failures == 0}; retry "
        f"{'succeeded' if retry.returncode == 0 else 'FAILED'}"
    )
    return 1 if failures else 0


def _delete(db: Path, run: str) -> None:
    from commwall.ingest import store  # noqa: PLC0415

    con = store.connect(db)
    try:
        store.delete_run(con, run)
    finally:
        con.close()


def main() -> int:
    """Run what the options ask for."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=10000, help="fuzz inputs to try")
    p.add_argument("--seed", type=int, default=0, help="random seed (runs are reproducible)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds before an input hangs")
    p.add_argument("--budget-s", type=float, help="stop fuzzing after this many seconds")
    p.add_argument("--report-rate", type=float, default=0.1, help="share of inputs reported")
    p.add_argument("--workers", type=int, default=1, help="guarded worker processes at once")
    p.add_argument("--keep", type=Path, help="directory to keep inputs that crashed or hung")
    p.add_argument("--kills", type=int, default=0, help="kill -9 trials to run")
    p.add_argument("--jobs", type=int, default=0, help="--jobs of the killed ingest")
    args = p.parse_args()
    status = fuzz(args) if args.inputs else 0
    if args.kills:
        status |= kills(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
