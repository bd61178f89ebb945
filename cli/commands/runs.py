"""`commwall runs --db FILE`: the runs stored."""

from __future__ import annotations

import argparse

from commwall.cli.commands._output import (
    add_format,
    emit_csv,
    emit_json,
    emit_text,
    error,
    fmt_table,
)
from commwall.cli.commands._store import add_read_db, open_store


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser("runs", help="list the runs in a store", description="List stored runs.")
    add_read_db(p)
    add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the runs table."""
    try:
        with open_store(args) as store:
            df = store.runs()
    except FileNotFoundError as e:
        return error(str(e))
    if args.format == "json":
        emit_json(df.to_dict("records"))
    elif args.format == "csv":
        emit_csv(df)
    else:
        emit_text(fmt_table(df))
    return 0
