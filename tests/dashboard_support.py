"""Helpers shared by the test_dashboard_* files: stores, reports, uploads, the browser."""

from __future__ import annotations

import socket
from pathlib import Path

import duckdb

from analysis import db
from analysis.report import build_report, steps_section
from dashboard.ui import fmt_ms, fmt_ratio
from ingest import discover, store

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def ingest_dir(db_path: Path, run: str, folder: Path) -> None:
    """Ingest every file of `folder` as run `run` (the CLI path, not the upload path)."""
    con = store.connect(db_path)
    try:
        store.ingest(con, run, discover.expand([str(folder)]))
    finally:
        con.close()


def report_of(db_path: Path, run: str) -> dict:
    """The report of `run`, from a connection closed again before returning (the dashboard
    opens the same file read-write in this process)."""
    con = db.load_modules(duckdb.connect(str(db_path)))
    try:
        return build_report(con, run)
    finally:
        con.close()


def steps_of(db_path: Path, run: str) -> list[dict]:
    """The `steps` section of `run` alone (cheaper than the whole report)."""
    con = db.load_modules(duckdb.connect(str(db_path)))
    try:
        return steps_section(con, db.run_id(con, run))
    finally:
        con.close()


def upload_files(folder: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of every trace in `folder`, as a browser would upload them."""
    return [(p.name, p.read_bytes()) for p in discover.expand([str(folder)])]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def overview_metrics(s: dict) -> dict[str, str]:
    """The overview's metric tiles as the page must show them, from the report's summary."""
    return {
        "Step time": fmt_ms(s["step_ms"]),
        "τ_comp": fmt_ms(s["tau_comp_ms"]),
        "τ_comm": fmt_ms(s["tau_comm_ms"]),
        "Exposed comm": fmt_ms(s["exposed_comm_ms"]),
        "Overlap η": fmt_ratio(s["eta"]),
        "γ": fmt_ratio(s["gamma"]),
        "Idle": fmt_ms(s["idle_ms"]),
    }
