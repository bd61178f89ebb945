"""Commands that print one report section of one run (`commwall nccl`, `commwall hang`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from analysis import db
from cli.commands._output import add_db, add_format, emit_json, error, fmt_table

Builder = Callable[[Any, int], dict]
Renderer = Callable[[dict, Callable], str]


def add_section_command(
    sub: argparse._SubParsersAction,
    name: str,
    help_text: str,
    description: str,
    build: Builder,
    render: Renderer,
) -> None:
    """Register `commwall NAME --db F --run R [--format text|json]` printing `build`'s section
    as JSON or as `render`'s text."""
    p = sub.add_parser(name, help=help_text, description=description)
    add_db(p)
    p.add_argument("--run", required=True, help="run name")
    add_format(p, ("text", "json"))
    p.set_defaults(func=lambda args: print_section(args, build, render))


def print_section(args: argparse.Namespace, build: Builder, render: Renderer) -> int:
    """Print the section of run `args.run` in `args.format`; exit status 2 when the store or
    the run does not exist."""
    try:
        con = db.open_db(args.db)
        section = build(con, db.run_id(con, args.run))
    except (FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    if args.format == "json":
        emit_json(section)
    else:
        print(render(section, fmt_table))
    return 0
