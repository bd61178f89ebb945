"""The run summary and the step decomposition, as report sections (sql/summary.sql and
sql/decomposition.sql hold the definitions; every consumer reads these sections)."""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pandas as pd

from commwall.analysis import db, policy
from commwall.analysis.units import NS_PER_MS

#: The six parts of a step, in the order they are stacked (JSON key → SQL column).
PARTS: dict[str, str] = {
    "compute_only_ms": "compute_only_ns",
    "compute_overlapped_ms": "compute_overlapped_ns",
    "exposed_transfer_ms": "exposed_transfer_ns",
    "exposed_wait_ms": "exposed_wait_ns",
    "memory_only_ms": "memory_only_ns",
    "idle_ms": "idle_ns",
}

#: Words for each part, for text and charts.
PART_LABELS: dict[str, str] = {
    "compute_only_ms": "compute (not overlapped)",
    "compute_overlapped_ms": "compute overlapped with communication",
    "exposed_transfer_ms": "exposed transfer",
    "exposed_wait_ms": "exposed wait for peers",
    "memory_only_ms": "memory copies only",
    "idle_ms": "idle",
}


def json_value(v: Any) -> Any:
    """JSON-safe scalar: numpy → Python, NaN and pandas' NA → None."""
    if v is None or v is pd.NA:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


_num = json_value


def _ms(v: Any) -> float | None:
    v = _num(v)
    return None if v is None else v / NS_PER_MS


def summary_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The report's `summary`: the mean (rank, step) row of the run and its ratios
    (sql/summary.sql states the aggregation), with the median and p90 step."""
    df = con.execute("SELECT * FROM run_summary(?)", [rid]).df()
    if df.empty:
        scope = (
            "steps"
            if db.scalar(con, "SELECT count(*) FROM steps WHERE run_id = ?", [rid])
            else "whole trace"
        )
        return {"scope": scope}
    r = df.iloc[0]
    out: dict[str, Any] = {
        "scope": r["scope"],
        "aggregation": "mean over (rank, step) windows"
        if r["scope"] == "steps"
        else "mean over ranks, each rank's whole trace one window",
        "n_windows": int(r["n_rows"]),
        "step_ms": _ms(r["step_ns"]),
        "step_ms_median": _ms(r["step_median_ns"]),
        "step_ms_p90": _ms(r["step_p90_ns"]),
        "tau_comp_ms": _ms(r["tau_comp_ns"]),
        "tau_comm_ms": _ms(r["tau_comm_ns"]),
        "overlap_ms": _ms(r["overlap_ns"]),
        "exposed_comm_ms": _ms(r["exposed_comm_ns"]),
        "idle_ms": _ms(r["idle_ns"]),
        "eta": _num(r["eta"]),
        "gamma": _num(r["gamma"]),
        "exposed_comm_share": _num(r["exposed_comm_share"]),
    }
    for key, col in PARTS.items():
        out[key] = _ms(r[col])
    out.update(_idle_kind(con, rid))
    out["memory_host_device_share"] = _num(
        db.scalar(con, "SELECT host_device_share FROM memory_copies(?)", [rid])
    )
    return out


def _idle_kind(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    """What the idle time waits for (sql/idle.sql): `idle_queued_share`, the share of the gaps
    between timeline activities during which the work ending the gap had been issued already
    (None without GPU launch times, or with fewer than policy.IDLE_MIN_LAUNCHED), and
    `launch_lead_ms`, the median over ranks of how far
    ahead of the device the host issues its work."""
    gaps, queued, launched, lead = db.row(
        con,
        "SELECT sum(gaps_ns), sum(queued_ns), sum(launched), median(lead_ns) FROM idle_gaps(?)",
        [rid],
    )
    known = (launched or 0) >= policy.IDLE_MIN_LAUNCHED and bool(gaps)
    return {
        "idle_queued_share": _num(queued / gaps) if known else None,
        "launch_lead_ms": _ms(lead) if known else None,
    }


def _part_records(df: Any, keys: tuple[str, ...]) -> list[dict]:
    out = []
    for row in df.to_dict("records"):
        rec = {k: _num(row[k]) for k in keys}
        rec["step_ms"] = _ms(row["step_ns"])
        for key, col in PARTS.items():
            rec[key] = _ms(row[col])
        out.append(rec)
    return out


def decomposition_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The report's `decomposition`: the run's step split into the six parts (means, adding up
    to the mean step), per rank (means over its steps) and per (rank, step)."""
    # in (rank, step) order: the join under run_rows gives its rows in any order, and the
    # report's list of steps must be the same from one run of the report to the next
    rows = con.execute("SELECT * FROM run_rows(?) ORDER BY rank, step NULLS FIRST", [rid]).df()
    if rows.empty:
        return {"scope": None, "parts": list(PARTS), "run": None, "ranks": [], "steps": []}
    cols = ["step_ns", *PARTS.values()]
    per_rank = rows.groupby("rank", as_index=False)[cols].mean()
    run = {"step_ms": _ms(rows["step_ns"].mean())}
    for key, col in PARTS.items():
        run[key] = _ms(rows[col].mean())
    steps = rows if rows["scope"].iloc[0] == "steps" else rows.iloc[0:0]
    return {
        "scope": rows["scope"].iloc[0],
        "parts": list(PARTS),
        "labels": PART_LABELS,
        "run": run,
        "ranks": _part_records(per_rank, ("rank",)),
        "steps": _part_records(steps, ("rank", "step")),
    }


def parts_per_step(steps: pd.DataFrame, parts: list[str]) -> pd.DataFrame:
    """The report's decomposition per (rank, step) (`steps`: rank, step and the `parts`
    columns, ms) as one row per step: each part's mean over the ranks (they add up to the
    step's mean window). step as text, in step order."""
    out = steps.groupby("step", as_index=False)[parts].mean()
    return out.assign(step=out["step"].astype(str))


def parts_per_rank_block(ranks: pd.DataFrame, parts: list[str], size: int) -> pd.DataFrame:
    """The report's decomposition per rank (`ranks`: rank and the `parts` columns, ms) in
    blocks of `size` consecutive ranks: each part's mean over the block's ranks (they add up
    to the block's mean step). rank becomes text: the rank, or the block's "first–last" (a
    last block of one rank: that rank)."""
    ranks = ranks.sort_values("rank").reset_index(drop=True)
    if size <= 1:
        return ranks.assign(rank=ranks["rank"].astype(str))
    block = ranks.index // size
    out = ranks.groupby(block)[parts].mean()
    first = ranks.groupby(block)["rank"].first().astype(str)
    last = ranks.groupby(block)["rank"].last().astype(str)
    label = first.where(first == last, first + "–" + last)
    return out.assign(rank=label.to_numpy()).reset_index(drop=True)
