"""Rows of the NCCL macros as dicts, and where a finding is in the logs."""

from __future__ import annotations

from typing import Any

import duckdb


def rows(con: duckdb.DuckDBPyConnection, macro: str, rid: int) -> list[dict[str, Any]]:
    cur = con.execute(f"SELECT * FROM {macro}(?)", [rid])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def where(con: duckdb.DuckDBPyConnection, file_id: int | None, line: int | None) -> dict | None:
    if file_id is None:
        return None
    path = con.execute("SELECT path FROM files WHERE file_id = ?", [file_id]).fetchone()
    return {"file": path[0] if path else None, "line": line}


def ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] → '0-2,5,7-8'; '-' when empty."""
    out: list[str] = []
    for r in sorted(ranks):
        if out and r == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ",".join(out) or "-"
