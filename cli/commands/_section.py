"""Commands that print one report section of one run (`commwall nccl`, `commwall hang`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from commwall.analysis import db
from commwall.cli.commands._output import add_format, emit_json, emit_text, error, fmt_table
from commwall.cli.commands._store import add_read_db, open_store

Renderer = Callable[[dict, Callable], str]


def add_section_command(
    sub: argparse._SubParsersAction,
    name: str,
    help_text: str,
    description: str,
    section: str,
    render: Renderer,
) -> None:
    """Register `commwall NAME --db F --run R [--format text|json]` printing the report's
    `section` (a key of analysis.report.build.SECTIONS) as JSON or as `render`'s text."""
    p = sub.add_parser(name, help=help_text, description=description)
    add_read_db(p)
    p.add_argument("--run", required=True, help="run name")
    add_format(p, ("text", "json"))
    p.set_defaults(func=lambda args: print_section(args, section, render))


def print_section(args: argparse.Namespace, section: str, render: Renderer) -> int:
    """Print the section of run `args.run` in `args.format`; exit status 2 when the store or
    the run does not exist."""
    try:
        with open_store(args) as store:
            value = store.run(args.run).section(section)
    except (FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    if args.format == "json":
        emit_json(value)
    else:
        emit_text(render(value, fmt_table))
    return 0
