"""Report sections side by side: the headline metrics, the diagnosis, collectives per op and
size, stragglers, NCCL facts and the model, one column per run (named by the run) and, for
numbers, a change against the baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from commwall.analysis.compare.facts import RunFacts, fact_text, run_names, with_deltas
from commwall.analysis.compare.pair import METRICS
from commwall.analysis.units import NS_PER_MS


def summary(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """The report's headline metrics (the run summary: means over ranks and steps), a row each."""
    names = run_names(runs)
    spans = [
        r.name
        for r in runs
        if (s := r.report.get("summary") or {}).get("step_ms") is not None
        and s.get("scope") != "steps"
    ]
    # a run without steps has no step: say so beside its figure
    spanned = f" (no steps, whole trace span per rank: {', '.join(spans)})" if spans else ""
    rows = [
        {"metric": k, "label": label + (spanned if k == "step_ms" else "")}
        | {r.name: (r.report.get("summary") or {}).get(k) for r in runs}
        for k, label in METRICS.items()
    ]
    return with_deltas(pd.DataFrame(rows), names)


def diagnosis(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """One row per run: the diagnosis's cause and paragraph, and the replayed step time,
    when the report has them (else "not available")."""
    rows = []
    for r in runs:
        d = r.report.get("diagnosis") or {}
        rep = r.report.get("replay") or {}
        rows.append(
            {
                "run": r.name,
                "cause": fact_text(d.get("label") or d.get("cause")) or "not available",
                "paragraph": d.get("paragraph") or "not available: the report has no diagnosis",
                "replayed_step_ms": rep.get("replayed_step_ms"),
            }
        )
    return pd.DataFrame(rows)


def collectives(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Per (op, message size): instances, median transfer time (ms) and median bus bandwidth
    (GB/s) in every run; `Δ% busbw <run>` the bandwidth change against the baseline."""
    names = run_names(runs)
    frames = []
    for r in runs:
        if not len(r.sizes):
            continue
        df = r.sizes.assign(transfer_ms=r.sizes["transfer_ns_median"] / NS_PER_MS)
        df = df.rename(
            columns={
                "count": f"count {r.name}",
                "transfer_ms": f"transfer_ms {r.name}",
                "busbw_GBps_median": f"busbw_GBps {r.name}",
            }
        ).drop(columns=["transfer_ns_median"])
        frames.append(df.set_index(["op", "bytes"]))
    if not frames:
        return pd.DataFrame(columns=["op", "bytes"])
    wide = pd.concat(frames, axis=1).reset_index().sort_values(["op", "bytes"])
    base = f"busbw_GBps {names[0]}"
    for n in names[1:]:
        col = f"busbw_GBps {n}"
        if base in wide.columns and col in wide.columns:
            wide[f"Δ% busbw {n}"] = 100 * (wide[col] / wide[base] - 1)
    return wide.reset_index(drop=True)


def stragglers(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Per rank: flagged (and why: compute, or late for other reasons), share of collectives
    it arrived last at, median lateness (ms) and the wait it caused the others (ms), per run."""
    names = run_names(runs)
    frames = []
    for r in runs:
        ranks = (r.report.get("stragglers") or {}).get("ranks") or []
        if not ranks:
            continue
        df = pd.DataFrame(ranks).set_index("rank")
        flagged = df.get("flagged", pd.Series(False, index=df.index)).fillna(False)
        kind = df.get("kind", pd.Series(None, index=df.index))
        frames.append(
            pd.DataFrame(
                {
                    f"straggler {r.name}": [
                        (k or "yes") if f else "" for f, k in zip(flagged, kind, strict=True)
                    ],
                    f"last_share {r.name}": df.get("late_fraction"),
                    f"lateness_ms {r.name}": df.get("lateness_ms"),
                    f"wait_caused_ms {r.name}": df.get("wait_caused_ms"),
                },
                index=df.index,
            )
        )
    if not frames:
        return pd.DataFrame(columns=["rank"])
    wide = pd.concat(frames, axis=1).reset_index()
    base = f"wait_caused_ms {names[0]}"
    for n in names[1:]:
        col = f"wait_caused_ms {n}"
        if base in wide.columns and col in wide.columns:
            wide[f"Δ wait_caused_ms {n}"] = wide[col] - wide[base]
    return wide


def straggler_verdicts(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """One row per run: flagged ranks and the straggler verdict in words."""
    rows = []
    for r in runs:
        s = r.report.get("stragglers") or {}
        rows.append(
            {
                "run": r.name,
                "flagged": ", ".join(str(x) for x in s.get("flagged") or []) or "none",
                "verdict": s.get("verdict") or "not available",
            }
        )
    return pd.DataFrame(rows)


def _report_nccl_facts(report: Mapping[str, Any]) -> dict[str, str]:
    n = report.get("nccl") or {}
    if not n.get("present"):
        return {"NCCL log": "none"}
    return {
        "NCCL log": "present",
        "versions": fact_text(n.get("versions")),
        "version mismatch": fact_text(n.get("version_mismatch")),
        "transports": fact_text(n.get("transports")),
        "networks": fact_text(n.get("networks")),
        "GPU Direct RDMA": fact_text(n.get("gdr")),
        "TCP fallback": fact_text((n.get("tcp_fallback") or {}).get("detected")),
        "warnings": fact_text((n.get("warnings") or {}).get("count")),
        "errors": fact_text((n.get("errors") or {}).get("count")),
        "timeouts": fact_text((n.get("timeouts") or {}).get("count")),
    }


def nccl(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """One row per NCCL fact (versions, transports, GDR, algorithms and protocols, the
    environment) with its value in every run and whether it changed."""
    names = run_names(runs)
    per_run: dict[str, dict[str, str]] = {}
    for r in runs:
        facts = _report_nccl_facts(r.report)
        if len(r.nccl):
            facts |= dict(zip(r.nccl["fact"], r.nccl["value"], strict=True))
        per_run[r.name] = facts
    keys = list(dict.fromkeys(k for f in per_run.values() for k in f))
    rows = []
    for k in keys:
        vals = {n: per_run[n].get(k, "") for n in names}
        rows.append({"fact": k, **vals, "changed": len(set(vals.values())) > 1})
    return pd.DataFrame(rows, columns=["fact", *names, "changed"])


#: Model rows: key → (report `model` part, key there, label).
MODEL_FIELDS = {
    "alpha_us": ("fit", "alpha_us", "α per hop (µs)"),
    "beta_GBps": ("fit", "beta_GBps", "β bus bandwidth (GB/s)"),
    "latency_us": ("fit", "latency_us", "latency (µs)"),
    "achieved_busbw_GBps": ("fit", "achieved_busbw_GBps", "achieved busbw (GB/s)"),
    "r2": ("fit", "r2", "fit R²"),
    "measured_step_ms": ("measured", "step_ms", "measured step (ms)"),
    "predicted_step_ms": ("predicted", "step_ms", "predicted step (ms)"),
    "measured_verdict": ("measured", "verdict", "measured verdict"),
    "predicted_verdict": ("predicted", "verdict", "predicted verdict"),
}


def model(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """The α-β fit and the model's step prediction beside the measurement, per run."""
    names = run_names(runs)
    rows = []
    for key, (part, src, label) in MODEL_FIELDS.items():
        row: dict[str, Any] = {"field": key, "label": label}
        for r in runs:
            row[r.name] = (((r.report.get("model") or {}).get(part)) or {}).get(src)
        rows.append(row)
    return with_deltas(pd.DataFrame(rows), names)
