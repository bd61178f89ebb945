"""The report's `model` section: the run's measurements beside the calibrated model.

`{"status", "measured", "predicted", "fit"}`: measured step metrics, topology and traffic;
the model's prediction for the same step from the fitted α-β ring; the fit (`alpha_us` per
hop, `beta_GBps` the bus bandwidth B of T = steps·α + factor·S/B, per op in `per_op`).
`bytes_per_step` and `collectives_per_step` count all-reduce-equivalents (a reduce-scatter or
all-gather is half an all-reduce); the `_by_op` dicts give the raw figures;
`predicted.not_modelled` counts per step the collectives the all-reduce model leaves out
(all-to-all, broadcast, ...): their time is in the measured τ_comm, not in the prediction.
Times in ms, bandwidths in decimal GB/s.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pandas as pd

from analysis.model.busbw import busbw_factor
from analysis.model.calibrate import (
    ALLREDUCE_EQUIVALENT,
    achieved_busbw_Bps,
    calibrated_scenario,
    fit_ops,
    per_step,
    usable,
)
from analysis.model.fit import LinkFit
from analysis.model.hardware import nvlink_of
from analysis.model.scenario import Scenario, comm_time, predict, vary
from analysis.model.step import DEFAULT_TARGET_OVERHEAD, verdict
from analysis.overlap import rank_overlap, step_overlap

NOT_CALIBRATED = "not calibrated: no matched collectives"
TOO_FEW = "not calibrated: fewer than 2 matched collectives of any one op"
MS = 1e3


def _num(v: Any) -> float | None:
    """A JSON-safe float (None for missing/NaN)."""
    if v is None or v is pd.NA:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def has_macro(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the connection defines the table macro `name`."""
    q = "SELECT count(*) FROM duckdb_functions() WHERE function_name = ?"
    return con.execute(q, [name]).fetchone()[0] > 0


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    q = "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?"
    return con.execute(q, [name]).fetchone()[0] > 0


def topology_facts(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """n_ranks, n_nodes, gpus_per_node, gpu, topology_source: from the ranks' hosts when every
    rank was traced, else from NCCL's communicator lines (nNodes, localRanks of the largest
    communicator). Unknown values are None."""
    n_ranks, world, n_hosts, per_host, gpu = con.execute(
        "SELECT count(*), max(world_size), count(DISTINCT host),"
        " (SELECT max(c) FROM (SELECT count(*) AS c FROM ranks"
        "   WHERE run_id = ? AND host IS NOT NULL GROUP BY host)), any_value(gpu_name)"
        " FROM ranks WHERE run_id = ?",
        [rid, rid],
    ).fetchone()
    facts = {"n_ranks": world or n_ranks or None, "n_nodes": None, "gpus_per_node": None}
    facts.update(gpu=gpu, topology_source=None)
    if n_hosts and n_ranks >= (world or 0):
        facts.update(n_nodes=n_hosts, gpus_per_node=per_host, topology_source="trace hosts")
    elif _has_table(con, "nccl_communicators"):
        row = con.execute(
            "SELECT nranks, n_nodes, local_ranks FROM nccl_communicators"
            " WHERE run_id = ? AND n_nodes IS NOT NULL ORDER BY nranks DESC LIMIT 1",
            [rid],
        ).fetchone()
        if row:
            facts.update(n_ranks=facts["n_ranks"] or row[0], n_nodes=row[1])
            facts.update(gpus_per_node=row[2], topology_source="NCCL log")
    return facts


def measured_step(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """Medians over (rank, step) of the step metrics (whole trace per rank without steps), s."""
    df, scope = step_overlap(con, rid), "steps"
    if df.empty:
        df, scope = rank_overlap(con, rid), "whole trace"
    if df.empty:
        return {"scope": scope}
    med = df[["span_ns", "compute_ns", "comm_ns", "both_ns", "exposed_comm_ns", "idle_ns"]]
    m = (med.median() * 1e-9).to_dict()
    return {
        "scope": scope,
        "step_s": m["span_ns"],
        "compute_s": m["compute_ns"],
        "comm_s": m["comm_ns"],
        "overlap_s": m["both_ns"],
        "exposed_comm_s": m["exposed_comm_ns"],
        "idle_s": m["idle_ns"],
        "eta": _num(df["eta"].median()),
    }


def _ratios(step_s: float, compute_s: float, comm_s: float, exposed_s: float, eta: float) -> dict:
    """comm_overhead, gpu_efficiency, gamma and the verdict of one step."""
    overhead = exposed_s / step_s if step_s else None
    gamma = comm_s / compute_s if compute_s else None
    out = {
        "comm_overhead": overhead,
        "gpu_efficiency": compute_s / step_s if step_s else None,
        "gamma": gamma,
        "verdict": None,
        "reason": None,
    }
    if overhead is not None and gamma is not None:
        out["verdict"], out["reason"] = verdict(overhead, gamma, eta, DEFAULT_TARGET_OVERHEAD)
    return out


def _measured(step: dict, traffic: dict | None, facts: dict, busbw: float | None) -> dict:
    out: dict[str, Any] = {"scope": step.get("scope"), **facts}
    if "step_s" in step:
        out.update(
            step_ms=step["step_s"] * MS,
            tau_comp_ms=step["compute_s"] * MS,
            tau_comm_ms=step["comm_s"] * MS,
            overlap_ms=step["overlap_s"] * MS,
            exposed_comm_ms=step["exposed_comm_s"] * MS,
            idle_ms=step["idle_s"] * MS,
            eta=step["eta"],
            **_ratios(
                step["step_s"],
                step["compute_s"],
                step["comm_s"],
                step["exposed_comm_s"],
                step["eta"] or 0.0,
            ),
        )
    if traffic is not None:
        out.update(
            transfer_ms=traffic["transfer_s"] * MS,
            bytes_per_step=traffic["allreduce_equivalent_bytes"],
            collectives_per_step=traffic["allreduce_equivalent_count"],
            bytes_per_step_by_op=traffic["bytes_per_step"],
            collectives_per_step_by_op=traffic["collectives_per_step"],
        )
    peak = nvlink_of(facts.get("gpu")) if facts.get("n_nodes") == 1 else None
    out.update(
        busbw_GBps=None if busbw is None else busbw / 1e9,
        link=peak.name if peak else None,
        peak_busbw_GBps=peak.line_Bps / 1e9 if peak else None,
        typical_busbw_GBps=peak.achievable_Bps / 1e9 if peak else None,
        busbw_vs_peak=busbw / peak.line_Bps if peak and busbw else None,
    )
    return out


def _fit_dict(link: LinkFit, df: pd.DataFrame) -> dict:
    f = link.fit
    factor = busbw_factor(link.op, link.n_ranks)
    busbw = achieved_busbw_Bps(df, link.op, link.n_ranks)
    return {
        "op": link.op,
        "n_ranks": link.n_ranks,
        "n": f.n,
        "alpha_us": None if link.alpha_s is None else link.alpha_s * 1e6,
        "beta_GBps": link.bandwidth_Bps / 1e9,
        "latency_us": None if f.latency_s is None else f.latency_s * 1e6,
        "algbw_GBps": link.algbw_Bps / 1e9,
        "achieved_busbw_GBps": None if busbw is None else busbw / 1e9,
        "alpha_identifiable": f.identifiable,
        "sizes_decades": f.decades,
        "r2": f.r2,
        "residual_cv": f.residual_cv,
        "latency_ci_us": None if f.latency_ci_s is None else [x * 1e6 for x in f.latency_ci_s],
        "beta_ci_GBps": None
        if f.s_per_byte_ci is None
        else [factor / b / 1e9 for b in reversed(f.s_per_byte_ci)],
    }


def _predicted(s: Scenario, step: dict, peak_Bps: float | None, traffic: dict) -> dict:
    p = predict(s)
    out: dict[str, Any] = {
        "algorithm": "ring (fitted α, β)",
        "bytes_per_step": s.gradient_bytes,
        "collectives_per_step": p.n_collectives,
        "tau_comm_ms": p.comm_s * MS,
        "not_modelled": {
            op: n
            for op, n in traffic["collectives_per_step"].items()
            if op not in ALLREDUCE_EQUIVALENT
        },
    }
    if p.step is not None:
        idle = step.get("idle_s") or 0.0
        total = p.step.step_s + idle
        out.update(
            step_ms=total * MS,
            tau_comp_ms=p.step.compute_s * MS,
            exposed_comm_ms=p.step.exposed_comm_s * MS,
            idle_ms=idle * MS,
            eta=s.eta,
            **_ratios(total, p.step.compute_s, p.comm_s, p.step.exposed_comm_s, s.eta),
        )
    if peak_Bps is not None:
        out["tau_comm_at_peak_ms"] = comm_time(vary(s, "link_Bps", peak_Bps)) * MS
    return out


def _instances(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame | None:
    """The run's matched collectives, None when the matching macro is not loaded."""
    if not has_macro(con, "collective_instances"):
        return None
    return con.execute("SELECT * FROM collective_instances(?)", [rid]).df()


def run_scenario(con: duckdb.DuckDBPyConnection, rid: int) -> Scenario | None:
    """Run `rid` as a calibrated Scenario for what-if sweeps (its measured point is the
    `model` section's `measured`); None when it cannot be calibrated."""
    df = _instances(con, rid)
    links = fit_ops(df, bootstrap=0) if df is not None else []
    if not links:
        return None
    step = measured_step(con, rid)
    return calibrated_scenario(links[0], per_step(df), step.get("compute_s"), step.get("eta"))


def model_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The `model` report section of run `rid`."""
    facts = topology_facts(con, rid)
    step = measured_step(con, rid)
    df = _instances(con, rid)
    links = fit_ops(df) if df is not None else []
    if not links:
        status = NOT_CALIBRATED if df is None or usable(df).empty else TOO_FEW
        return {
            "status": status,
            "measured": _measured(step, None, facts, None),
            "predicted": None,
            "fit": None,
        }
    traffic = per_step(df)
    main = links[0]
    busbw = achieved_busbw_Bps(df, main.op, main.n_ranks)
    measured = _measured(step, traffic, facts, busbw)
    s = calibrated_scenario(main, traffic, step.get("compute_s"), step.get("eta"))
    peak = measured["peak_busbw_GBps"]
    return {
        "status": "calibrated",
        "measured": measured,
        "predicted": None if s is None else _predicted(s, step, peak and peak * 1e9, traffic),
        "fit": {**_fit_dict(main, df), "per_op": [_fit_dict(x, df) for x in links]},
    }
