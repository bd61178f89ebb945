"""`commwall hang --db FILE --run NAME [--format text|json]`: who did not arrive, from the
run's PyTorch Flight Recorder dumps."""

from __future__ import annotations

import argparse

from analysis import db
from analysis.hang import hang_section
from dashboard.commands._output import add_db, add_format, emit_json, error, fmt_table
from dashboard.hang_text import render_hang


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "hang",
        help="why the job hung, from PyTorch Flight Recorder dumps",
        description="For each process group: the last collective every rank entered, the first "
        "one a rank never entered, ranks that never entered it, mismatched op, dtype or size "
        "with the culprit rank(s), ranks stuck in a collective, ranks without a dump, and one "
        "sentence naming the cause — the `hang` section of `commwall report`.",
    )
    add_db(p)
    p.add_argument("--run", required=True, help="run name")
    add_format(p, ("text", "json"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the section."""
    try:
        con = db.open_db(args.db)
        section = hang_section(con, db.run_id(con, args.run))
    except (FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    if args.format == "json":
        emit_json(section)
    else:
        print(render_hang(section, fmt_table))
    return 0
