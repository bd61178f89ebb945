"""The nccl-tests tables of a run's logs: each table summed up (`nccl_test_tables`), with its
bus bandwidth per size, in a sentence."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from commwall.analysis import units
from commwall.analysis.db import has_table
from commwall.analysis.nccl.rows import rows as _rows
from commwall.analysis.nccl.rows import where as _where

#: The store table of nccl-tests rows (stores made before it existed lack it).
TESTS = "nccl_test_results"
#: nccl-tests prints bandwidths with two decimals: below this it printed 0.00.
TINY_BUSBW = 0.01
#: A table's smallest size up to this shows what one call costs apart from its bandwidth.
SMALL_MESSAGE = 64 << 10


def _tests(con: duckdb.DuckDBPyConnection, rid: int) -> list[dict[str, Any]]:
    """The nccl-tests tables of the run's logs (`nccl_test_tables`), each with where it starts
    and its bus bandwidth per message size (`curve`); none in a store made before they were
    read."""
    if not has_table(con, TESTS):
        return []
    curves: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for f, t, size, bw in con.execute(
        f"SELECT file_id, table_no, size_bytes, greatest(oop_busbw_gbs, ip_busbw_gbs) FROM {TESTS}"
        " WHERE run_id = ? AND coalesce(oop_busbw_gbs, ip_busbw_gbs) IS NOT NULL"
        " ORDER BY file_id, table_no, size_bytes, line_no",
        [rid],
    ).fetchall():
        curves.setdefault((f, t), []).append({"bytes": size, "busbw_gbs": bw})
    out = []
    for r in _rows(con, "nccl_test_tables", rid):
        curve = curves.get((r["file_id"], r["table_no"]), [])
        out.append(r | {"where": _where(con, r["file_id"], r["line_no"]), "curve": curve})
    return out


def test_name(t: Mapping[str, Any]) -> str:
    """The program an nccl-tests table came from (`all_reduce_perf`), or "nccl-tests"."""
    return f"{t['test']}_perf" if t.get("test") else "nccl-tests"


def test_sentence(t: Mapping[str, Any]) -> str | None:
    """What one nccl-tests table says, in a sentence (None: it has no figures)."""
    if t["peak_busbw_gbs"] is None:
        return None
    name = test_name(t)
    basis = {"bandwidth ratio": "its bus/algorithm bandwidth", "file name": "the file's name"}
    op = "" if t["test"] or not t["op"] else f" ({t['op']}, from {basis[t['op_basis']]})"
    who = ", ".join(
        x for x in (f"{t['n_ranks']} ranks" if t["n_ranks"] else "", t["gpu"] or "") if x
    )
    where = t["where"] or {}
    place = f"{Path(where['file']).name}:{where['line']}" if where.get("file") else ""
    text = f"{name}{op}{f' on {who}' if who else ''}: " + _bandwidth_text(t)
    if t["wrong_values"] or t["wrong_rows"]:
        text += (
            f"; WRONG RESULTS: {t['wrong_values'] or 0} value(s) out of bounds, "
            f"{t['wrong_rows']} size(s) with wrong values (a GPU, memory or link fault: "
            "take these GPUs out of service until a rerun is clean)"
        )
    return text + (f" ({place})" if place else "")


def _bandwidth_text(t: Mapping[str, Any]) -> str:
    """The bus bandwidth of an nccl-tests table: its peak and at what size, at the largest size
    when that is 5% lower, and the time at the smallest size."""
    peak, largest = t["peak_busbw_gbs"], t["largest_busbw_gbs"]
    small = ""
    if t["smallest_time_us"] is not None and t["min_bytes"] <= SMALL_MESSAGE:
        small = f"{t['smallest_time_us']:.4g} µs a call at {units.size_text(t['min_bytes'])}"
    if peak < TINY_BUSBW:  # printed as 0.00: only small messages, the time is what they show
        return f"bus bandwidth under {TINY_BUSBW} GB/s as printed" + (f"; {small}" if small else "")
    text = f"bus bandwidth peaks at {peak:.3g} GB/s ({units.size_text(t['peak_bytes'])} messages)"
    if t["max_bytes"] != t["peak_bytes"] and largest < peak * 0.95:
        text += f", {largest:.3g} GB/s at the largest size, {units.size_text(t['max_bytes'])}"
    return text + (f"; {small}" if small and t["min_bytes"] != t["max_bytes"] else "")
