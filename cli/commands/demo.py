"""`commwall demo`: ingest the bundled sample_traces/ into a local store, report on them, and
serve the dashboard on that store (`--no-serve`: only print)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from commwall.analysis.api import Store
from commwall.cli.commands._output import emit_text, error, note
from commwall.cli.commands.serve import add_serve_options, serve
from commwall.ingest import discover, store

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def sample_sets(root: Path = SAMPLES) -> list[Path]:
    """The sample sets: each subdirectory of sample_traces/ is one run."""
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "demo",
        help="ingest the bundled sample traces, report on them and serve the dashboard",
        description="Ingest every set in sample_traces/ as its own run of a local store, "
        "print the headline of each, then serve the dashboard on that store.",
    )
    p.add_argument("--db", default="commwall-demo.duckdb", help="store file (default: %(default)s)")
    p.add_argument("--no-serve", action="store_true", help="only ingest and print the headlines")
    add_serve_options(p)
    p.set_defaults(func=run)


def ingest_samples(db_path: str, wait: float = store.WAIT_S) -> list[str]:
    """Ingest every sample set (already-present files are skipped), waiting up to `wait`
    seconds for a store another process holds; returns the run names."""
    if not SAMPLES.is_dir():
        raise FileNotFoundError(f"{SAMPLES}: sample traces not found (run from a source checkout)")
    con = store.connect(db_path, wait_s=wait, on_wait=note)
    names = []
    try:
        for d in sample_sets():
            found = discover.expand([str(d)])
            store.ingest(con, d.name, found, skippable=found)
            names.append(d.name)
            note(f"ingested {d.name}")
    finally:
        con.close()
    return names


def headline(report: Mapping[str, Any]) -> str:
    """The report's headline (the diagnosis's, else the verdict of its hang), on one line."""
    d = report.get("diagnosis") or {}
    h = report.get("hang") or {}
    text = d.get("answer") or d.get("headline") or (h.get("verdict") if h.get("present") else None)
    return " ".join(str(text or "no diagnosis: see its report").split())


def run(args: argparse.Namespace) -> int:
    """Ingest and print every sample run's report, then serve the dashboard (unless --no-serve)."""
    try:
        names = ingest_samples(args.db, args.wait)
    except (FileNotFoundError, store.StoreError) as e:
        return error(str(e))
    with store.while_held(lambda: Store(args.db), args.db, args.wait, note) as s:
        for name in names:
            emit_text(f"{name}: {headline(s.run(name).report())}")
    emit_text(f"store: {args.db}  (a run's whole report: commwall report --db {args.db} --run RUN)")
    if args.no_serve:
        return 0
    return serve(args.db, args.host, args.port, args.upload_dir, args.wait)
