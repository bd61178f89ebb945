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
import numpy as np
import pandas as pd

from commwall.analysis import db
from commwall.analysis.model.calibrate import (
    FITTED_OPS,
    OpFit,
    achieved_busbw_Bps,
    calibrate_all,
    calibrated_scenario,
    fit_ops,
    median_message,
    per_step,
    predicted_transfer,
    usable,
)
from commwall.analysis.model.hardware import LinkSpec, intra_node_link
from commwall.analysis.model.heldout import CALIBRATED_MEDIAN_APE, summary
from commwall.analysis.model.nccl_run import NCCL_OPS, nccl_times, run_topo
from commwall.analysis.model.scenario import Scenario, comm_time, predict, vary
from commwall.analysis.model.step import DEFAULT_TARGET_OVERHEAD, verdict

NOT_CALIBRATED = "not calibrated: no matched collectives"
TOO_FEW = "not calibrated: fewer than 2 matched collectives of any one op"
MS = 1e3


def _num(v: Any) -> float | None:
    """A JSON-safe float (None for missing/NaN)."""
    if v is None or v is pd.NA:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def topology_facts(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """n_ranks, n_nodes, gpus_per_node, gpu, topology_source: from the ranks' hosts when every
    rank was traced, else from NCCL's communicator lines (nNodes, localRanks of the largest
    communicator). Unknown values are None."""
    n_ranks, world, n_hosts, per_host, gpu = db.row(
        con,
        "SELECT count(*), max(world_size), count(DISTINCT host),"
        " (SELECT max(c) FROM (SELECT count(*) AS c FROM ranks"
        "   WHERE run_id = ? AND host IS NOT NULL GROUP BY host)), any_value(gpu_name)"
        " FROM ranks WHERE run_id = ?",
        [rid, rid],
    )
    facts = {"n_ranks": world or n_ranks or None, "n_nodes": None, "gpus_per_node": None}
    facts.update(gpu=gpu, topology_source=None)
    if n_hosts and n_ranks >= (world or 0):
        facts.update(n_nodes=n_hosts, gpus_per_node=per_host, topology_source="trace hosts")
    elif db.has_table(con, "nccl_communicators"):
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
    """The run summary (sql/summary.sql: the mean (rank, step) row, whole trace per rank
    without steps) in seconds: the same measured figures as the report's `summary`."""
    df = con.execute("SELECT * FROM run_summary(?)", [rid]).df()
    if df.empty:
        return {"scope": "steps"}
    r = df.iloc[0]
    return {
        "scope": r["scope"],
        "step_s": float(r["step_ns"]) * 1e-9,
        "compute_s": float(r["tau_comp_ns"]) * 1e-9,
        "comm_s": float(r["tau_comm_ns"]) * 1e-9,
        "overlap_s": float(r["overlap_ns"]) * 1e-9,
        "exposed_comm_s": float(r["exposed_comm_ns"]) * 1e-9,
        "idle_s": float(r["idle_ns"]) * 1e-9,
        "exposed_wait_s": float(r["exposed_wait_ns"]) * 1e-9,
        "eta": _num(r["eta"]),
    }


def _ratios(
    step_s: float,
    compute_s: float,
    comm_s: float,
    exposed_s: float,
    eta: float,
    wait_s: float | None = None,
) -> dict:
    """comm_overhead, gpu_efficiency, gamma and the verdict of one step (`wait_s`: the exposed
    communication spent waiting for late ranks, known on a measured step only)."""
    overhead = exposed_s / step_s if step_s else None
    gamma = comm_s / compute_s if compute_s else None
    out: dict[str, Any] = {
        "comm_overhead": overhead,
        "gpu_efficiency": compute_s / step_s if step_s else None,
        "gamma": gamma,
        "verdict": None,
        "reason": None,
    }
    if overhead is not None and gamma is not None:
        wait = wait_s / exposed_s if wait_s is not None and exposed_s else None
        out["verdict"], out["reason"] = verdict(
            overhead, gamma, eta, DEFAULT_TARGET_OVERHEAD, wait_fraction=wait
        )
    return out


def _peak(facts: dict, link_peak: LinkSpec | None) -> LinkSpec | None:
    """The link whose peak busbw is compared with: given, else the GPUs' intra-node link when
    the run is on one node (a NIC's speed is never in the trace or the NCCL log)."""
    if link_peak is not None:
        return link_peak
    return intra_node_link(facts.get("gpu")) if facts.get("n_nodes") == 1 else None


def _measured(
    step: dict, traffic: dict | None, facts: dict, busbw: float | None, peak: LinkSpec | None
) -> dict:
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
                step["exposed_wait_s"],
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
    typical = peak.achievable_Bps if peak else None
    out.update(
        busbw_GBps=None if busbw is None else busbw / 1e9,
        link=peak.name if peak else None,
        peak_busbw_GBps=peak.line_Bps / 1e9 if peak else None,
        typical_busbw_GBps=typical / 1e9 if typical else None,
        busbw_vs_peak=busbw / peak.line_Bps if peak and busbw else None,
    )
    return out


def _gbps(bandwidth_Bps: float) -> float | None:
    """GB/s, None for the infinite bandwidth of a fit whose time does not grow with size."""
    return None if math.isinf(bandwidth_Bps) else bandwidth_Bps / 1e9


def _fit_dict(f: OpFit, df: pd.DataFrame) -> dict:
    """One op's calibration: α per hop and bus bandwidth β of its main regime (the one that
    predicts its byte-weighted median message), every regime, held-out error and status."""
    u = usable(df)
    g = u[(u["op"] == f.op) & (u["n"] == f.n_ranks)]
    link = f.link_for(median_message(df, f.op, f.n_ranks))
    fit = link.fit
    busbw = achieved_busbw_Bps(df, f.op, f.n_ranks)
    err = summary(f.heldout)
    return {
        "op": f.op,
        "n_ranks": f.n_ranks,
        "n": int(len(g)),
        "status": f.status,
        "alpha_us": link.alpha_s * 1e6,
        "beta_GBps": _gbps(link.bandwidth_Bps),
        "latency_us": fit.latency_s * 1e6,
        "algbw_GBps": _gbps(link.algbw_Bps),
        "achieved_busbw_GBps": None if busbw is None else busbw / 1e9,
        "alpha_identifiable": fit.identifiable,
        "sizes_decades": float(np.log10(g["bytes"].max() / g["bytes"].min())),
        "r2": fit.r2,
        "residual_cv": fit.residual_cv,
        "latency_ci_us": None,
        "beta_ci_GBps": None,
        "heldout_median_ape": err["median"],
        "heldout_p90_ape": err["p90"],
        "heldout_n": err["n"],
        "heldout_method": f.heldout_method,
        "heldout_median_ape_size_blind": summary(f.heldout_size_blind)["median"]
        if f.heldout_size_blind is not None
        else None,
        "calibrated_line_ape": CALIBRATED_MEDIAN_APE,
        "regimes": [
            {
                "min_bytes": x.fit.min_bytes,
                "max_bytes": x.fit.max_bytes,
                "n": x.fit.n,
                "alpha_us": x.alpha_s * 1e6,
                "beta_GBps": _gbps(x.bandwidth_Bps),
                "latency_us": x.fit.latency_s * 1e6,
                "knee_bytes": x.fit.latency_s / x.fit.s_per_byte if x.fit.s_per_byte else None,
                "r2": x.fit.r2,
                "protocol": f.regimes.names[i] if f.regimes.names else None,
            }
            for i, x in enumerate(f.links)
        ],
    }


def _not_modelled(df: pd.DataFrame) -> dict[str, float]:
    """Per-step median count of matched collectives of ops without a cost model (barrier,
    unknown): their time is in the measured τ_comm, not in the prediction."""
    rest = df[~df["op"].isin(FITTED_OPS)]
    if rest.empty:
        return {}
    key = rest["step"].fillna(-1)
    counts = rest.assign(key=key).groupby(["key", "op"]).size().groupby("op").median()
    return {str(op): float(n) for op, n in counts.items()}


def _predicted(
    s: Scenario, step: dict, peak_Bps: float | None, df: pd.DataFrame, fits: list[OpFit]
) -> dict:
    p = predict(s)
    per_op = predicted_transfer(fits, df)
    out: dict[str, Any] = {
        "algorithm": "ring (fitted α, β)",
        "bytes_per_step": s.gradient_bytes,
        "collectives_per_step": p.n_collectives,
        "tau_comm_ms": p.comm_s * MS,
        "transfer_ms": per_op["transfer_s"] * MS,
        "transfer_ms_by_op": {op: v * MS for op, v in per_op["transfer_s_by_op"].items()},
        "not_modelled": _not_modelled(df),
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


def nccl_model(facts: dict, df: pd.DataFrame | None, peak: LinkSpec | None) -> dict:
    """NCCL's uncalibrated tuning model on the run's topology: per-step transfer time of the
    ops it covers and its choice per op, beside the measured transfer of the same ops."""
    intra = intra_node_link(facts.get("gpu"))
    net = peak if facts.get("n_nodes") not in (None, 1) else None
    topo = run_topo(facts, intra, net)
    if isinstance(topo, str):
        return {"status": topo}
    u = usable(df) if df is not None else pd.DataFrame()
    u = u[u["op"].isin(NCCL_OPS)] if not u.empty else u
    if u.empty:
        return {"status": "not available: no all-reduce, all-gather or reduce-scatter to predict"}
    by_op = {}
    for op, g in u.groupby("op"):
        times, picks = nccl_times(topo, str(op), g["bytes"].to_numpy())
        steps = g.assign(pred=times, key=g["step"].fillna(-1)).groupby("key")
        by_op[str(op)] = {
            "transfer_ms": float(steps["pred"].sum().median()) * MS,
            "measured_transfer_ms": float(steps["time_s"].sum().median()) * MS,
            "choice": max(set(picks), key=picks.count),
            "ran": _most_common(g["protocol"]) if "protocol" in g else None,
        }
    return {
        "status": "available",
        "arch": topo.arch,
        "n_ranks": topo.n_ranks,
        "n_nodes": topo.n_nodes,
        "channels": topo.n_channels,
        "bw_per_channel_GBps": topo.bw_intra_GBps,
        "by_op": by_op,
    }


#: NCCL's TUNING function names → the store's op names.
_NCCL_FUNCS = {
    "AllReduce": "allreduce",
    "AllGather": "allgather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "AllToAll": "alltoall",
    "SendRecv": "sendrecv",
}


def protocol_labels(con: duckdb.DuckDBPyConnection, rid: int, df: pd.DataFrame) -> pd.Series:
    """'ALGO/PROTO' per instance where the run says which ran, else None: NCCL's TUNING choice
    lines whose size range holds the instance's size (NCCL 2.20+ logs), else the kernel names
    when every call of the op names one and the same algorithm and protocol
    (ncclKernel_AllReduce_RING_LL_...)."""
    out = pd.Series([None] * len(df), index=df.index, dtype=object)
    if db.has_macro(con, "collective_algorithms"):
        k = con.execute("SELECT * FROM collective_algorithms(?)", [rid]).df()
        for op, g in k.groupby("op"):
            if len(g) == 1 and g["protocol"].notna().all():
                label = f"{g['algo'].iloc[0] or '?'}/{g['protocol'].iloc[0]}"
                out[df["op"] == op] = label
    if db.has_macro(con, "nccl_algorithm_choices") and db.has_table(con, "nccl_tuning"):
        c = con.execute("SELECT * FROM nccl_algorithm_choices(?)", [rid]).df()
        c = c[c["func"].isin(list(_NCCL_FUNCS))].sort_values("choices", ascending=False)
        for r in c.itertuples():
            hit = (
                (df["op"] == _NCCL_FUNCS[r.func])
                & (df["bytes"] >= r.min_bytes)
                & (df["bytes"] <= r.max_bytes)
            )
            out[hit & out.isna()] = f"{r.algo}/{r.proto}"
    return out


def _most_common(labels: pd.Series) -> str | None:
    """The most frequent non-null label, None when there is none."""
    counts = labels.dropna().value_counts()
    return str(counts.index[0]) if len(counts) else None


def matched_instances(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame | None:
    """The run's matched collectives with their `protocol` label (see protocol_labels), None
    when the matching macro is not loaded."""
    if not db.has_macro(con, "collective_instances"):
        return None
    df = con.execute("SELECT * FROM collective_instances(?)", [rid]).df()
    return df.assign(protocol=protocol_labels(con, rid, df))


def _main_scenario(fits: list[OpFit], df: pd.DataFrame, step: dict) -> Scenario | None:
    """The calibrated ring of the op that moved the most bytes, in the regime of its
    byte-weighted median message."""
    main = fits[0]
    mid = median_message(df, main.op, main.n_ranks)
    return calibrated_scenario(
        main.link_for(mid), per_step(df), step.get("compute_s"), step.get("eta")
    )


def run_scenario(con: duckdb.DuckDBPyConnection, rid: int) -> Scenario | None:
    """Run `rid` as a calibrated Scenario for what-if sweeps (its measured point is the
    `model` section's `measured`); None when it cannot be fitted."""
    df = matched_instances(con, rid)
    fits = fit_ops(df) if df is not None else []
    if not fits:
        return None
    return _main_scenario(fits, df, measured_step(con, rid))


def model_section(
    con: duckdb.DuckDBPyConnection, rid: int, link_peak: LinkSpec | None = None
) -> dict:
    """The `model` report section of run `rid`; `link_peak` overrides the link whose peak the
    achieved busbw is compared with. Never raises on data: a fit that cannot be made says
    'not calibrated: reason'."""
    facts = topology_facts(con, rid)
    step = measured_step(con, rid)
    peak = _peak(facts, link_peak)
    df = matched_instances(con, rid)
    fits, reasons = calibrate_all(df) if df is not None else ([], {})
    nccl = nccl_model(facts, df, peak)
    if not fits:
        status = NOT_CALIBRATED if df is None or usable(df).empty else TOO_FEW
        if len(reasons) == 1:
            status = next(iter(reasons.values()))
        return {
            "status": status,
            "measured": _measured(step, None, facts, None, peak),
            "predicted": None,
            "fit": None,
            "nccl_model": nccl,
        }
    traffic = per_step(df)
    main = fits[0]
    busbw = achieved_busbw_Bps(df, main.op, main.n_ranks)
    measured = _measured(step, traffic, facts, busbw, peak)
    s = _main_scenario(fits, df, step)
    peak_Bps = peak.line_Bps if peak else None
    fit = {**_fit_dict(main, df), "per_op": [_fit_dict(x, df) for x in fits]}
    fit["not_fitted"] = reasons
    return {
        "status": main.status,
        "measured": measured,
        "predicted": None if s is None else _predicted(s, step, peak_Bps, df, fits),
        "fit": fit,
        "nccl_model": nccl,
    }
