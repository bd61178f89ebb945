"""Stragglers: who arrives late at collectives, what it costs the others, and why.

Thin wrappers over analysis/sql/stragglers.sql (definitions and flag rules there), plus the
one-line verdict of the report.
"""

from __future__ import annotations

import json

import duckdb
import pandas as pd

from commwall.analysis.policy import (
    BUSY_OUTSIDE_OPERATORS,
    STRAGGLER_COMPUTE_FRACTION,
    STRAGGLER_MIN_COST_SHARE,
    STRAGGLER_MIN_EXCESS_NS,
    STRAGGLER_MIN_T,
    STRAGGLER_MIN_UNITS,
)
from commwall.analysis.units import NS_PER_MS

#: Report fields per rank: JSON key → straggler_ranks column (ns columns become ms).
_RANK_KEYS = {
    "rank": "rank",
    "host": "host",
    "score": "score",
    "late_fraction": "late_fraction",
    "wait_caused_ms": "caused_ns",
    "n_instances": "n_instances",
    "n_last": "n_last",
    "lateness_ms": "lateness_ns",
    "excess_ms": "excess_ns",
    "wait_ms": "wait_ns",
    "cost_share": "cost_share",
    "compute_ms": "compute_ns",
    "compute_ratio": "compute_ratio",
    "compute_score": "compute_score",
    "n_steps": "n_steps",
    "steps_flagged": "steps_flagged",
    "flagged": "flagged",
    "kind": "kind",
    "mean_share": "mean_share",
    "n_units": "n_units",
    "consistency_t": "consistency_t",
    "delay_ms": "delay_ns",
    "share_of_wait": "share_of_wait",
    "start_delay_ms": "start_delay_ns",
}


def straggler_ranks(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """Per rank over the run: late fraction, lateness, score, waits, compute, flag, kind."""
    return con.execute("SELECT * FROM straggler_ranks(?)", [rid]).df()


def step_start_delays(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """Per rank: how much later than the first rank it enters its steps (median)."""
    return con.execute("SELECT * FROM step_start_delays(?)", [rid]).df()


def straggler_steps(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """The same figures per (step, rank)."""
    return con.execute("SELECT * FROM straggler_steps(?)", [rid]).df()


def _describe(r: pd.Series) -> str:
    host = f" (host {r['host']})" if isinstance(r["host"], str) else ""
    if r["kind"] == "compute":
        why = (
            f"compute straggler: {r['compute_ns'] / NS_PER_MS:.2f} ms of operator work per step,"
            f" {r['compute_ratio']:.2f}x the median rank"
        )
    elif r["kind"] == "other":
        why = (
            late_not_compute(
                r["compute_ratio"], r["compute_ns"] / NS_PER_MS, _num(r.get("delay_ns")) / NS_PER_MS
            )
            + ": host, input, launch or sleep delay"
        )
    else:
        why = "late; no compute to compare it on (no steps, or no operator activity)"
    return (
        f"rank {r['rank']}{host}, {why}; arrives last in {r['n_last']}/{r['n_instances']}"
        f" collectives ({100 * r['late_fraction']:.0f}%) and causes "
        f"{100 * _num(r.get('mean_share')):.0f}% of the waiting on average over "
        f"{int(_num(r.get('n_units')))} units ({_share(r)} of all of it; t = "
        f"{_fmt(r.get('consistency_t'))}); median "
        f"{r['excess_ns'] / NS_PER_MS:.3f} ms later than the median rank; the others waited "
        f"{r['caused_ns'] / NS_PER_MS:.1f} ms for it ({100 * r['cost_share']:.0f}% of their time)"
    )


#: Operator work up to this far above the median rank's reads as "no more" (timing noise).
SAME_WORK = 1.05


def extra_work_ms(ratio: float | None, compute_ms: float | None) -> float | None:
    """A rank's operator work per step beyond the median rank's (stragglers.sql's
    compute_excess: compute - compute / ratio); None when either is unknown."""
    if ratio is None or compute_ms is None or pd.isna(ratio) or pd.isna(compute_ms) or ratio <= 0:
        return None
    return compute_ms * (1 - 1 / ratio)


def late_not_compute(
    ratio: float | None,
    compute_ms: float | None,
    delay_ms: float | None,
    busy_ratio: float | None = None,
) -> str:
    """How a late rank that is not a compute straggler stands on operator work, in words that
    agree with its ratio to the median rank: "without doing more operator work" only when it
    does not do more; otherwise its extra work per step beside the delay it does not explain
    (a compute straggler's extra work is at least STRAGGLER_COMPUTE_FRACTION of its delay).
    `busy_ratio` (its τ_comp over the median rank's), when BUSY_OUTSIDE_OPERATORS or more while
    its operator work is not more, is said too: the tables show that compute time, and without
    the words it reads as a compute straggler (a sleep in a gradient hook runs inside the
    autograd node that calls the hook, counted as compute, but in no operator)."""
    if ratio is None or pd.isna(ratio):
        return "late; no operator time to compare it on"
    extra = extra_work_ms(ratio, compute_ms) if compute_ms else None
    if ratio <= SAME_WORK or extra is None:
        outside = ""
        if (
            busy_ratio is not None
            and not pd.isna(busy_ratio)
            and busy_ratio >= max(BUSY_OUTSIDE_OPERATORS, ratio)
        ):
            outside = (
                f"; its compute time is {busy_ratio:.1f}x the median rank's, spent outside "
                "operators, in the autograd nodes or hooks that call them (a sleep, a lock, "
                "Python work in a hook)"
            )
        return f"late without doing more operator work ({ratio:.2f}x the median rank){outside}"
    delay = (
        f" of its {delay_ms:.1f} ms delay per step"
        if delay_ms is not None and not pd.isna(delay_ms)
        else ""
    )
    return (
        f"late by more than its extra operator work explains ({ratio:.2f}x the median rank: "
        f"{extra:.1f} ms more per step, under {100 * STRAGGLER_COMPUTE_FRACTION:.0f}%{delay})"
    )


def verdict(ranks: pd.DataFrame) -> str:
    """One sentence: the flagged ranks with host and evidence, or 'none' with the spread."""
    if ranks.empty:
        return "not applicable: no collective synchronises two or more ranks"
    if "share_of_wait" not in ranks:
        ranks = ranks.assign(share_of_wait=wait_shares(ranks))
    flagged = ranks[ranks["flagged"]]
    if not flagged.empty:
        return "straggler: " + "; ".join(_describe(r) for _, r in flagged.iterrows())
    top = ranks.loc[ranks["caused_ns"].idxmax()]
    return (
        f"none: {_not_flagged(top, len(ranks))}; the most, rank {top['rank']}, causes "
        f"{100 * _num(top.get('mean_share')):.0f}% of the waiting on average over "
        f"{int(_num(top.get('n_units')))} {_unit_words(top)} ({_share(top)} of all the "
        f"waiting; consistency {_fmt(top.get('consistency_t'))} — how many standard errors "
        f"its share stands above a fair share; flagged from {STRAGGLER_MIN_T:g}), last in "
        f"{top['n_last']}/{top['n_instances']}, "
        f"{100 * _num(top['cost_share']):.1f}% of all ranks' time"
    )


def _unit_words(top: pd.Series) -> str:
    """What the consistency test's units are (stragglers.sql): steps where the scope has at
    least 3 steps with waiting, else collective instances."""
    n_steps = _num(top.get("n_steps")) if "n_steps" in top else 0.0
    units = int(_num(top.get("n_units")))
    return "steps" if n_steps >= 3 and units <= n_steps else "collectives"


def _not_flagged(top: pd.Series, n: int) -> str:
    """Why the rank causing the most waiting is not flagged: the first rule of
    stragglers.sql's flag (same order) that it fails."""
    units, t = int(_num(top.get("n_units"))), top.get("consistency_t")
    if units < STRAGGLER_MIN_UNITS:
        return (
            f"too few steps or collectives ({units}; at least {STRAGGLER_MIN_UNITS}) to call a "
            "rank consistently late"
        )
    if t is None or pd.isna(t) or t < STRAGGLER_MIN_T:
        return f"no rank causes more than its fair share (1/{n}) of the waiting consistently"
    if _num(top.get("cost_share")) < STRAGGLER_MIN_COST_SHARE:
        return (
            "no rank's waiting matters: the one causing the most costs the others "
            f"{100 * _num(top.get('cost_share')):.1f}% of their time (flagged from "
            f"{100 * STRAGGLER_MIN_COST_SHARE:g}%)"
        )
    return (
        f"no rank is late by more than the timestamps resolve (median excess "
        f"{_num(top.get('excess_ns')) / 1000:.1f} µs, and no delay per step that much above "
        f"the median rank's; flagged from {STRAGGLER_MIN_EXCESS_NS / 1000:g} µs)"
    )


def wait_shares(ranks: pd.DataFrame) -> pd.Series:
    """Each rank's share of all the waiting of the run (caused / the sum over ranks; NaN when
    nobody caused any): the figure the diagnosis and the verdict quote, beside the mean share
    per unit that the flag rule tests (a few long waits weigh more in the total)."""
    total = _num(ranks["caused_ns"].sum())
    if total <= 0:
        return pd.Series(float("nan"), index=ranks.index)
    return ranks["caused_ns"].astype(float) / total


def _share(r: pd.Series) -> str:
    share = r["share_of_wait"]
    return "n/a" if pd.isna(share) else f"{100 * share:.0f}%"


def _num(v: float | None) -> float:
    return 0.0 if v is None or pd.isna(v) else float(v)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None or pd.isna(v) else f"{v:.1f}"


def _rank_records(df: pd.DataFrame) -> list[dict]:
    out = []
    for rec in json.loads(df.to_json(orient="records", double_precision=15)):
        row = {}
        for key, col in _RANK_KEYS.items():
            v = rec.get(col)
            row[key] = v / NS_PER_MS if key.endswith("_ms") and v is not None else v
        out.append(row)
    return out


def _step_records(df: pd.DataFrame) -> list[dict]:
    out = []
    for step, g in df.groupby("step", dropna=False, sort=True):
        top = g.loc[g["caused_ns"].idxmax()]
        out.append(
            {
                "step": None if pd.isna(step) else int(step),
                "flagged": sorted(int(r) for r in g.loc[g["flagged"], "rank"]),
                "top_rank": int(top["rank"]),
                "top_wait_caused_ms": float(top["caused_ns"]) / NS_PER_MS,
                "top_late_fraction": float(top["late_fraction"]),
            }
        )
    return out


def stragglers_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The report's `stragglers` key: flagged ranks, verdict, per-rank figures, per-step flags."""
    ranks = straggler_ranks(con, rid)
    ranks = ranks.assign(share_of_wait=wait_shares(ranks))
    starts = step_start_delays(con, rid)
    ranks = ranks.merge(starts[["rank", "start_delay_ns"]], on="rank", how="left")
    return {
        "flagged": sorted(int(r) for r in ranks.loc[ranks["flagged"], "rank"]),
        "verdict": verdict(ranks),
        "ranks": _rank_records(ranks),
        "steps": _step_records(straggler_steps(con, rid)),
    }
