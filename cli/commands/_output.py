"""Output helpers shared by subcommands: formats, tables, errors."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from commwall.analysis.safe_text import printable, shorten

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("text", "json", "csv")


def add_format(p: argparse.ArgumentParser, choices: tuple[str, ...] = FORMATS) -> None:
    """The shared `--format` option."""
    p.add_argument("--format", choices=choices, default="text", help="output format")


def add_db(p: argparse.ArgumentParser) -> None:
    """The shared `--db FILE` option."""
    p.add_argument("--db", required=True, help="DuckDB store file")


#: The longest --wait accepted, in seconds (a day).
MAX_WAIT_S = 86400.0


def number(text: str, ok: Callable[[float], bool], needs: str) -> float:
    """A finite number for which `ok` holds, or argparse's error saying what it `needs`."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and ok(v)):
        raise argparse.ArgumentTypeError(f"needs {needs}: {text!r}")
    return v


def seconds(text: str) -> float:
    """--wait: 0 to 86,400 seconds."""
    return number(text, lambda v: 0 <= v <= MAX_WAIT_S, f"0 to {MAX_WAIT_S:.0f} seconds")


def add_wait(p: argparse.ArgumentParser) -> None:
    """The shared `--wait SECONDS` option of the commands that open a store: how long each of
    their steps that opens it waits while another process holds it (ingest.store.while_held)."""
    from commwall.ingest.store import WAIT_S  # noqa: PLC0415 (every command with --wait imports it)

    p.add_argument(
        "--wait",
        type=seconds,
        default=WAIT_S,
        metavar="SECONDS",
        help="while another process has the store open (an ingest, the dashboard computing a "
        f"report), wait this long for it at each step that opens it (default {WAIT_S:g})",
    )


def emit_json(obj: Any) -> None:
    """Pretty JSON on stdout, written at once (json.dump writes every token apart: a
    1,024-rank report made a million writes, 1.3 s of its 2.6 s)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def fmt_table(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    """A plain-text table with floats rounded."""
    import pandas as pd  # noqa: PLC0415 (only commands that print tables pay for pandas)

    if df.empty:
        return "(none)"
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
        elif not pd.api.types.is_numeric_dtype(shown[c]):  # object, str: mixed or missing
            shown[c] = shown[c].astype(object).map(lambda v: _cell(v, floatfmt))
    return shown.to_string(index=False)


def _cell(v: object, floatfmt: str = "{:.3f}") -> object:
    """A cell of a mixed column as printed: blank where there is no value (not None or NaN),
    whole numbers without decimals, other floats rounded, long text shortened."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else floatfmt.format(v)
    return shorten(v, MAX_CELL) if isinstance(v, str) else v


def error(msg: str) -> int:
    """Print an error on stderr; exit status 2."""
    print(printable(f"commwall: error: {msg}"), file=sys.stderr)
    return 2


#: Longest table cell printed.
MAX_CELL = 120


def emit_text(text: str) -> None:
    """Text on stdout, printable."""
    print(printable(text))


def emit_csv(df: pd.DataFrame) -> None:
    """A table as CSV on stdout, control characters escaped (values are never shortened)."""
    sys.stdout.write(printable(df.to_csv(index=False), None))


def note(msg: str) -> None:
    """A line on stderr (progress, summaries, warnings), printable."""
    print(printable(msg), file=sys.stderr)


class _OneLine(logging.Formatter):
    """Log records as one printable line each; tracebacks go only to the COMMWALL_LOG file."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(f"commwall: {record.levelname.lower()}: {record.getMessage()}")


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever sys.stderr is when a record comes (tests replace it)."""

    @property
    def stream(self) -> Any:  # noqa: D102
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


def setup_logging() -> None:
    """Log warnings and errors (e.g. a report section that failed) to stderr as one line each;
    with COMMWALL_LOG=FILE also append them to FILE with their tracebacks, for a bug report."""
    root = logging.getLogger("commwall")
    if root.handlers:
        return
    root.setLevel(logging.WARNING)
    stderr = _Stderr()
    stderr.setFormatter(_OneLine())
    root.addHandler(stderr)
    if path := os.environ.get("COMMWALL_LOG"):
        to_file = logging.FileHandler(path)
        to_file.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        root.addHandler(to_file)
    else:
        stderr.addFilter(_hint)


def _hint(record: logging.LogRecord) -> bool:
    if record.exc_info:
        record.msg = f"{record.msg} (set COMMWALL_LOG=FILE to keep the traceback)"
    return True


def unexpected(e: Exception) -> int:
    """What the CLI says about an exception no command handled: the store being busy in words
    (who holds it), anything else as an error to report, its traceback logged; status 2."""
    from commwall.ingest.store import StoreBusyError, busy  # noqa: PLC0415 (only on this path)

    if isinstance(e, StoreBusyError):
        return error(str(e))
    if (err := busy(e)) is not None:  # an opening that bypassed while_held: the same words
        return error(str(err))
    logging.getLogger("commwall").debug("unexpected error", exc_info=e)
    if path := os.environ.get("COMMWALL_LOG"):
        logging.getLogger("commwall").error("unexpected error", exc_info=e)
        return error(f"{type(e).__name__}: {e} (a commwall bug: traceback in {path})")
    return error(f"{type(e).__name__}: {e} (a commwall bug: set COMMWALL_LOG=FILE for details)")
