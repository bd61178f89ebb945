"""`commwall export --db FILE --run NAME --out FILE`: a run's post-mortem as HTML or Markdown."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis import db
from analysis.report import build_report
from dashboard.commands._output import add_db, error
from dashboard.export import render_html, render_markdown


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "export",
        help="write a run's post-mortem report (HTML or Markdown)",
        description="Write the report of a run as one self-contained HTML page (no external "
        "resources) or as Markdown. The format follows --format, else the --out extension.",
    )
    add_db(p)
    p.add_argument("--run", required=True, help="run name")
    p.add_argument("--out", required=True, help="output file (.html or .md); - for stdout")
    p.add_argument("--format", choices=("html", "md"), help="output format")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the report and write it."""
    fmt = args.format or ("md" if Path(args.out).suffix.lower() in (".md", ".markdown") else "html")
    try:
        con = db.open_db(args.db)
    except FileNotFoundError as e:
        return error(str(e))
    try:
        report = build_report(con, args.run)
    except db.RunNotFound as e:
        return error(str(e))
    finally:
        con.close()
    text = render_markdown(report) if fmt == "md" else render_html(report)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
