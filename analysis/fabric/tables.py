"""The nccl-tests tables of a run as fabric measurements (analysis/sql/nccl_tests.sql:
`nccl_test_fabrics`, `nccl_test_points`): per table its op, ranks, nodes, GPU and curve."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from commwall.analysis.db import has_table, scalar


@dataclass(frozen=True)
class Table:
    """One nccl-tests table: where it is, what it measured, on what, and its rows (size in
    bytes; time in µs, bus and algorithm bandwidth in GB/s, as nccl-tests prints them)."""

    file: str
    table_no: int
    line_no: int | None
    op: str | None
    op_basis: str | None
    n_ranks: int | None
    ranks_basis: str | None
    n_nodes: int | None
    gpu: str | None
    sizes: tuple[int, ...]
    times_us: tuple[float, ...]
    busbw_GBps: tuple[float | None, ...]

    @property
    def name(self) -> str:
        """`file` (its base name) and the table's number when the file holds several."""
        return f"{Path(self.file).name}#{self.table_no}"

    @property
    def gpus_per_node(self) -> int | None:
        """Ranks per node where both are known and divide."""
        n, nodes = self.n_ranks, self.n_nodes
        return n // nodes if n and nodes and n % nodes == 0 else None


def _stored_nodes(con: duckdb.DuckDBPyConnection, rid: int) -> dict[tuple[int, int], int]:
    """Nodes per table from the hosts of its device lines, in stores whose nccl-tests rows
    carry them (a column `n_nodes`); empty otherwise."""
    cols = scalar(
        con,
        "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'nccl_test_results'"
        " AND column_name = 'n_nodes'",
    )
    if not cols:
        return {}
    q = (
        "SELECT file_id, table_no, max(n_nodes) FROM nccl_test_results WHERE run_id = ?"
        " AND n_nodes > 0 GROUP BY ALL"
    )
    return {(f, t): n for f, t, n in con.execute(q, [rid]).fetchall()}


def fabric_tables(
    con: duckdb.DuckDBPyConnection, rid: int, nodes: int | None = None
) -> list[Table]:
    """The run's nccl-tests tables with at least one figure. `nodes` is used for tables whose
    nodes the store does not know."""
    if not has_table(con, "nccl_test_results"):
        return []
    points: dict[tuple[int, int], list[tuple[int, float, float | None]]] = {}
    for f, t, size, time_us, busbw in con.execute(
        "SELECT file_id, table_no, size_bytes, time_us, busbw_gbs FROM nccl_test_points(?)",
        [rid],
    ).fetchall():
        points.setdefault((f, t), []).append((size, time_us, busbw))
    stored = _stored_nodes(con, rid)
    out = []
    for f, t, line, op, basis, gpu, _, path, n, rbasis, comm_nodes in con.execute(
        "SELECT * FROM nccl_test_fabrics(?)", [rid]
    ).fetchall():
        rows = points.get((f, t), [])
        if not rows:
            continue
        out.append(
            Table(
                file=path or "",
                table_no=t,
                line_no=line,
                op=op,
                op_basis=basis,
                n_ranks=n,
                ranks_basis=rbasis,
                n_nodes=stored.get((f, t)) or comm_nodes or nodes,
                gpu=gpu,
                sizes=tuple(r[0] for r in rows),
                times_us=tuple(r[1] for r in rows),
                busbw_GBps=tuple(r[2] for r in rows),
            )
        )
    return out


def with_nodes(tables: list[Table], nodes: int | None) -> list[Table]:
    """`tables` with `nodes` where they do not know theirs."""
    return [t if t.n_nodes or not nodes else replace(t, n_nodes=nodes) for t in tables]


def runs_with_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the runs holding at least one nccl-tests table, in the order they were made:
    the runs another run can be measured against."""
    if not has_table(con, "nccl_test_results"):
        return []
    return [
        name
        for (name,) in con.execute(
            "SELECT name FROM runs WHERE run_id IN (SELECT run_id FROM nccl_test_results)"
            " ORDER BY created_at, name"
        ).fetchall()
    ]
