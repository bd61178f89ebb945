"""The step by dimension: the decomposition's exposed communication split by the parallelism
dimension each collective serves (TP, CP, PP, EP, FSDP, DP, unknown), each into waiting and
transfer, adding up to the exposed communication of the decomposition (sql/dimension.sql holds
the definitions; docs/parallelism.md, "Step by dimension")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb
import pandas as pd

from commwall.analysis import db
from commwall.analysis.collectives.roles import role_of, structural_role
from commwall.analysis.report.shape import (
    DimensionRankRow,
    DimensionRow,
    Dimensions,
    ExpertImbalance,
    FsdpSplit,
    GroupRole,
)
from commwall.analysis.steps.summary import json_value
from commwall.analysis.units import NS_PER_MS

#: The dimensions, in the order they are stacked.
DIMENSIONS = ("TP", "CP", "PP", "EP", "FSDP", "DP", "unknown")
#: Words for each dimension, for text and charts.
LABELS = {
    "TP": "tensor parallel",
    "CP": "context parallel",
    "PP": "pipeline parallel",
    "EP": "expert parallel",
    "FSDP": "fully sharded data parallel",
    "DP": "data parallel",
    "unknown": "unknown dimension",
}
#: The FSDP keys of sql/dimension.sql and their JSON names.
FSDP_KEYS = {"FSDP all-gather": "allgather", "FSDP reduce-scatter": "reduce_scatter"}
#: A group's all-reduces are functional (waited for on the program's thread: TP) when at least
#: this share of them overlap a blocking wait.
FUNCTIONAL_SHARE = 0.5
_OPS = ("allreduce", "allgather", "reduce_scatter", "alltoall", "send", "recv", "sendrecv")


def dimension_of(role: str | None) -> str:
    """The dimension a role (roles.role_of) names: the role itself where it is one; the first
    of a combined role ("TP+CP": TP, "FSDP+CP": FSDP); EP for the expert groups ("expert TP");
    unknown for the whole world or no role."""
    if not role:
        return "unknown"
    if role.startswith("expert"):
        return "EP"
    first = role.split("+")[0]
    return first if first in DIMENSIONS else "unknown"


def group_roles(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """One row per process group of run `rid`: pg_name, pg_desc, n_calls, role, source ('name',
    'structure' or 'none': roles.role_of), dimension."""
    facts = con.execute("SELECT * FROM dimension_group_facts(?)", [rid]).df()
    rows = []
    for f in facts.to_dict("records"):
        ops = {op: int(f[f"n_{op}"]) for op in _OPS}
        share = json_value(f["functional_share"])
        structure = structural_role(
            ops,
            set(f["allgather_out_nelems"]),
            set(f["reduce_nelems"]),
            functional_waits=share is not None and share >= FUNCTIONAL_SHARE,
        )
        name, desc = json_value(f["pg_name"]), json_value(f["pg_desc"])
        role, source = role_of(name, desc, structure)
        rows.append(
            {
                "pg_name": name,
                "pg_desc": desc,
                "n_calls": int(f["n_calls"]),
                "role": role,
                "source": source,
                "dimension": dimension_of(role),
            }
        )
    cols = ["pg_name", "pg_desc", "n_calls", "role", "source", "dimension"]
    out = pd.DataFrame(rows, columns=cols)
    for col in ("pg_name", "pg_desc"):  # a string column reads a missing name as NaN: keep None
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


def _roles_table(con: duckdb.DuckDBPyConnection, rid: int, roles: pd.DataFrame) -> str:
    name = f"_dimension_roles_r{int(rid)}"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} (pg_name VARCHAR, dimension VARCHAR)")
    rows = [[n, d] for n, d in zip(roles["pg_name"], roles["dimension"], strict=True)]
    if rows:
        con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
    return name


def step_dimensions(con: duckdb.DuckDBPyConnection, rid: int) -> tuple[str | None, pd.DataFrame]:
    """(scope, rows): the exposed communication of every window of run `rid` by key (rank,
    step (None for whole-trace windows), dkey, exposed_transfer_ns, exposed_wait_ns); scope as
    run_summary's ('steps', 'whole trace'; None: nothing measured)."""
    found = con.execute("SELECT scope FROM run_summary(?)", [rid]).fetchone()
    scope = found[0] if found else None
    roles = group_roles(con, rid)
    table = _roles_table(con, rid, roles)
    try:
        if scope == "steps":
            sql = f"SELECT * FROM step_dimensions(?, '{table}')"
        else:
            sql = f"SELECT rank, NULL AS step, * EXCLUDE (rank) FROM rank_dimensions(?, '{table}')"
        rows = con.execute(sql, [rid]).df()
    finally:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    return scope, rows


def _ms(ns: float) -> float:
    return float(ns) / NS_PER_MS


def dimensions_section(con: duckdb.DuckDBPyConnection, rid: int) -> Dimensions:
    """The report's `dimensions`: the mean window's exposed communication per dimension (means
    over the decomposition's windows, adding up to its exposed communication), each split into
    waiting and transfer, with its share of the step; FSDP's all-gathers and reduce-scatters
    apart; per rank; the groups and their roles."""
    roles = group_roles(con, rid)
    summary = con.execute(
        "SELECT n_rows, step_ns, exposed_transfer_ns, exposed_wait_ns FROM run_summary(?)",
        [rid],
    ).fetchone()
    groups = [
        GroupRole(
            pg_name=g["pg_name"],
            pg_desc=g["pg_desc"],
            n_calls=int(g["n_calls"]),
            role=g["role"],
            source=g["source"],
            dimension=g["dimension"],
        )
        for g in roles.to_dict("records")
    ]
    if summary is None or not summary[0]:
        return {"scope": None, "dimensions": [], "labels": LABELS, "run": [], "ranks": [],
                "groups": groups, "exposed_comm_ms": None, "step_ms": None,
                "fsdp": None, "ep": None}  # fmt: skip
    n, step_ns, transfer_ns, wait_ns = summary
    scope, rows = step_dimensions(con, rid)
    rows["dimension"] = [
        "FSDP" if k in FSDP_KEYS else (k if k in DIMENSIONS else "unknown") for k in rows["dkey"]
    ]
    run: list[DimensionRow] = []
    for dim in DIMENSIONS:
        mine = rows[rows["dimension"] == dim]
        if mine.empty:
            continue
        t, w = mine["exposed_transfer_ns"].sum() / n, mine["exposed_wait_ns"].sum() / n
        run.append(
            {
                "dimension": dim,
                "label": LABELS[dim],
                "exposed_ms": _ms(t + w),
                "exposed_transfer_ms": _ms(t),
                "exposed_wait_ms": _ms(w),
                "share_of_step": float((t + w) / step_ns) if step_ns else None,
                "share_of_exposed": float((t + w) / (transfer_ns + wait_ns))
                if transfer_ns + wait_ns
                else None,
            }
        )
    run.sort(key=lambda r: -r["exposed_ms"])
    fsdp = None
    if rows["dkey"].isin(list(FSDP_KEYS)).any():
        part = {}
        for key, word in FSDP_KEYS.items():
            mine = rows[rows["dkey"] == key]
            t, w = mine["exposed_transfer_ns"].sum() / n, mine["exposed_wait_ns"].sum() / n
            part[word] = (_ms(t + w), _ms(w))
        fsdp = FsdpSplit(
            allgather_exposed_ms=part["allgather"][0],
            allgather_exposed_wait_ms=part["allgather"][1],
            reduce_scatter_exposed_ms=part["reduce_scatter"][0],
            reduce_scatter_exposed_wait_ms=part["reduce_scatter"][1],
        )
    return {
        "scope": scope,
        "dimensions": [r["dimension"] for r in run],
        "labels": LABELS,
        "step_ms": _ms(step_ns),
        "exposed_comm_ms": _ms(transfer_ns + wait_ns),
        "run": run,
        "ranks": _per_rank(con, rid, rows),
        "groups": groups,
        "fsdp": fsdp,
        "ep": expert_imbalance(con, rid),
    }


def expert_imbalance(con: duckdb.DuckDBPyConnection, rid: int) -> ExpertImbalance | None:
    """The all-to-alls' traffic per rank pair (sql/dimension.sql alltoall_pairs; a rank's
    traffic to itself aside): the largest pair over the mean pair, the bytes each rank
    receives, and the rank that receives most over the mean rank. None without all-to-alls."""
    n = db.scalar(con, "SELECT count(*) FROM collectives WHERE run_id = ? AND op = 'alltoall'",
                  [rid])  # fmt: skip
    if not n:
        return None
    pairs = con.execute("SELECT src, dst, bytes FROM alltoall_pairs(?)", [rid]).df()
    pairs = pairs[pairs["src"] != pairs["dst"]]
    if pairs.empty:
        why = "the all-to-alls' process groups or split sizes are not known"
        return {"available": False, "n_calls": int(n), "reason": why}
    received = pairs.groupby("dst")["bytes"].sum()
    top = int(received.idxmax())
    mean_pair, mean_recv = pairs["bytes"].mean(), received.mean()
    return {
        "available": True,
        "n_calls": int(n),
        "pairs": [
            {"src": int(a), "dst": int(b), "bytes": round(float(v))}
            for a, b, v in zip(pairs["src"], pairs["dst"], pairs["bytes"], strict=True)
        ],
        "pair_max_over_mean": float(pairs["bytes"].max() / mean_pair) if mean_pair else None,
        "received_bytes": {str(int(k)): round(float(v)) for k, v in received.items()},
        "top_receiver": top,
        "top_receiver_over_mean": float(received[top] / mean_recv) if mean_recv else None,
    }


def _per_rank(
    con: duckdb.DuckDBPyConnection, rid: int, rows: pd.DataFrame
) -> list[DimensionRankRow]:
    """Per rank and dimension: the mean over the rank's windows (ms)."""
    windows = dict(
        con.execute("SELECT rank, count(*) FROM run_rows(?) GROUP BY rank", [rid]).fetchall()
    )
    out: list[DimensionRankRow] = []
    if rows.empty:
        return out
    g = rows.groupby(["rank", "dimension"], as_index=False)[
        ["exposed_transfer_ns", "exposed_wait_ns"]
    ].sum()
    for r in g.to_dict("records"):
        k = windows.get(r["rank"]) or 1
        out.append(
            DimensionRankRow(
                rank=int(r["rank"]),
                dimension=r["dimension"],
                exposed_transfer_ms=_ms(r["exposed_transfer_ns"] / k),
                exposed_wait_ms=_ms(r["exposed_wait_ns"] / k),
            )
        )
    return out


#: What would help each dimension, for the sentence.
_HELP = {
    "TP": "on the critical path by construction: fewer TP ranks or a faster intra-node link "
    "would help",
    "CP": "on the critical path of attention: fewer CP ranks or overlapping the ring exchange "
    "would help",
    "PP": "the pipeline's hand-offs and bubble: more micro-batches or balanced stages would help",
    "EP": "the expert all-to-alls: balancing the routing or a faster network would help",
    "FSDP": "gathers and reduce-scatters not hidden by compute: prefetching or larger "
    "buckets would help",
    "DP": "gradient synchronisation not hidden by backward: overlapping it or a faster "
    "network would help",
    "unknown": "from process groups whose role the traces do not tell",
}
_OP_WORDS = {
    "TP": "tensor-parallel all-reduces",
    "CP": "context-parallel exchanges",
    "PP": "pipeline sends and receives",
    "EP": "expert-parallel all-to-alls",
    "FSDP": "FSDP all-gathers and reduce-scatters",
    "DP": "data-parallel all-reduces",
    "unknown": "collectives of unknown dimension",
}
#: A dimension must hold at least this share of the step to be named as setting it.
SENTENCE_MIN_SHARE = 0.05


def dimension_sentence(report: Mapping[str, Any]) -> str | None:
    """The dimension that sets the step's exposed communication, in one sentence of at most 40
    words with its share of the step, how much of it is waiting, and what would help; None
    without dimensions or when the largest holds under SENTENCE_MIN_SHARE of the step."""
    d = report.get("dimensions") or {}
    run = d.get("run") or []
    if not run:
        return None
    top = run[0]
    share = top.get("share_of_step")
    if share is None or share < SENTENCE_MIN_SHARE:
        return None
    dim = top["dimension"]
    wait = top["exposed_wait_ms"] / top["exposed_ms"] if top["exposed_ms"] else 0.0
    waiting = f" ({100 * wait:.0f}% of it waiting for late ranks)" if wait >= 0.25 else ""
    return f"{_OP_WORDS[dim]} are {100 * share:.0f}% of the step{waiting}, {_HELP[dim]}"
