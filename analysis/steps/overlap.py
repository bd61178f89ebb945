"""Compute/communication overlap per rank and per step (thin wrappers over overlap.sql)."""

from __future__ import annotations

import duckdb
import pandas as pd


def rank_overlap(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """Whole-trace metrics per rank (see analysis/sql/overlap.sql for definitions)."""
    return con.execute("SELECT * FROM rank_overlap(?)", [rid]).df()


def step_overlap(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """Metrics per (rank, step) inside step windows."""
    return con.execute("SELECT * FROM step_overlap(?)", [rid]).df()


def step_windows(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """The device window of every (rank, step)."""
    return con.execute("SELECT * FROM step_windows(?) ORDER BY rank, step", [rid]).df()
