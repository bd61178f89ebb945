"""`commwall serve --db FILE [--port N] [--host 127.0.0.1]`: run the Streamlit dashboard."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import commwall.dashboard as dashboard
from commwall.cli.commands._output import add_db, add_wait, error, note
from commwall.dashboard.database import DB_ENV, UPLOAD_ENV, WAIT_ENV, StoreFile
from commwall.ingest.store import WAIT_S, StoreError

APP_DIR = Path(dashboard.__file__).resolve().parent  # the Streamlit app and its .streamlit/


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "serve",
        help="serve the dashboard on a store",
        description="Run the Streamlit dashboard on a store (created when missing): upload "
        "runs, overview, ranks × steps, timeline, collectives, stragglers, model, NCCL, "
        "checklist, compare, export.",
    )
    add_db(p)
    add_serve_options(p)
    p.set_defaults(func=run)


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """--host, --port, --upload-dir and --wait (shared with `commwall demo`)."""
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    p.add_argument("--port", type=int, default=8501, help="port (default: %(default)s)")
    p.add_argument(
        "--upload-dir",
        help="where browser uploads are saved (default: <db stem>-uploads/ beside the store)",
    )
    add_wait(p)


def streamlit_command(host: str, port: int) -> list[str]:
    """The `streamlit run` command line; the rest of the configuration is in
    dashboard/.streamlit/config.toml, read because the server runs in that directory."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_DIR / "app.py"),
        "--server.address",
        host,
        "--server.port",
        str(port),
    ]


def serve(
    db: str | Path, host: str, port: int, upload_dir: str | None = None, wait: float = WAIT_S
) -> int:
    """Create the store if needed, then replace this process by the Streamlit server (so that
    signals reach it directly), whose every opening of the store waits up to `wait` seconds
    while another process holds it. Returns only on error."""
    store = StoreFile(db, wait)
    try:
        store.ensure()
    except StoreError as e:  # StoreBusy included
        return error(str(e))
    env = {**os.environ, DB_ENV: str(store.path), WAIT_ENV: str(wait)}
    if upload_dir:
        env[UPLOAD_ENV] = str(Path(upload_dir).resolve())
    note(f"commwall dashboard on http://{host}:{port}  (store {store.path})")
    sys.stdout.flush()
    sys.stderr.flush()
    os.chdir(APP_DIR)  # Streamlit reads .streamlit/config.toml from its working directory
    os.execve(sys.executable, streamlit_command(host, port), env)


def run(args: argparse.Namespace) -> int:
    """Serve the dashboard."""
    return serve(args.db, args.host, args.port, args.upload_dir, args.wait)
