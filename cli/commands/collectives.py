"""`commwall collectives --db FILE --run NAME [--view ...] [--op OP]`: matched collectives."""

from __future__ import annotations

import argparse
import json

import pandas as pd

from commwall.analysis import db
from commwall.analysis.api import COLLECTIVE_VIEWS
from commwall.cli.commands._output import (
    add_format,
    emit_csv,
    emit_json,
    emit_text,
    error,
    fmt_table,
)
from commwall.cli.commands._store import add_read_db, open_store

#: Columns shown by the text format (json and csv give every column).
TEXT_COLUMNS = {
    "instances": [
        "op", "pg_name", "instance", "match_key", "n_ranks", "bytes", "last_rank",
        "transfer_ns", "skew_start_ns", "skew_end_ns", "algbw_GBps", "busbw_GBps", "step",
        "size_mismatch",
    ],
    "ranks": [
        "op", "pg_name", "instance", "rank", "host", "ts", "dur", "wait_ns", "lateness_ns",
        "arrival", "is_last", "caused_ns", "step",
    ],
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "collectives",
        help="collective instances matched across ranks",
        description="Every collective instance matched across the ranks of its process group, "
        "on aligned clocks: arrivals, last rank, waits, transfer time and bus bandwidth "
        "(--view instances); or one row per rank and instance (ranks), per op (ops), the "
        "clock offset per host (clock), or the instances that did not match cleanly (problems).",
    )
    add_read_db(p)
    p.add_argument("--run", required=True, help="run name")
    p.add_argument(
        "--view", choices=tuple(COLLECTIVE_VIEWS), default="instances", help="what to list"
    )
    p.add_argument("--op", help="only this op (allreduce, allgather, ...)")
    add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the chosen view."""
    try:
        with open_store(args) as store:
            df = store.run(args.run).collective_table(args.view)
    except (FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    if args.op is not None and "op" in df.columns:
        df = df[df["op"] == args.op]
    if args.format == "json":
        emit_json(json.loads(df.to_json(orient="records", double_precision=15)))
    elif args.format == "csv":
        emit_csv(df)
    else:
        cols = [c for c in TEXT_COLUMNS.get(args.view, df.columns) if c in df.columns]
        emit_text(fmt_table(pd.DataFrame(df[cols])))
    return 0
