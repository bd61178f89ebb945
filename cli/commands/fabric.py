"""`commwall fabric FILES... | --db FILE --run NAME`: nccl-tests tables beside the model."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from commwall.cli.commands._output import add_wait, error, printable


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "fabric",
        help="nccl-tests tables beside the model: what the fabric delivers",
        description="For every nccl-tests table (all_reduce_perf and its siblings, alone or "
        "inside NCCL logs), the measured curve beside the model calibrated without the size it "
        "predicts, the model calibrated on another op of the same fabric, NCCL's own tuning "
        "model uncalibrated and the single alpha-beta line, and the bus bandwidth plateau "
        "against the link's peak. Give files (read into a temporary store), or --db and --run.",
    )
    p.add_argument("paths", nargs="*", metavar="FILE", help="nccl-tests outputs or NCCL logs")
    p.add_argument("--db", help="DuckDB store file (with --run, instead of files)")
    p.add_argument("--run", help="run name in --db")
    add_wait(p)
    p.add_argument(
        "--nodes", type=int, metavar="N", help="nodes of the tables whose nodes are not known"
    )
    p.add_argument(
        "--link-peak",
        metavar="LINK",
        help="the link (NIC across nodes) to set the plateau against and to run NCCL's model "
        "with: a name (NDR, NVLink3) or a bandwidth per direction (50GB/s, 400Gbps)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the tables, compare, print."""
    from commwall.analysis.model.hardware import link_for_peak  # noqa: PLC0415

    if bool(args.paths) == bool(args.db):
        return error("give nccl-tests files, or --db and --run (not both)")
    if args.db and not args.run:
        return error("--db needs --run")
    if args.nodes is not None and args.nodes < 1:
        return error(f"--nodes must be at least 1, got {args.nodes}")
    try:
        peak = link_for_peak(args.link_peak) if args.link_peak else None
    except ValueError as e:
        return error(str(e))
    try:
        report = _from_files(args, peak) if args.paths else _from_db(args, peak)
    except (LookupError, ValueError, OSError) as e:
        return error(str(e))
    if isinstance(report, int):
        return report
    if args.format == "json":
        json.dump(report, sys.stdout, indent=1, allow_nan=False)
        print()
    else:
        from commwall.analysis.fabric.section import fabric_text  # noqa: PLC0415

        print(printable(fabric_text(report)), end="")
    return 0


def _from_db(args: argparse.Namespace, peak: object) -> dict | int:
    from commwall.cli.commands._store import open_store  # noqa: PLC0415

    with open_store(args) as store:
        return store.run(args.run).fabric(args.nodes, peak)


def _from_files(args: argparse.Namespace, peak: object) -> dict | int:
    """Ingest the files into a temporary store (the normal ingest: a bad file is refused
    with its name and the problem), then read it back."""
    from commwall.analysis.api import Store  # noqa: PLC0415
    from commwall.analysis.db import load_modules  # noqa: PLC0415
    from commwall.ingest import discover, store  # noqa: PLC0415
    from commwall.ingest.errors import IngestError  # noqa: PLC0415

    paths = discover.expand(args.paths)
    with tempfile.TemporaryDirectory(prefix="commwall-fabric-") as tmp:
        con = store.connect(Path(tmp) / "fabric.duckdb")
        try:
            try:
                store.ingest(
                    con, "fabric", paths, skippable=set(paths) - discover.named(args.paths, paths)
                )
            except IngestError as e:
                return error(str(e))
            load_modules(con)
            return Store.over(con).run("fabric").fabric(args.nodes, peak)
        finally:
            con.close()
