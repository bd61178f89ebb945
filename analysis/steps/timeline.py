"""One step of a run as drawable tracks (thin wrappers over timeline.sql).

Times come back in ms relative to the earliest start of the step's windows over all ranks, on
the aligned clock (each host's offset from clock_offsets removed), so every rank is drawn on
the same clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb
import pandas as pd

from commwall.analysis import db
from commwall.analysis.db import scalar
from commwall.analysis.report.session import run_session
from commwall.analysis.units import NS_PER_MS

#: How many ranks a timeline shows before the user chooses.
DEFAULT_RANKS = 8


def default_ranks(report: Mapping[str, Any]) -> list[int]:
    """The ranks a timeline of the run shows before the user chooses: the flagged stragglers
    first, then the lowest other ranks, DEFAULT_RANKS in all (sorted)."""
    ranks = sorted({r["rank"] for r in report.get("ranks") or []})
    flagged = set((report.get("stragglers") or {}).get("flagged") or [])
    chosen = sorted(flagged)[:DEFAULT_RANKS]
    chosen += [r for r in ranks if r not in flagged][: DEFAULT_RANKS - len(chosen)]
    return sorted(chosen)


def default_view(report: Mapping[str, Any]) -> tuple[int, list[int]] | None:
    """The step and ranks a timeline of the run opens on: its first step and default_ranks;
    None when the report has no steps."""
    steps = _steps(report)
    return (steps[0], default_ranks(report)) if steps else None


#: How many steps (from the first) a front end prepares with the opening view's ranks.
PREPARED_STEPS = 16


def prepared_views(report: Mapping[str, Any]) -> list[tuple[int, list[int]]]:
    """The (step, ranks) views worth computing ahead: the opening view's ranks in each of the
    first PREPARED_STEPS steps (flipping through steps is what a user does first)."""
    ranks = default_ranks(report)
    return [(s, ranks) for s in _steps(report)[:PREPARED_STEPS]]


def _steps(report: Mapping[str, Any]) -> list[int]:
    """The run's step numbers, ascending."""
    return sorted({int(r["step"]) for r in report.get("steps") or []})


def step_origin(con: duckdb.DuckDBPyConnection, rid: int, step: int) -> int | None:
    """The earliest aligned window start (ns) of step `step`; None if no rank has it."""
    return scalar(con, "SELECT origin_ns FROM step_origin(?, ?)", [rid, step])


def _relative(df: pd.DataFrame, origin: int) -> pd.DataFrame:
    start = (df["ts"] - origin) / NS_PER_MS
    out = df.assign(start_ms=start, end_ms=start + df["dur"] / NS_PER_MS)
    return out.drop(columns=["ts", "dur"]).reset_index(drop=True)


def tracks(con: duckdb.DuckDBPyConnection, rid: int, step: int, ranks: list[int]) -> pd.DataFrame:
    """Busy intervals per (rank, kind) in step `step`: rank, kind, start_ms, end_ms, and the
    activity covering most of each (top_name, top_ms) with n_activities (step_track_names)."""
    df = con.execute(
        "SELECT rank, kind, ts, dur, top_name, top_ns / 1e6 AS top_ms, n_activities "
        "FROM step_track_names(?, ?, ?) ORDER BY rank, kind, ts",
        [rid, step, ranks],
    ).df()
    return _relative(df, step_origin(con, rid, step) or 0)


def collectives(
    con: duckdb.DuckDBPyConnection, rid: int, step: int, ranks: list[int]
) -> pd.DataFrame:
    """Collective calls of `ranks` in step `step` (collective_ranks): rank, pg_name, op,
    instance (the seq or ordinal within the process group and op, as `commwall collectives`
    and the report number it), ik (the run-wide id of the collective, equal on every rank of
    it), bytes, wait_ms, start_ms, end_ms."""
    df = con.execute(
        f"SELECT rank, pg_name, op, instance, ik, bytes, wait_ns / {NS_PER_MS} AS wait_ms, ts, dur "
        "FROM collective_ranks(?) WHERE step = ? AND list_contains(?, rank) ORDER BY rank, ts",
        [rid, step, ranks],
    ).df()
    return _relative(df, step_origin(con, rid, step) or 0)


#: The cached tables (analysis/report/session.py) a view of one step reads: the matching for the
#: collectives' waits, the clock fit for every time on the aligned clock, the step windows.
VIEW_TABLES = (
    "_match_rows",
    "clock_offsets",
    "_aligned_calls",
    "_instances",
    "collective_ranks",
    "step_windows",
)


def view(
    con: duckdb.DuckDBPyConnection, rid: int, step: int, ranks: list[int]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`tracks` and `collectives` of `ranks` in step `step`, in one session of VIEW_TABLES:
    outside a report's session each would fit the clock and match the run's collectives again
    (a 1,024-rank run: 10.1 s for the two, 3.1 s in the session; 0.1 s more on a small run)."""
    with run_session(con, rid, VIEW_TABLES):
        return tracks(con, rid, step, ranks), collectives(con, rid, step, ranks)


def windows(con: duckdb.DuckDBPyConnection, rid: int, n: int) -> list[tuple[int, int]]:
    """The run's timeline span (run_span) cut into `n` equal windows [t0, t1) of the aligned
    clock (ns), the last ending at the span's end; [] when the run has no timeline activity."""
    start, end = db.row(con, "SELECT start_ns, end_ns FROM run_span(?)", [rid])
    if start is None or end <= start:
        return []
    cuts = [start + (end - start) * i // n for i in range(n)] + [end]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def window_tracks(
    con: duckdb.DuckDBPyConnection, rid: int, t0: int, t1: int, ranks: list[int]
) -> pd.DataFrame:
    """Busy intervals per (rank, kind) in the window [t0, t1) of the aligned clock (ns):
    rank, kind, start_ms, end_ms relative to t0."""
    df = con.execute(
        "SELECT rank, kind, ts, dur FROM window_tracks(?, ?, ?) "
        "WHERE list_contains(?, rank) ORDER BY rank, kind, ts",
        [rid, t0, t1, ranks],
    ).df()
    return _relative(df, t0)
