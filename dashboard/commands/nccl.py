"""`commwall nccl --db FILE --run NAME [--format text|json]`: what the run's NCCL logs say."""

from __future__ import annotations

import argparse

from analysis import db
from analysis.nccl import nccl_section
from dashboard.commands._output import add_db, add_format, emit_json, emit_text, error, fmt_table
from dashboard.nccl_text import render_nccl


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "nccl",
        help="findings from the run's NCCL_DEBUG logs",
        description="NCCL versions per rank, the transport used within and between nodes, "
        "GPU Direct RDMA, TCP sockets where RDMA was expected, ring and tree shapes, warnings, "
        "errors and watchdog timeouts (with the ranks that never issued the collective), and "
        "collective sizes — the `nccl` section of `commwall report`.",
    )
    add_db(p)
    p.add_argument("--run", required=True, help="run name")
    add_format(p, ("text", "json"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the section."""
    try:
        con = db.open_db(args.db)
        section = nccl_section(con, db.run_id(con, args.run))
    except (FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    if args.format == "json":
        emit_json(section)
    else:
        emit_text(render_nccl(section, fmt_table))
    return 0
