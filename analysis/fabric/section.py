"""`commwall fabric`: every nccl-tests table of a run beside the model (docs/model.md,
"Fabrics"), as JSON and as text."""

from __future__ import annotations

from typing import Any

import duckdb

from commwall.analysis import units
from commwall.analysis.fabric.compare import compare_tables
from commwall.analysis.fabric.tables import fabric_tables
from commwall.analysis.model.hardware import LinkSpec


def fabric_json(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    nodes: int | None = None,
    link_peak: LinkSpec | None = None,
) -> dict[str, Any]:
    """`{"tables": [...]}`: `compare_table` of each nccl-tests table of run `rid`; `nodes`
    for tables whose nodes the store does not know, `link_peak` the NIC (or link) whose peak
    the plateau is set against and NCCL's model runs with across nodes."""
    return {"tables": compare_tables(fabric_tables(con, rid, nodes), link_peak)}


def _num(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def fabric_text(report: dict[str, Any]) -> str:
    """The fabric report as text: per table its sentence and its rows."""
    tables = report["tables"]
    if not tables:
        return "No nccl-tests table found."
    out = []
    head = ("size", "measured µs", "busbw GB/s", "model µs", "other op µs", "NCCL µs", "line µs")
    for t in tables:
        where = f"{t['file'].rsplit('/', 1)[-1]}, table {t['table_no']}"
        out.append(f"== {where}\n{t['sentence']}")
        lines = [head]
        for r in t["rows"]:
            lines.append(
                (
                    units.size_text(r["size_bytes"]),
                    _num(r["measured_us"]),
                    _num(r["busbw_GBps"]),
                    _num(r["predicted_us"]),
                    _num(r["cross_op_predicted_us"]),
                    _num(r["nccl_model_us"]),
                    _num(r["line_us"]),
                )
            )
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        out.extend("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in lines)
        out.append("")
    return "\n".join(out).rstrip() + "\n"
