"""`commwall export --db FILE --run NAME --out FILE`: a run's post-mortem (HTML or Markdown),
a before/after post-mortem (`--diff RUN`), its collectives priced from another run's nccl-tests
tables (`--baseline RUN`), or the merged timeline of all ranks
(`--format perfetto`: Chrome-trace JSON for ui.perfetto.dev and chrome://tracing)."""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from commwall.analysis import db
from commwall.analysis.api import Store
from commwall.cli.commands._output import error, note, printable
from commwall.cli.commands._store import add_read_db, open_store

FORMATS = ("html", "md", "perfetto")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "export",
        help="write a run's post-mortem (HTML, Markdown) or merged timeline (Perfetto)",
        description="Write the post-mortem of a run as one self-contained HTML page (charts "
        "embedded as SVG, no scripts or external resources; prints to PDF) or as Markdown; "
        "with --diff RUN, a before/after post-mortem against that run; with --baseline RUN, the "
        "run's collectives against that run's nccl-tests tables. --format perfetto "
        "writes all ranks on one aligned timeline as Chrome-trace JSON (gzipped when --out "
        "ends in .gz). The format follows --format, else the --out extension.",
    )
    add_read_db(p)
    p.add_argument("--run", required=True, help="run name")
    p.add_argument("--out", required=True, help="output file (.html, .md, .json[.gz]); - stdout")
    p.add_argument("--format", choices=FORMATS, help="output format")
    p.add_argument("--diff", metavar="RUN", help="compare with this run (HTML, Markdown)")
    p.add_argument(
        "--baseline",
        metavar="RUN",
        help="the run whose nccl-tests tables the collectives are compared with (default: the "
        "run's own), as in `commwall report --baseline`",
    )
    p.set_defaults(func=run)


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    name = args.out.lower().removesuffix(".gz")
    if name.endswith(".json"):
        return "perfetto"
    return "md" if name.endswith((".md", ".markdown")) else "html"


def _build(store: Store, args: argparse.Namespace, fmt: str) -> str:
    if fmt == "perfetto":
        return json.dumps(store.run(args.run).perfetto(), separators=(",", ":"))
    from commwall.dashboard.export import postmortem  # noqa: PLC0415 (charts: only these formats)

    return postmortem(store.con, args.run, fmt, baseline=args.diff, fabric_baseline=args.baseline)


def run(args: argparse.Namespace) -> int:
    """Build the document and write it."""
    fmt = _format(args)
    if args.diff and fmt == "perfetto":
        return error("--diff makes a before/after post-mortem (HTML or Markdown), not a timeline")
    if args.baseline and fmt == "perfetto":
        return error(
            "--baseline prices the post-mortem's collectives (HTML or Markdown), not a timeline"
        )
    if args.diff == args.run:
        return error("--diff names the run itself; give the baseline run to compare with")
    try:
        store = open_store(args)
    except FileNotFoundError as e:
        return error(str(e))
    try:
        with store:
            text = _build(store, args, fmt)
    except (db.RunNotFound, ValueError) as e:
        return error(str(e))
    if args.out == "-":
        sys.stdout.write(printable(text, None))
    elif args.out.lower().endswith(".gz"):
        Path(args.out).write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.out != "-":
        note(f"wrote {args.out}")
    return 0
