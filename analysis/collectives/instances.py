"""Collectives matched across ranks: instances, per-rank rows, clock alignment, per-op summary.

Thin wrappers over analysis/sql/collectives.sql and collective_summary.sql (definitions there).
"""

from __future__ import annotations

import json

import duckdb
import pandas as pd

from commwall.analysis.units import NS_PER_MS


def _query(con: duckdb.DuckDBPyConnection, macro: str, rid: int) -> pd.DataFrame:
    return con.execute(f"SELECT * FROM {macro}(?)", [rid]).df()


def collective_instances(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """One row per matched instance: sizes, arrivals, last rank, transfer, skews, bandwidths,
    and whether its time is a transfer and its bandwidth trusted (has_transfer, trusted_bw)."""
    return _query(con, "collective_instances_judged", rid)


def collective_ranks(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """One row per (instance, rank): aligned times, wait, lateness, arrival order, wait caused."""
    return _query(con, "collective_ranks", rid)


def clock_offsets(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """The estimated clock offset of every clock domain (host)."""
    return _query(con, "clock_offsets", rid)


def clock_check(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """Alignment quality: domains, residuals, end skew, causality violations."""
    return _jsonable(_query(con, "clock_check", rid))[0]


def collective_ops(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """Per-op summary: counts, bytes, median transfer and bandwidths, skews, waits."""
    return _query(con, "collective_ops", rid)


def collective_problems(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """Instances with an op mismatch, a size mismatch, or missing ranks."""
    return _query(con, "collective_problems", rid)


def matching_sentence(m: dict) -> str:
    """The report's `collectives.matching` in words. Calls matched by their order within each
    op (no sequence numbers) cannot show an op mismatch: a rank that called another op leaves
    its instance incomplete instead, so the count is "not checked" then, not 0."""
    checked = m.get("op_mismatch_checked")
    if checked is None or checked:  # (a report from before the key: as it was)
        ops = f"op mismatch {m.get('op_mismatch', 0)}"
    else:
        ops = "op mismatch not checked (no sequence numbers: calls matched by order per op)"
    keys = m.get("by_key") or {}
    how = ", ".join(
        f"{n} by {MATCH_WORDS.get(k, str(k))}" if len(keys) > 1 else f"by {MATCH_WORDS.get(k, k)}"
        for k, n in keys.items()
    )
    return (
        f"{m.get('instances', 0)} instances matched across ranks" + (f" ({how})" if how else "")
        + f"; incomplete {m.get('incomplete', 0)}, size mismatch {m.get('size_mismatch', 0)}, {ops}"
    )  # fmt: skip


#: How the instances of a process group were matched (collectives.sql, match_key), in words.
MATCH_WORDS = {
    "seq": "sequence number",
    "concrete_inputs": "the sequence number in Concrete Inputs",
    "order": "order within each op",
}


def _inferred_groups(con: duckdb.DuckDBPyConnection, rid: int) -> list[dict]:
    """The process groups inferred for calls the trace names none for (CPU traces of several
    groups): name, description, size and the ranks whose calls took it."""
    rows = con.execute(
        "SELECT pg_name, any_value(pg_desc), any_value(group_size), list(DISTINCT rank ORDER BY "
        "rank) FROM call_groups(?) WHERE pg_name IS NOT NULL GROUP BY pg_name ORDER BY pg_name",
        [rid],
    ).fetchall()
    return [{"pg_name": n, "pg_desc": d, "group_size": s, "ranks": r} for n, d, s, r in rows]


def _jsonable(df: pd.DataFrame) -> list[dict]:
    """Records with NaN → None and numpy scalars → Python."""
    return json.loads(df.to_json(orient="records", double_precision=15))


def _ms(records: list[dict]) -> list[dict]:
    """Keys with an `ns` word (`transfer_ns_median`) renamed to `ms`, values converted."""
    out = []
    for rec in records:
        row = {}
        for k, v in rec.items():
            words = k.split("_")
            if "ns" in words:
                k = "_".join("ms" if w == "ns" else w for w in words)
                v = None if v is None else v / NS_PER_MS
            row[k] = v
        out.append(row)
    return out


def collectives_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The report's `collectives` key: per-op figures (`ops`), matching quality (`matching`),
    inferred process groups and calls left unmatched (`groups`) and clock alignment
    (`clock`). Durations in ms, bandwidths in GB/s (1e9 B/s)."""
    ops = _ms(_jsonable(collective_ops(con, rid)))
    for rec in ops:
        rec["wait_ms_total"] = rec.pop("total_wait_ms")
    keys = con.execute(
        "SELECT match_key, count(*) FROM collective_instances(?) GROUP BY match_key", [rid]
    ).fetchall()
    unmatched = con.execute(
        "SELECT count(*), mode(unmatched_reason) FROM grouped_calls(?) "
        "WHERE unmatched_reason IS NOT NULL",
        [rid],
    ).fetchone() or (0, None)
    problems = collective_problems(con, rid)
    counts = problems["problem"].value_counts()
    offsets = _ms(_jsonable(clock_offsets(con, rid)))
    return {
        "ops": ops,
        "matching": {
            "instances": sum(n for _, n in keys),
            "by_key": {k: n for k, n in sorted(keys)},
            **{p: int(counts.get(p, 0)) for p in ("incomplete", "size_mismatch", "op_mismatch")},
            # an op mismatch shows only under a sequence key: `order` counts calls per op
            "op_mismatch_checked": sum(n for k, n in keys if k != "order"),
        },
        # process groups inferred where the trace names none per call (analysis/sql/groups.sql),
        # and the calls left out of matching because their group could not be told
        "groups": {
            "inferred": _inferred_groups(con, rid),
            "unmatched_calls": int(unmatched[0]),
            "unmatched_reason": unmatched[1],
        },
        "clock": {**_ms([clock_check(con, rid)])[0], "domains": offsets},
    }
