"""Runs side by side against a baseline (the first run): step time judged against noise, the
step decomposition per rank, collectives per op and size, stragglers, NCCL and model changes.

Every table is a DataFrame with one column per run (named by the run) and, for numbers, a
`Δ <run>` column per later run (run − baseline). Per-run figures come from the report and
from analysis/sql/diff.sql; the noise test is analysis/compare/noise.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from commwall.analysis.compare import noise
from commwall.analysis.compare.pair import METRICS
from commwall.analysis.db import run_id
from commwall.analysis.report.build import build_report
from commwall.analysis.report.diagnosis import HUNG_LABEL
from commwall.analysis.report.session import run_session
from commwall.analysis.steps.summary import PART_LABELS
from commwall.analysis.units import NS_PER_MS

#: Components of a step, in the order they add up to it. The diagnosis's decomposition
#: (report key `decomposition`) when present; otherwise DERIVED_PARTS from the step metrics.
PARTS = [
    "compute_only_ms",
    "compute_overlapped_ms",
    "exposed_transfer_ms",
    "exposed_wait_ms",
    "memory_only_ms",
    "idle_ms",
]
DERIVED_PARTS = ["compute_only_ms", "compute_overlapped_ms", "exposed_comm_ms", "idle_ms"]


@dataclass
class RunFacts:
    """What the diff needs of one run: its report and three per-run tables of diff.sql."""

    name: str
    report: Mapping[str, Any]
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)  # step_times
    sizes: pd.DataFrame = field(default_factory=pd.DataFrame)  # collective_sizes
    nccl: pd.DataFrame = field(default_factory=pd.DataFrame)  # nccl_facts


def run_facts(
    con: duckdb.DuckDBPyConnection, name: str, report: Mapping[str, Any] | None = None
) -> RunFacts:
    """The RunFacts of run `name` (its report is built unless given)."""
    rid = run_id(con, name)

    def q(macro: str) -> pd.DataFrame:
        return con.execute(f"SELECT * FROM {macro}(?)", [rid]).df()

    with run_session(con, rid):  # the report and the tables read one matching
        report = build_report(con, name, keep_going=True) if report is None else report
        return RunFacts(name, report, q("step_times"), q("collective_sizes"), q("nccl_facts"))


def _names(runs: Sequence[RunFacts]) -> list[str]:
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"a run is named twice: {names}")
    return names


def _with_deltas(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """`Δ <run>` = run − baseline for every later run whose column is numeric."""
    base = names[0]
    for n in names[1:]:
        a = pd.to_numeric(df[base], errors="coerce")
        b = pd.to_numeric(df[n], errors="coerce")
        df[f"Δ {n}"] = b - a
    return df


def step_time(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """One row per run: the distribution of its step times (ms, slowest rank per step) and,
    for later runs, the change of the median against the baseline with the noise test."""
    base = runs[0].steps["step_ns"].to_numpy() / NS_PER_MS if len(runs[0].steps) else []
    rows = []
    for i, r in enumerate(runs):
        x = r.steps["step_ns"].to_numpy() / NS_PER_MS if len(r.steps) else np.array([])
        row: dict[str, Any] = {
            "run": r.name,
            "n_steps": len(x),
            "median_ms": float(np.median(x)) if len(x) else None,
            "p10_ms": float(np.percentile(x, 10)) if len(x) else None,
            "p90_ms": float(np.percentile(x, 90)) if len(x) else None,
            "cv": float(np.std(x) / np.mean(x)) if len(x) > 1 and np.mean(x) else None,
        }
        if i == 0:
            row |= {"change_pct": None, "ci_low_pct": None, "ci_high_pct": None}
            row |= {"p_value": None, "judgement": "baseline", "test": noise.TEST_NAME}
            row |= {"paired": None}
        else:
            pairs = noise.pairs(runs[0].steps["step"], base, r.steps["step"], x) if len(x) else None
            j = noise.judge(base, x, pairs)
            pct = {
                k: None if j.get(k) is None else 100 * j[k] for k in ("change", "ci_low", "ci_high")
            }
            row |= {
                "change_pct": pct["change"],
                "ci_low_pct": pct["ci_low"],
                "ci_high_pct": pct["ci_high"],
                "p_value": j.get("p_value"),
                "judgement": j["judgement"],
                "test": j["test"],
                "paired": j.get("paired", False),
            }
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in ("median_ms", "p10_ms", "p90_ms", "cv", "change_pct", "ci_low_pct", "ci_high_pct",
              "p_value"):  # fmt: skip
        df[c] = pd.to_numeric(df[c])
    return df


def step_samples(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Long table of every run's step times (run, step, step_ms): the distributions."""
    frames = [
        pd.DataFrame(
            {"run": r.name, "step": r.steps["step"], "step_ms": r.steps["step_ns"] / NS_PER_MS}
        )
        for r in runs
        if len(r.steps)
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def summary(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """The report's headline metrics (the run summary: means over ranks and steps), a row each."""
    names = _names(runs)
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
    return _with_deltas(pd.DataFrame(rows), names)


def decomposition_records(report: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    """(per rank and step records, component keys) of a report: the diagnosis's
    `decomposition` when the report has it, else components derived from `steps` (compute
    alone, compute under communication, exposed communication, idle)."""
    dec = report.get("decomposition")
    if isinstance(dec, dict):
        dec = dec.get("steps") or dec.get("ranks")
    if isinstance(dec, list) and dec and isinstance(dec[0], dict) and "rank" in dec[0]:
        parts = [p for p in PARTS if p in dec[0]]
        if parts:
            return dec, parts
    out = []
    for s in report.get("steps") or []:
        comp, both = s.get("tau_comp_ms") or 0.0, s.get("overlap_ms") or 0.0
        out.append(
            {
                "rank": s["rank"],
                "step": s["step"],
                "step_ms": s.get("step_ms"),
                "compute_only_ms": comp - both,
                "compute_overlapped_ms": both,
                "exposed_comm_ms": s.get("exposed_comm_ms"),
                "idle_ms": s.get("idle_ms"),
            }
        )
    return out, DERIVED_PARTS


def decomposition(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Per rank and component: the mean per step (ms) in every run, side by side."""
    names = _names(runs)
    frames = []
    for r in runs:
        recs, parts = decomposition_records(r.report)
        if not recs:
            continue
        df = pd.DataFrame(recs)
        cols = [p for p in parts if p in df.columns] + ["step_ms"]
        means = df.groupby("rank")[cols].mean().reset_index()
        long = means.melt(id_vars="rank", var_name="component", value_name=r.name)
        frames.append(long.set_index(["rank", "component"]))
    if not frames:
        return pd.DataFrame(columns=["rank", "component", *names])
    wide = pd.concat(frames, axis=1).reset_index()
    for n in names:
        if n not in wide.columns:
            wide[n] = None
    order = {c: i for i, c in enumerate(dict.fromkeys([*PARTS, *DERIVED_PARTS, "step_ms"]))}
    wide = wide.sort_values(["rank", "component"], key=lambda s: s.map(order).fillna(s))
    return _with_deltas(wide.reset_index(drop=True), names)


#: Words for the parts of a step in a comparison's sentence.
PART_WORDS = {**PART_LABELS, "exposed_comm_ms": "exposed communication"}


def step_change(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Where the step's change went: per later run and part of the step, the mean over the
    run's ranks of the part's mean per step (ms) in the baseline and in the run, and the
    change; the parts' changes add up to the change of the mean rank-step (`step_ms` row).
    Each run is averaged over its own ranks (a run may have more or fewer)."""
    dec = decomposition(runs)
    names = _names(runs)
    rows = []
    if len(dec):
        means = dec.groupby("component", sort=False)[names].mean(numeric_only=False)
        for n in names[1:]:
            for part, r in means.iterrows():
                base, now = r[names[0]], r[n]
                if pd.isna(base) or pd.isna(now):
                    continue
                rows.append(
                    {
                        "run": n,
                        "part": part,
                        "baseline_ms": float(base),
                        "run_ms": float(now),
                        "delta_ms": float(now - base),
                    }  # fmt: skip
                )
    return pd.DataFrame(rows, columns=["run", "part", "baseline_ms", "run_ms", "delta_ms"])


def change_sentence(tables: Mapping[str, pd.DataFrame], run: str) -> str | None:
    """Where `run`'s step changed against the baseline, in words: the mean rank-step's change
    and the parts that made it, largest first (those of at least a tenth of it and 2 % of the
    baseline's step, at least the largest one); for a run that hung, that its figures say
    nothing of it; None when the decomposition of either is not available."""
    df = tables["step_change"]
    df = df[df["run"] == run].set_index("part")
    causes = tables["diagnosis"].set_index("run")["cause"]
    if run in causes.index and str(causes[run]) == HUNG_LABEL:
        return (
            f"{run} hung: "
            + (
                "its figures hold the wait for the hung collective until the timeout, so its "
                "parts of the step say nothing about what changed"
                if "step_ms" in df.index
                else "no step time was measured from its files"
            )
            + " (its diagnosis names the rank that did not arrive)."
        )
    if "step_ms" not in df.index:
        return None
    total = float(df.loc["step_ms", "delta_ms"])
    floor = max(0.1 * abs(total), 0.02 * abs(float(df.loc["step_ms", "baseline_ms"])))
    parts = df.drop(index="step_ms").sort_values("delta_ms", key=abs, ascending=False)
    big = [p for p, r in parts.iterrows() if abs(r["delta_ms"]) >= floor] or list(parts.index[:1])
    said = ", ".join(
        f"{PART_WORDS.get(str(p), str(p))} {parts.loc[p, 'delta_ms']:+.3f} ms" for p in big
    )
    return (
        f"{run}: the mean rank-step changed by {total:+.3f} ms "
        f"({df.loc['step_ms', 'baseline_ms']:.3f} → {df.loc['step_ms', 'run_ms']:.3f} ms): "
        f"{said}.{_straggler_change(tables, run)}"
    )


#: How a flagged straggler's kind reads in a comparison's sentence.
KIND_WORDS = {
    "compute": "a compute straggler",
    "other": "late without more operator work (host, input or launch)",
    "": "not flagged",
}


def _straggler_change(tables: Mapping[str, pd.DataFrame], run: str) -> str:
    """The ranks whose straggler verdict differs between the baseline and `run` (flagged or
    not, compute or other), in a sentence; empty when none does. The parts of the step cannot
    show this: a rank's sleep inside an operator counts as compute there."""
    t = tables["stragglers"]
    base = next((c for c in t.columns if c.startswith("straggler ")), None)
    now = f"straggler {run}"
    if base is None or now not in t.columns or base == now:
        return ""
    changes = []
    for rec in t.to_dict("records"):
        a, b = rec[base], rec[now]
        if not isinstance(a, str) or not isinstance(b, str) or a == b:
            continue  # a rank one of the runs does not have, or no change
        changes.append(f"rank {rec['rank']} {KIND_WORDS.get(a, a)} → {KIND_WORDS.get(b, b)}")
    return f" Stragglers: {'; '.join(changes)}." if changes else ""


def collectives(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """Per (op, message size): instances, median transfer time (ms) and median bus bandwidth
    (GB/s) in every run; `Δ% busbw <run>` the bandwidth change against the baseline."""
    names = _names(runs)
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
    names = _names(runs)
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


def _fact(v: Any) -> str:
    """A report value as a short string (lists of records as `a / b; c / d`)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return "; ".join(
            " / ".join(str(x) for x in e.values() if x not in (None, "", []))
            if isinstance(e, dict)
            else str(e)
            for e in v
        )
    return str(v)


def _report_nccl_facts(report: Mapping[str, Any]) -> dict[str, str]:
    n = report.get("nccl") or {}
    if not n.get("present"):
        return {"NCCL log": "none"}
    return {
        "NCCL log": "present",
        "versions": _fact(n.get("versions")),
        "version mismatch": _fact(n.get("version_mismatch")),
        "transports": _fact(n.get("transports")),
        "networks": _fact(n.get("networks")),
        "GPU Direct RDMA": _fact(n.get("gdr")),
        "TCP fallback": _fact((n.get("tcp_fallback") or {}).get("detected")),
        "warnings": _fact((n.get("warnings") or {}).get("count")),
        "errors": _fact((n.get("errors") or {}).get("count")),
        "timeouts": _fact((n.get("timeouts") or {}).get("count")),
    }


def nccl(runs: Sequence[RunFacts]) -> pd.DataFrame:
    """One row per NCCL fact (versions, transports, GDR, algorithms and protocols, the
    environment) with its value in every run and whether it changed."""
    names = _names(runs)
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
    names = _names(runs)
    rows = []
    for key, (part, src, label) in MODEL_FIELDS.items():
        row: dict[str, Any] = {"field": key, "label": label}
        for r in runs:
            row[r.name] = (((r.report.get("model") or {}).get(part)) or {}).get(src)
        rows.append(row)
    return _with_deltas(pd.DataFrame(rows), names)


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
                "cause": _fact(d.get("label") or d.get("cause")) or "not available",
                "paragraph": d.get("paragraph") or "not available: the report has no diagnosis",
                "replayed_step_ms": rep.get("replayed_step_ms"),
            }
        )
    return pd.DataFrame(rows)


#: The tables of a diff, in output order.
TABLES = {
    "step_time": step_time,
    "summary": summary,
    "diagnosis": diagnosis,
    "decomposition": decomposition,
    "step_change": step_change,
    "collectives": collectives,
    "stragglers": stragglers,
    "straggler_verdicts": straggler_verdicts,
    "nccl": nccl,
    "model": model,
    "step_samples": step_samples,
}


def diff_tables(runs: Sequence[RunFacts]) -> dict[str, pd.DataFrame]:
    """Every table of the diff of `runs` (baseline first; at least two runs)."""
    if len(runs) < 2:
        raise ValueError("diff needs at least two runs (the first is the baseline)")
    _names(runs)
    return {k: f(runs) for k, f in TABLES.items()}


def diff(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The diff of runs `names` of the store (the first is the baseline)."""
    return diff_tables([run_facts(con, n) for n in names])


def unjudged(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The later runs whose step time could not be judged against the baseline (the
    judgement is "not available: ..."; no steps in one of them, as in a job that hung), each
    with the reason: a CI gate that cannot judge must not pass in silence."""
    return [
        f"{rec['run']}: {rec['judgement']}"
        for rec in tables["step_time"].to_dict("records")[1:]
        if str(rec.get("judgement") or "").startswith("not available")
    ]


def regressions(tables: dict[str, pd.DataFrame], pct: float) -> list[str]:
    """The later runs whose step time regressed by more than `pct` percent beyond noise
    (analysis/compare/noise.py `regressed`), each with the figures in words."""
    out = []
    for rec in tables["step_time"].to_dict("records")[1:]:
        row = {k: None if isinstance(v, float) and pd.isna(v) else v for k, v in rec.items()}
        j = {
            "judgement": row["judgement"],
            "change": None if row["change_pct"] is None else row["change_pct"] / 100,
            "ci_low": None if row["ci_low_pct"] is None else row["ci_low_pct"] / 100,
        }
        if noise.regressed(j, pct):
            ci = (
                f", 95% CI {row['ci_low_pct']:+.1f}% to {row['ci_high_pct']:+.1f}%"
                if row["ci_low_pct"] is not None
                else " (too few steps to estimate noise)"
            )
            out.append(f"{row['run']}: median step {row['change_pct']:+.1f}%{ci}")
    return out
