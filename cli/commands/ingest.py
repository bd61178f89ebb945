"""`commwall ingest PATH... --db FILE [--run NAME]`: parse files into the store."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import duckdb
from tqdm import tqdm

from commwall.cli.commands._output import add_db, add_wait, error, note, number, printable
from commwall.ingest import capture_manifest, discover, store
from commwall.ingest.errors import IngestError, shown_name
from commwall.ingest.options import ParseOptions


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "ingest",
        help="parse trace files into a store",
        description="Parse Kineto traces (.json, .json.gz, .pt.trace.json[.gz]), Nsight Systems "
        "SQLite exports and NCCL_DEBUG logs into one run of a DuckDB store. The run lands whole "
        "or not at all.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs")
    add_db(p)
    p.add_argument("--run", help="run name (default: name of the first path)")
    p.add_argument("--notes", help="free-text notes stored with the run")
    p.add_argument(
        "--rank", type=rank_number, help="rank of a single file that does not say its rank"
    )
    p.add_argument(
        "--comm-regex",
        action="append",
        default=[],
        metavar="REGEX",
        help="extra regex for communication kernels (repeatable; default nccl|rccl)",
    )
    p.add_argument(
        "--rank-map",
        action="append",
        default=[],
        metavar="KEY=RANK",
        help="map a process to a rank (nsys: PID=RANK, HOST:PID=RANK or device:ID=RANK; "
        "repeatable)",
    )
    p.add_argument("--step-range", metavar="REGEX", help="NVTX range names marking steps")
    p.add_argument(
        "--max-file-size",
        type=gigabytes,
        default=8.0,
        metavar="GB",
        help="refuse files that decompress to more than this (default 8 GB)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="ingest the good files even if some fail (NCCL Inspector: skip a damaged batch, "
        "count it and go on)",
    )
    p.add_argument(
        "--inspector-aggregates-only",
        action="store_true",
        help="NCCL Inspector: keep only the per-minute aggregates, no row per operation and "
        "rank (for the largest jobs; no per-instance straggler)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="parse on a local Dask cluster of N processes, into Parquet shards",
    )
    p.add_argument(
        "--scheduler", metavar="URL", help="parse on an existing Dask cluster (tcp://host:8786)"
    )
    p.add_argument(
        "--dataset",
        metavar="DIR",
        help="where Parquet shards go: directory or fsspec URL (default: DB.shards beside the "
        "store; alone, shards without Dask)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="processes that parse: N files at once, or one large file in N pieces at once "
        "(default 0: as many as there are cores, for 64 MB of files or more; 1: this process)",
    )
    p.add_argument(
        "--no-prepare",
        action="store_true",
        help="do not compute the run's analysis tables and report after the ingest (by default "
        "they are, and kept beside the store in DB.cache/, so that the run's first report reads "
        "them)",
    )
    add_wait(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


#: Largest --max-file-size accepted, in GB (beyond any file a machine could hold in memory).
MAX_GB = 1e6


#: The largest rank the store holds (its rank columns are 32-bit).
RANK_MAX = (1 << 31) - 1


def rank_number(text: str) -> int:
    """--rank: a whole number from 0 to RANK_MAX."""
    v = number(text, lambda v: v == int(v) and 0 <= v <= RANK_MAX, f"a rank, 0 to {RANK_MAX:,}")
    return int(v)


def gigabytes(text: str) -> float:
    """--max-file-size: a positive number of GB, at most MAX_GB."""
    return number(text, lambda v: 0 < v <= MAX_GB, f"a number of GB above 0, at most {MAX_GB:g}")


def run(args: argparse.Namespace) -> int:
    """Ingest; exit 0 when every file landed or was already there, 1 when some failed."""
    try:
        paths = discover.expand(args.paths)
        capture = capture_manifest.find(args.paths)  # a `commwall capture` run directory
    except IngestError as e:
        return error(str(e))
    if capture is not None:  # its manifest and per-rank records are checked, not parsed
        own = capture.own_files()
        paths = [p for p in paths if p.resolve() not in own]
    if not paths:
        return error("no files to ingest")
    if args.rank is not None and len(paths) > 1:
        return error("--rank applies to a single file; name ranks in the file names instead")
    if args.workers is not None and args.workers < 1:
        return error("--workers needs at least 1")
    if args.jobs < 0:
        return error("--jobs needs 0 (automatic) or more")
    name = args.run or Path(args.paths[0].rstrip("/")).name.split(".")[0]
    opts = ParseOptions(
        rank=args.rank,
        comm_patterns=tuple(args.comm_regex),
        max_bytes=int(args.max_file_size * 1e9),
        rank_map=tuple(args.rank_map),
        step_regex=args.step_range,
        jobs=args.jobs,
        keep_going=args.keep_going,
        inspector_instances=not args.inspector_aggregates_only,
    )
    total = sum(p.stat().st_size for p in paths)
    bar = tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        desc=f"ingest {shown_name(name)}",
        disable=args.quiet,
        file=sys.stderr,
    )

    done = iter(range(1, len(paths) + 1))

    def on_file(path: Path, result: store.FileResult) -> None:
        bar.update(path.stat().st_size)
        bar.set_postfix_str(
            f"{next(done)}/{len(paths)} files, {shown_name(path.name)}: "
            + STATUS_WORDS.get(result.status, result.status)
        )
        if result.status == "failed":
            tqdm.write(printable(f"  failed: {result.error}"), file=sys.stderr)
        for line in _counted(path, result):
            tqdm.write(printable(line), file=sys.stderr)

    checked: list[str] = []  # the capture's summary, once checked
    try:
        con = store.connect(args.db, wait_s=args.wait, on_wait=note)
    except store.StoreError as e:
        return error(str(e))
    try:
        if args.workers or args.scheduler or args.dataset:
            summary = _sharded(args, con, name, paths, opts, on_file)
        else:
            summary = store.ingest(
                con, name, paths, opts, args.notes, keep_going=args.keep_going, on_file=on_file,
                skippable=set(paths) - discover.named(args.paths, paths),
                finish=None if capture is None else partial(_check, capture, checked),
            )  # fmt: skip
    except (IngestError, OSError) as e:  # OSError: Dask scheduler unreachable
        bar.close()
        return error(f"{e}\nnothing was stored for run {name!r}")
    finally:
        con.close()
    bar.close()
    counts = {s: sum(f.status == s for f in summary.files) for s in ("ingested", "skipped")}
    ranks = sorted({r for f in summary.files for r in f.ranks})
    dropped = sum(f.dropped for f in summary.files)
    clamped = sum(f.clamped for f in summary.files)
    note(
        f"run {name!r}: {counts['ingested']} file(s) ingested, {counts['skipped']} already "
        f"present, {len(summary.failed)} failed; ranks {ranks or '-'}"
        + (f"; {dropped:,} event(s) dropped" if dropped else "")
        + (f"; {clamped:,} event(s) clamped" if clamped else "")
    )
    if skipped := store.unknown_sentence(summary.unknown):
        note(f"run {name!r}: {skipped}")
    for f in summary.failed:
        note(f"  failed: {f.error}")
    for f in summary.files:
        for line in _counted(Path(f.path), f):
            note(line)
    if checked:
        note(f"run {name!r}: capture {checked[0]}")
    if not summary.committed:
        note(f"nothing was stored for run {name!r}")
    elif counts["ingested"] and not args.no_prepare:
        _prepare(args.db, name, args.quiet, args.wait)
    return 1 if summary.failed else 0


#: How the progress bar names a file's outcome (store.FileResult.status).
STATUS_WORDS = {
    "skipped": "already present",
    store.UNKNOWN_FORMAT: "no known format, skipped",
}


def _prepare(db: str, name: str, quiet: bool, wait_s: float) -> None:
    """Compute run `name`'s analysis tables and report now (analysis.api.Run.keep), so that its
    first report reads them back; opening the store waits up to `wait_s` seconds while another
    process holds it, as the ingest's own opening does (store.while_held). A failure leaves
    the ingest as it was and is noted."""
    from commwall.analysis.api import Store  # here, not above: ingest alone never loads analysis

    if not quiet:
        note(f"run {name!r}: preparing its analysis tables and report")
    try:
        with store.while_held(lambda: Store(db), db, wait_s, note) as s:
            s.run(name).keep()
    except Exception as e:  # noqa: BLE001  (the run landed; its report computes them instead)
        note(f"run {name!r}: analysis tables not prepared ({e}); its first report computes them")


def _check(
    capture: capture_manifest.Capture,
    checked: list[str],
    con: duckdb.DuckDBPyConnection,
    rid: int,
) -> None:
    """Check a capture directory against the run about to land, and keep its summary."""
    checked.append(capture_manifest.record(con, rid, capture))


def _counted(path: Path, result: store.FileResult) -> list[str]:
    """The events of a file that were dropped, or stored clamped, and why."""
    out = []
    if result.dropped:
        out.append(f"  {path}: {result.dropped:,} event(s) dropped ({result.dropped_reason})")
    if result.clamped:
        out.append(f"  {path}: {result.clamped:,} event(s) clamped ({result.clamped_reason})")
    return out


def _sharded(
    args: argparse.Namespace,
    con: duckdb.DuckDBPyConnection,
    name: str,
    paths: list[Path],
    opts: ParseOptions,
    on_file: Callable[[Path, store.FileResult], None],
) -> store.IngestSummary:
    """Ingest as Parquet shards, parsed in process or on a Dask cluster (docs/scale_out.md)."""
    from commwall.ingest.exec import (
        distributed,  # here, not above: the default path never loads Dask
    )

    dataset = args.dataset or f"{args.db}.shards"
    kw = {"notes": args.notes, "keep_going": args.keep_going, "on_file": on_file}
    if not (args.workers or args.scheduler):
        return distributed.ingest(con, name, paths, dataset, opts, **kw)
    from commwall.ingest.exec import cluster

    with cluster.client(args.workers, args.scheduler) as client:
        return distributed.ingest(
            con, name, paths, dataset, opts, executor=cluster.executor(client), **kw
        )
