"""`commwall report --db FILE --run NAME [--baseline RUN] [--format text|json|csv]`: the run's
metrics; `--baseline` names the run whose nccl-tests tables the fabric section compares with."""

from __future__ import annotations

import argparse

import pandas as pd

from commwall.analysis import db
from commwall.cli.commands._output import (
    add_format,
    emit_csv,
    emit_json,
    emit_text,
    error,
    fmt_table,
)
from commwall.cli.commands._store import add_read_db, open_store
from commwall.cli.text_report import render_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "report",
        help="metrics of a run",
        description="τ_comp, τ_comm, overlap, η, γ, exposed communication and idle time per "
        "rank and step, and every later section (NCCL, stragglers, collectives, model).",
    )
    add_read_db(p)
    p.add_argument("--run", required=True, help="run name")
    p.add_argument(
        "--baseline",
        metavar="RUN",
        help="run whose nccl-tests tables the run's collectives are measured against (default: "
        "the run's own)",
    )
    add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the report."""
    try:
        with open_store(args) as store:
            report = store.run(args.run).report(baseline=args.baseline)
    except (FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    if args.format == "json":
        emit_json(report)
    elif args.format == "csv":
        ranks = pd.DataFrame(report["ranks"]).assign(scope="rank", step=None)
        steps = pd.DataFrame(report["steps"]).assign(scope="step")
        emit_csv(pd.concat([ranks, steps], ignore_index=True))
    else:
        emit_text(render_text(report, fmt_table))
    return 0
