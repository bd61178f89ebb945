"""`commwall diff --db FILE RUN_A RUN_B [RUN_C ...]`: runs side by side against the first."""

from __future__ import annotations

import argparse
import json
import math
import textwrap

import pandas as pd

from commwall.analysis import db
from commwall.analysis.compare.diff import TABLES, change_sentence, regressions, unjudged
from commwall.cli.commands._output import (
    add_format,
    emit_csv,
    emit_json,
    emit_text,
    error,
    fmt_table,
    note,
)
from commwall.cli.commands._store import add_read_db, open_store

#: Titles of the tables in the text format (step_samples only when asked for by --table).
TITLES = {
    "step_time": "Step time (slowest rank per step), judged against run-to-run noise",
    "summary": "Headline metrics (means over ranks and steps)",
    "diagnosis": "Diagnosis",
    "decomposition": "Step decomposition per rank (mean ms per step)",
    "step_change": "Where the step's change went (parts of the step, means over each run's "
    "ranks, ms per step)",
    "collectives": "Collectives per op and message size (bytes)",
    "stragglers": "Stragglers per rank",
    "straggler_verdicts": "Straggler verdicts",
    "nccl": "NCCL",
    "model": "Model fit and prediction",
    "step_samples": "Step times, every step of every run (ms)",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "diff",
        help="compare runs against a baseline (the first run)",
        description="Set runs side by side against the first one (the baseline): step time as "
        "distributions with a noise-aware judgement (Mann-Whitney U test and a bootstrap "
        "confidence interval of the median change), the step decomposition per rank, "
        "collectives per op and size, stragglers, NCCL and model changes. With "
        "--fail-if-slower PCT the exit status is 1 when a run's step time regressed by more "
        "than PCT percent beyond noise (a CI gate).",
    )
    add_read_db(p)
    p.add_argument("runs", nargs="+", metavar="RUN", help="runs; the first is the baseline")
    p.add_argument(
        "--table", choices=("all", *TABLES), default="all", help="only this table (default all)"
    )
    p.add_argument(
        "--fail-if-slower",
        type=_percent,
        metavar="PCT",
        help="exit with status 1 when the median step time regressed by more than PCT %% "
        "beyond noise",
    )
    add_format(p)
    p.set_defaults(func=run)


def _percent(text: str) -> float:
    """A finite, non-negative percentage (nan or inf would make the gate never fail)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"a percentage must be finite and >= 0, not {text}")
    return v


def _paragraphs(df: pd.DataFrame) -> str:
    """The diagnosis table as text: each run's cause, then its paragraph wrapped whole."""
    out = []
    for rec in df.to_dict("records"):
        step = rec.get("replayed_step_ms")
        replayed = "" if step is None or step != step else f"; replayed step {step:.3f} ms"
        out.append(f"{rec['run']} ({rec.get('cause') or 'not available'}{replayed}):")
        out.append(textwrap.fill(str(rec.get("paragraph") or ""), 100) + "\n")
    return "\n".join(out).rstrip("\n")


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records", double_precision=15))


def run(args: argparse.Namespace) -> int:
    """Print the diff; exit 1 on a regression past --fail-if-slower."""
    if len(args.runs) < 2:
        return error("diff needs at least two runs (the first is the baseline)")
    if len(set(args.runs)) != len(args.runs):
        return error(f"a run is named twice: {args.runs}")
    try:
        with open_store(args) as store:
            tables = store.diff(*args.runs)
    except (FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    shown = tables if args.table == "all" else {args.table: tables[args.table]}
    slower = [] if args.fail_if_slower is None else regressions(tables, args.fail_if_slower)
    if args.format == "json":
        out: dict = {"baseline": args.runs[0], "runs": args.runs}
        out |= {k: _records(v) for k, v in shown.items()}
        if args.fail_if_slower is not None:
            out["regressions"] = slower
        emit_json(out)
    elif args.format == "csv":
        frames = [df.assign(table=k)[["table", *df.columns]] for k, df in shown.items()]
        emit_csv(pd.concat(frames, ignore_index=True))
    else:
        emit_text(f"baseline: {args.runs[0]}; compared: {', '.join(args.runs[1:])}")
        for k, df in shown.items():
            if k == "diagnosis":  # paragraphs, whole: a table cell would cut them
                emit_text(f"\n== {TITLES[k]}\n{_paragraphs(df)}")
            elif k == "step_change":  # the sentence first, then its figures
                said = [change_sentence(tables, r) for r in args.runs[1:]]
                lines = "\n".join(textwrap.fill(x, 100) for x in said if x)
                emit_text(f"\n== {TITLES[k]}\n{lines}\n{fmt_table(df)}")
            elif k != "step_samples" or args.table == k:
                emit_text(f"\n== {TITLES[k]}\n{fmt_table(df)}")
    if slower:
        msg = "; ".join(slower)
        note(f"commwall: step time regressed more than {args.fail_if_slower:g}%: {msg}")
        return 1
    blind = [] if args.fail_if_slower is None else unjudged(tables)
    if blind:
        note(f"commwall: step time could not be judged, so the gate fails: {'; '.join(blind)}")
        return 1
    return 0
