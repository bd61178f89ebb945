"""A run measured against its fabric (docs/model.md, "A run against its fabric"): each class of
the run's collectives (one op, one message size, one group size) beside what nccl-tests measured
for that op and size on the same fabric, from the nccl-tests tables ingested into the run (or
into another run named as the baseline).

The baseline's time at the class's size is the table's curve (analysis/fabric/curve.py: the
chain of α-β lines through its measured sizes), its bus bandwidth that time under nccl-tests'
convention with the table's ranks. An op without a table of its own is priced from another op of
the same fabric (analysis/fabric/cross.py), and says so. The ratio is the training's median bus
bandwidth over the baseline's: near 1 the training gets what the fabric gives; well below, the
transfer itself is slow inside training (contention with compute kernels, fewer channels,
placement), not the fabric.

A table measured on other hardware than the run's prices another fabric: where the headline
class's table names another GPU than the run's (A100 against H100), or its nodes or ranks differ
by a factor of 2 or more from the run's nodes and the class's ranks, the section carries a
`caveat` in words ("compare with care"); where the run's GPU is not known, nothing is said of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import duckdb

from commwall.analysis import units
from commwall.analysis.db import has_macro, has_table
from commwall.analysis.fabric.compare import REFERENCES
from commwall.analysis.fabric.cross import cross_op_time
from commwall.analysis.fabric.curve import Curve, fit_curve
from commwall.analysis.fabric.nccl_prior import fabric_topo
from commwall.analysis.fabric.tables import Table, fabric_tables
from commwall.analysis.model.busbw import busbw_factor
from commwall.analysis.op_words import OP_WORDS
from commwall.analysis.report.shape import FabricBaseline, FabricClass, FabricTable

#: Training bus bandwidth below this fraction of the baseline's at the same size: the transfer
#: is slow inside training (a checklist item needing attention).
RATIO_LIMIT = 0.7
#: The classes kept in the section, largest summed transfer time first (`n_classes` counts all).
MAX_CLASSES = 200


#: A GPU's model in its name: `A100` of "A100-SXM4-40GB", `H100` of "NVIDIA H100 80GB HBM3".
_GPU_MODEL = re.compile(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b")


def gpu_model(name: str | None) -> str | None:
    """The GPU's model from its name ('A100', 'H100 PCIe'), None when the name does not say."""
    found = _GPU_MODEL.search((name or "").upper())
    if found is None:
        return None
    return found.group(1) + (" PCIe" if "PCIE" in (name or "").upper() else "")


def _marked(a: int | None, b: int | None) -> bool:
    """Two counts, both known, differ by a factor of 2 or more."""
    return bool(a and b and max(a, b) >= 2 * min(a, b))


def fabric_caveat(
    t: Table, run_gpus: list[str], run_nodes: int | None, n_ranks: int | None
) -> str | None:
    """Why table `t` may not price the run (`run_gpus` its GPU names, `run_nodes` its hosts,
    `n_ranks` the class's ranks) in one sentence, or None when nothing known differs."""
    model = gpu_model(t.gpu)
    models = sorted({m for g in run_gpus if (m := gpu_model(g)) is not None})
    ran = []
    if model and models and model not in models:
        ran.append(f" on {' and '.join(models)}")
    nodes = _marked(t.n_nodes, run_nodes)
    if nodes:
        ran.append(f" across {run_nodes} node{'s' if (run_nodes or 0) > 1 else ''}")
    if _marked(t.n_ranks, n_ranks):
        ran.append(f" with {n_ranks} ranks")
    if not ran:
        return None
    who = f"{t.n_ranks or '?'} × {model}" if model else f"{t.n_ranks or '?'} ranks"
    if nodes:
        who += f" on {t.n_nodes} node{'s' if (t.n_nodes or 0) > 1 else ''}"
    return f"The nccl-tests table is from {who} but the run ran{''.join(ran)}: compare with care."


def _run_facts(con: duckdb.DuckDBPyConnection, rid: int) -> tuple[list[str], int | None]:
    """The run's GPU names and its number of hosts (None when no rank names one)."""
    if not has_table(con, "ranks"):
        return [], None
    gpus, hosts = con.execute(
        "SELECT list(DISTINCT gpu_name) FILTER (gpu_name IS NOT NULL),"
        " count(DISTINCT host) FROM ranks WHERE run_id = ?",
        [rid],
    ).fetchone() or (None, 0)
    return list(gpus or []), int(hosts) or None


def _run_name(con: duckdb.DuckDBPyConnection, rid: int) -> str | None:
    row = con.execute("SELECT name FROM runs WHERE run_id = ?", [rid]).fetchone()
    return str(row[0]) if row else None


def _fit(t: Table) -> Curve | None:
    try:
        return fit_curve(t.sizes, [x * 1e-6 for x in t.times_us])
    except ValueError:
        return None


def _nearest(tables: list[Table], n: int) -> Table | None:
    """The table whose ranks are nearest `n` (the same count first; unknown counts last)."""
    return min(tables, key=lambda t: abs((t.n_ranks or 10**9) - n), default=None)


def baseline_at(
    op: str, size: int, n_ranks: int, tables: list[Table]
) -> tuple[Table, str, float, float] | None:
    """What the baseline gives for `op` of `size` bytes on about `n_ranks` ranks: (the table,
    its basis in words, the time in s, the bus bandwidth in GB/s), or None when no table tells.
    A table of the same op comes first; else the first op of REFERENCES the fabric has, carried
    to `op` by the bytes each rank puts on the links."""
    same = [t for t in tables if t.op == op and t.n_ranks]
    t = _nearest(same, n_ranks)
    curve = _fit(t) if t is not None else None
    basis = "nccl-tests of the same op"
    time_s: float | None = None
    if t is not None and curve is not None:
        time_s = curve.time_s(size)
    else:
        for ref_op in REFERENCES:
            t = _nearest([u for u in tables if u.op == ref_op and u.n_ranks], n_ranks)
            curve = _fit(t) if t is not None else None
            if t is not None and curve is not None and t.n_ranks:
                time_s = cross_op_time(
                    curve, ref_op, op, size, t.n_ranks, t.n_nodes, fabric_topo(t)
                )
                basis = f"nccl-tests {OP_WORDS.get(ref_op, ref_op)}, carried to {op}"
                if time_s is not None:
                    break
    if t is None or time_s is None or time_s <= 0 or not t.n_ranks:
        return None
    try:
        factor = busbw_factor(op, t.n_ranks)
    except ValueError:
        return None
    return t, basis, time_s, factor * size / time_s / 1e9


def _table_row(t: Table) -> FabricTable:
    return {
        "name": t.name,
        "op": t.op,
        "n_ranks": t.n_ranks,
        "n_nodes": t.n_nodes,
        "gpu": t.gpu,
        "min_bytes": min(t.sizes),
        "max_bytes": max(t.sizes),
        "curve": [
            {"size_bytes": size, "busbw_GBps": bw}
            for size, bw in zip(t.sizes, t.busbw_GBps, strict=True)
            if bw is not None
        ],
    }


def _class_row(rec: tuple[Any, ...], tables: list[Table]) -> FabricClass:
    op, size, n, calls, xfer_med, xfer_total, busbw = rec
    hit = baseline_at(op, int(size), int(n), tables)
    row: FabricClass = {
        "op": op,
        "size_bytes": int(size),
        "n_ranks": int(n),
        "n_calls": int(calls),
        "transfer_ms_median": float(xfer_med) / units.NS_PER_MS,
        "transfer_ms_total": float(xfer_total) / units.NS_PER_MS,
        "busbw_GBps": float(busbw),
        "baseline": None,
        "baseline_basis": None,
        "baseline_n_ranks": None,
        "baseline_time_ms": None,
        "baseline_busbw_GBps": None,
        "extrapolated": None,
        "ratio": None,
    }
    if hit is not None:
        t, basis, time_s, base_bw = hit
        row |= {
            "baseline": t.name,
            "baseline_basis": basis,
            "baseline_n_ranks": t.n_ranks,
            "baseline_time_ms": time_s * 1e3,
            "baseline_busbw_GBps": base_bw,
            "extrapolated": not min(t.sizes) <= size <= max(t.sizes),
            "ratio": float(busbw) / base_bw,
        }
    return row


def fabric_baseline(
    con: duckdb.DuckDBPyConnection, rid: int, baseline_rid: int | None = None
) -> FabricBaseline:
    """The report's `fabric` section: run `rid`'s collective classes against the nccl-tests
    tables of run `baseline_rid` (default: the same run)."""
    other = None if baseline_rid in (None, rid) else _run_name(con, int(baseline_rid or 0))
    source = "this run" if baseline_rid in (None, rid) else f"run {other}"
    tables = [t for t in fabric_tables(con, rid if baseline_rid is None else baseline_rid) if t.op]
    out: FabricBaseline = {
        "present": False,
        "reason": None,
        "source": f"nccl-tests tables of {source}",
        "ratio_limit": RATIO_LIMIT,
        "tables": [_table_row(t) for t in tables],
        "n_classes": 0,
        "classes": [],
        "time_ratio": None,
        "status": None,
        "sentence": None,
        "baseline_run": other,
        "caveat": None,
    }
    if not tables:
        out["reason"] = (
            f"no nccl-tests table in {source}: ingest the output of all_reduce_perf (and its "
            "siblings) run on the same nodes with the traces"
            if other is None
            else f"no nccl-tests table in {source}: choose a run that holds them as the baseline"
        )
        return out
    recs = (
        con.execute("SELECT * FROM fabric_classes(?)", [rid]).fetchall()
        if has_macro(con, "fabric_classes")
        else []
    )
    classes = [_class_row(r, tables) for r in recs]
    priced = [c for c in classes if c["ratio"] is not None]
    if not priced:
        out["reason"] = (
            "no collective of the run with a trusted bus bandwidth and an op the nccl-tests "
            "tables price"
            if classes
            else "no collective of the run with a trusted bus bandwidth (needs collectives "
            "matched across ranks, with sizes)"
        )
        out["n_classes"] = len(classes)
        out["classes"] = classes[:MAX_CLASSES]
        return out
    base = sum((c["baseline_time_ms"] or 0.0) * c["n_calls"] for c in priced)
    spent = sum(c["transfer_ms_total"] for c in priced)
    out |= {
        "present": True,
        "n_classes": len(classes),
        "classes": classes[:MAX_CLASSES],
        "time_ratio": base / spent if spent > 0 else None,
        "status": "attention" if (priced[0]["ratio"] or 0.0) < RATIO_LIMIT else "ok",
    }
    by_name = {t.name: t for t in tables}
    top = by_name.get(priced[0]["baseline"] or "")
    if top is not None:
        out["caveat"] = fabric_caveat(top, *_run_facts(con, rid), priced[0]["n_ranks"])
    out["sentence"] = " ".join(
        x for x in (class_sentence(priced[0], _where(out)), out["caveat"]) if x
    )
    return out


def _where(section: Mapping[str, Any]) -> str:
    """Where the nccl-tests tables ran, in words: this cluster, or the baseline run."""
    other = section.get("baseline_run")
    return f"of run {other}" if other else "on this cluster"


def headline(section: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The class the verdict is about: the one with a baseline that costs the run the most
    transfer time (the classes come largest summed transfer first)."""
    return next((c for c in section.get("classes") or [] if c.get("ratio") is not None), None)


def class_sentence(c: Mapping[str, Any], where: str = "on this cluster") -> str:
    """One class against its baseline (nccl-tests `where`), in at most 40 words."""
    op = OP_WORDS.get(c["op"], c["op"])
    what = "buckets" if c["op"] == "allreduce" else "calls"
    ratio = float(c["ratio"])
    figures = (
        f"The {units.size_text(c['size_bytes'])} {op} {what} ran at {c['busbw_GBps']:.3g} GB/s "
        f"bus bandwidth in training against {c['baseline_busbw_GBps']:.3g} GB/s for that size "
        f"in nccl-tests {where} ({100 * ratio:.0f}%)"
    )
    if ratio < RATIO_LIMIT:
        return (
            f"{figures}: the transfer is slow inside training (contention with compute "
            "kernels, channels, placement), not the fabric."
        )
    return (
        f"{figures}: training gets what the fabric gives; a faster transfer needs a faster "
        "fabric or fewer bytes."
    )


def fabric_sentence(report: Mapping[str, Any]) -> str | None:
    """The verdict of the report's `fabric` section in one sentence of at most 40 words (for
    the diagnosis), or None when the run has no baseline to compare with."""
    section = report.get("fabric")
    if not isinstance(section, dict) or not section.get("present"):
        return None
    c = headline(section)
    return class_sentence(c, _where(section)) if c is not None else None


def fabric_check(report: Mapping[str, Any]) -> dict[str, str] | None:
    """The verdict as a checklist's status and evidence (`{"status": "attention" | "ok",
    "evidence": ...}`), or None when the run has no baseline to compare with."""
    section = report.get("fabric")
    if not isinstance(section, dict) or not section.get("present"):
        return None
    c = headline(section)
    if c is None:
        return None
    status = "attention" if c["ratio"] < RATIO_LIMIT else "ok"
    evidence = class_sentence(c, _where(section))
    if section.get("time_ratio") is not None:
        evidence += (
            f" Over all {len([x for x in section['classes'] if x.get('ratio') is not None])} "
            "priced classes, nccl-tests would move the same bytes in "
            f"{100 * section['time_ratio']:.0f}% of the training's transfer time."
        )
    if section.get("caveat"):
        evidence += " " + str(section["caveat"])
    return {"status": status, "evidence": evidence}
