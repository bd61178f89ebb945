"""`commwall capture [--out DIR] [options] -- LAUNCHER ARGS...`: run a training job so that it
leaves every source commwall reads in one run directory (docs/capture.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from commwall.cli import capture_run
from commwall.cli.commands._output import error, note, number


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "capture",
        help="run a training job with NCCL logs, Flight Recorder and profiling set up",
        description="Run the command after `--` (torchrun, srun, mpirun or python) with "
        "NCCL_DEBUG=INFO logs per process, PyTorch Flight Recorder on and the run directory "
        "for commwall.capture.profile() in the training script, all written into one run "
        "directory with a manifest.json. The job's exit status is passed through.",
    )
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="run directory (default commwall-runs/<UTC time>)"
    )
    p.add_argument("--ingest", metavar="DB", help="ingest the run directory into this store")
    p.add_argument("--run", help="run name for --ingest (default: the directory's name)")
    p.add_argument(
        "--inspector-plugin",
        metavar="PATH",
        help="NCCL Inspector profiler plugin (libnccl-profiler-inspector.so) to load",
    )
    p.add_argument(
        "--nccl-coll",
        action="store_true",
        help="also log one NCCL line per collective call (NCCL_DEBUG_SUBSYS COLL; large)",
    )
    p.add_argument("--no-nccl-log", action="store_true", help="leave NCCL_DEBUG as it is")
    p.add_argument(
        "--no-flight-recorder", action="store_true", help="leave Flight Recorder as it is"
    )
    p.add_argument(
        "--fr-buffer",
        type=lambda t: int(number(t, lambda v: v == int(v) and 1 <= v <= 1e7, "1 to 10,000,000")),
        default=capture_run.FR_BUFFER,
        metavar="N",
        help=f"Flight Recorder entries kept per rank (default {capture_run.FR_BUFFER})",
    )
    p.add_argument(
        "--hang-dump",
        type=lambda t: number(t, lambda v: 0 < v <= 86400, "0 to 86,400 seconds"),
        metavar="SECONDS",
        help="a rank with no finished step for this long dumps its Flight Recorder buffer "
        "(default 600; commwall.capture.profile in the script does it)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the job; its exit status (else the ingest's when the job succeeded)."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return error("no command to run: commwall capture [options] -- COMMAND ARGS")
    root = args.out or capture_run.default_dir()
    settings = capture_run.Settings(
        nccl=not args.no_nccl_log,
        nccl_coll=args.nccl_coll,
        flight_recorder=not args.no_flight_recorder,
        fr_buffer=args.fr_buffer,
        inspector_plugin=args.inspector_plugin,
        hang_dump_s=args.hang_dump,
    )
    try:
        status = capture_run.run(command, root, settings)
    except capture_run.CaptureError as e:
        return error(str(e))
    note(f"capture: job exited with status {status}; run directory {root}")
    if args.ingest is None:
        return status
    ingested = _ingest(root, args.ingest, args.run)
    return status or ingested


def _ingest(root: Path, db: str, name: str | None) -> int:
    """`commwall ingest ROOT --db DB [--run NAME]`, as that command runs it."""
    from commwall.cli.commands import ingest  # noqa: PLC0415 (only with --ingest)

    parser = argparse.ArgumentParser(prog="commwall")
    ingest.add_parser(parser.add_subparsers())
    argv = ["ingest", str(root), "--db", db, *(["--run", name] if name else [])]
    argv += ["--quiet"] if not sys.stderr.isatty() else []
    return int(ingest.run(parser.parse_args(argv)))
