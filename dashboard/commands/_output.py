"""Output helpers shared by subcommands: formats, tables, errors."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("text", "json", "csv")


def add_format(p: argparse.ArgumentParser, choices: tuple[str, ...] = FORMATS) -> None:
    """The shared `--format` option."""
    p.add_argument("--format", choices=choices, default="text", help="output format")


def add_db(p: argparse.ArgumentParser) -> None:
    """The shared `--db FILE` option."""
    p.add_argument("--db", required=True, help="DuckDB store file")


def emit_json(obj: Any) -> None:
    """Pretty JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def fmt_table(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    """A plain-text table with floats rounded."""
    import pandas as pd  # noqa: PLC0415 (only commands that print tables pay for pandas)

    if df.empty:
        return "(none)"
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
    return shown.to_string(index=False)


def error(msg: str) -> int:
    """Print an error on stderr; exit status 2."""
    print(f"commwall: error: {msg}", file=sys.stderr)
    return 2
