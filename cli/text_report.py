"""Plain-text rendering of the report dict (formatting only; the numbers come from analysis)."""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from commwall.analysis.collectives.instances import matching_sentence
from commwall.analysis.model.summary import predicted_reason
from commwall.analysis.report.checklist import ordered
from commwall.analysis.units import ms_text, size_text
from commwall.dashboard.hang_text import render_hang
from commwall.dashboard.inspector_text import render_inspector
from commwall.dashboard.nccl_text import render_nccl

Table = Callable[[pd.DataFrame], str]


def _summary(s: dict, table: Table) -> str:
    if "step_ms" not in s:
        return "no timeline activity"
    share = s.get("exposed_comm_share")
    span = "step" if s["scope"] == "steps" else "trace span"  # no step annotations: per rank
    lines = [
        f"scope: {s['scope']} ({s.get('aggregation', 'medians over ranks and steps')})",
        f"{span} {s['step_ms']:.3f} ms | τ_comp {s['tau_comp_ms']:.3f} ms | "
        f"τ_comm {s['tau_comm_ms']:.3f} ms | overlap {s['overlap_ms']:.3f} ms",
        f"η {_f(s['eta'])} | γ {_f(s['gamma'])} | exposed comm {s['exposed_comm_ms']:.3f} ms"
        f" | idle {s['idle_ms']:.3f} ms"
        + (f" | exposed comm is {100 * share:.1f}% of {span} time" if share is not None else ""),
    ]
    return "\n".join(lines)


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _hundred(v: float | None) -> float | None:
    return None if v is None else 100 * v


#: A table of the text report shows at most this many rows; a longer one (hundreds of ranks)
#: shows those first by the table's key and counts the rest: every row is in --format json
#: or csv, and a terminal of 10,000 lines answers nothing.
MAX_TEXT_ROWS = 40


def _capped(df: pd.DataFrame, table: Table, by: str, what: str) -> str:
    """`df` as a table: all of it up to MAX_TEXT_ROWS rows in its own order, else the
    MAX_TEXT_ROWS rows with the largest `by` (they are `what`) and a line counting the rest."""
    if len(df) <= MAX_TEXT_ROWS or by not in df.columns:
        return table(df)
    top = df.sort_values(by, ascending=False, kind="stable").head(MAX_TEXT_ROWS)
    return (
        table(top)
        + f"\n… {MAX_TEXT_ROWS} of {len(df):,} rows shown: the {what}; every row: --format "
        "json or csv"
    )


def _records(rows: list[dict], table: Table) -> str:
    return table(pd.DataFrame(rows))


def _ranks_table(rows: list[dict], table: Table) -> str:
    return _capped(pd.DataFrame(rows), table, "exposed_comm_ms", "ranks with the most exposed "
                   "communication")  # fmt: skip


def _steps_table(rows: list[dict], table: Table) -> str:
    return _capped(pd.DataFrame(rows), table, "step_ms", "slowest rank-steps")


def _generic(value: Any, table: Table) -> str:
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return _records(value, table)
    return json.dumps(value, indent=2, default=str)


def _stragglers(s: dict, table: Table) -> str:
    cols = ("rank", "host", "score", "late_fraction", "wait_caused_ms", "excess_ms", "compute_ms")
    rows = [{c: r[c] for c in (*cols, "flagged", "kind")} for r in s["ranks"]]
    ranked = _capped(pd.DataFrame(rows), table, "score", "ranks with the highest score")
    caveat = s["caveat"] + "\n" if s.get("caveat") else ""
    return caveat + s["verdict"] + ("\n" + ranked if rows else "")


def _collectives(c: dict, table: Table) -> str:
    cols: tuple[str, ...] = ("op", "count", "bytes_median", "transfer_ms_median")
    cols += ("algbw_GBps_median",)
    cols += ("busbw_GBps_median", "skew_start_ms_median", "skew_end_ms_median", "wait_ms_total")
    m, k = c["matching"], c["clock"]
    return "\n".join(
        [
            table(pd.DataFrame([{x: o[x] for x in cols} for o in c["ops"]])),
            matching_sentence(m),
            f"clocks: {k['n_domains']} domain(s), largest offset {_f(k['max_abs_offset_ms'])} ms,"
            f" median end skew {_f(k['skew_end_ms_median'])} ms, {k['n_violations']} of"
            f" {k['n_checked']} instances end before their last arrival",
        ]
    )


def _gpus(r: dict) -> str:
    if r.get("gpus"):
        return ", ".join(r["gpus"])
    kind = r.get("device_kind")
    if kind is None:
        return "not recorded (no traces)"
    return "GPU (model not recorded)" if kind == "gpu" else "none (CPU traces)"


def _ranks(r: dict) -> str:
    """Traced ranks with the world size, and the ranks that left a Flight Recorder dump."""
    out = f"ranks: {r.get('n_ranks')} (world size {r.get('world_size') or 'not recorded'})"
    dumps = r.get("n_dump_ranks") or 0
    if dumps and not r.get("n_ranks"):
        return f"ranks: none traced, {dumps} with a Flight Recorder dump"
    if not r.get("n_ranks") and r.get("nccl_world_size"):
        return f"ranks: none traced (the NCCL logs: {r['nccl_world_size']} ranks)"
    return out + (f", {dumps} with a Flight Recorder dump" if dumps else "")


def _run_info(r: dict, table: Table) -> str:
    files = ", ".join(f"{n} {fmt}" for fmt, n in r.get("files", {}).items()) or "none"
    parts = [
        f"files: {files}",
        _ranks(r),
        f"steps: {r.get('n_steps')}",
        f"backends: {', '.join(r.get('backends') or []) or 'not recorded'}",
        f"GPUs: {_gpus(r)}",
        f"hosts: {', '.join(r.get('hosts') or []) or 'not recorded'}",
        f"time bases: {', '.join(r.get('time_bases') or [])}",
    ]
    if r.get("capture"):  # the checks of a `commwall capture` directory
        parts.append(f"capture: {r['capture']}")
    shown = " | ".join(parts)
    rest = {k: v for k, v in r.items() if k not in _RUN_KEYS}
    return shown + ("\n" + _generic(rest, table) if rest else "")


_RUN_KEYS = (
    "files",
    "n_ranks",
    "n_dump_ranks",
    "nccl_world_size",
    "world_size",
    "n_steps",
    "backends",
    "gpus",
    "device_kind",
    "hosts",
    "time_bases",
    "capture",
)
_MODEL_ROWS = (
    "step_ms",
    "tau_comp_ms",
    "tau_comm_ms",
    "exposed_comm_ms",
    "idle_ms",
    "eta",
    "gamma",
    "comm_overhead",
    "gpu_efficiency",
    "bytes_per_step",
    "collectives_per_step",
)


def _model(m: dict, table: Table) -> str:
    measured, predicted, fit = m.get("measured") or {}, m.get("predicted"), m.get("fit")
    head = f"status: {m['status']}"
    if predicted:
        head += f" — predicted by {predicted['algorithm']}"
    rows = [
        {"metric": k, "measured": measured.get(k)}
        | ({"predicted": predicted.get(k)} if predicted else {})
        for k in _MODEL_ROWS
        if measured.get(k) is not None or (predicted or {}).get(k) is not None
    ]
    lines = [head, table(pd.DataFrame(rows)) if rows else "(no step measurements)"]
    for label, d in (("measured", measured), ("predicted", predicted or {})):
        if d.get("verdict"):
            reason = (predicted_reason(m) if label == "predicted" else None) or d["reason"]
            lines.append(f"{label}: {d['verdict']} — {reason}")
    left_out = (predicted or {}).get("not_modelled")
    if left_out:
        ops = ", ".join(f"{op} ({n:g} per step)" for op, n in left_out.items())
        lines.append(
            f"not in the prediction: {ops}; their time is in the measured τ_comm, the model "
            "covers all-reduce-equivalent traffic only"
        )
    for f in (fit or {}).get("per_op", []):
        lines.append(
            f"fit {f['op']} over {f['n_ranks']} ranks ({f['n']} collectives): "
            f"α {_f(f['alpha_us'])} µs per hop, bus bandwidth β {_f(f['beta_GBps'])} GB/s, "
            f"achieved busbw {_f(f['achieved_busbw_GBps'])} GB/s; "
            f"held-out median error {_f(_hundred(f.get('heldout_median_ape')))} % — "
            f"{f.get('status')}"
        )
    if measured.get("busbw_vs_peak") is not None:
        lines.append(
            f"busbw is {100 * measured['busbw_vs_peak']:.0f}% of the link peak "
            f"({_f(measured['peak_busbw_GBps'])} GB/s, {measured.get('link')})"
        )
    return "\n".join(lines)


def _diagnosis(d: dict, table: Table) -> str:
    if not d.get("answer"):
        return textwrap.fill(d.get("paragraph") or "not available", width=100)
    # the answer at a glance, its points, the fixes ranked; then the paragraph behind them
    out = [textwrap.fill(d["answer"], width=100), ""]
    for p in d.get("brief") or []:
        out.append(textwrap.fill(p["text"], width=100, initial_indent="- ", subsequent_indent="  "))
    fixes = d.get("fixes") or {}
    if fixes.get("rows"):
        out += ["", f"Fixes, replayed from {fixes['baseline']} ({ms_text(fixes['baseline_ms'])}):"]
        width = max(len(r["fix"]) for r in fixes["rows"])
        out.append(f"  {'fix'.ljust(width)}  {'step after':>10}  saving")
        for r in fixes["rows"]:
            out.append(
                f"  {r['fix'].ljust(width)}  {ms_text(r['step_ms']):>10}  −{r['saving_pct']:.0f}%"
            )
    return "\n".join([*out, "", textwrap.fill("In detail: " + d["paragraph"], width=100)])


def _decomposition(d: dict, table: Table) -> str:
    if not d.get("ranks"):
        return "not available: no timeline activity"
    cols = ["rank", "step_ms", *d["parts"]]
    head = "parts of the step (ms; they add up to step_ms), run mean: " + ", ".join(
        f"{k.removesuffix('_ms')} {d['run'][k]:.3f}" for k in d["parts"]
    )
    ranks = pd.DataFrame(d["ranks"])[cols]
    return head + "\n" + _capped(ranks, table, "step_ms", "ranks with the longest mean step")


def render_replay(r: dict, table: Table) -> str:
    if not r.get("available"):
        return f"not available: {r.get('reason')}"
    head = (
        f"measured step {r['measured_step_ms']:.3f} ms ({r['statistic']}), replayed "
        f"{r['replayed_step_ms']:.3f} ms (error {100 * (r['replay_error'] or 0):.2f}%)"
    )
    rows = [{k: w[k] for k in ("key", "step_ms", "saving_ms", "saving_pct", "label")}
            for w in r["whatifs"]]  # fmt: skip
    return head + "\n" + table(pd.DataFrame(rows))


def _fabric(f: dict, table: Table) -> str:
    """The run's collective classes against nccl-tests on the same fabric."""
    if not f.get("present"):
        return f"not available: {f.get('reason')}"
    rows = [
        {
            "op": c["op"],
            "size": size_text(c["size_bytes"]),
            "calls": c["n_calls"],
            "training busbw GB/s": round(c["busbw_GBps"], 2),
            "nccl-tests busbw GB/s": None
            if c["baseline_busbw_GBps"] is None
            else round(c["baseline_busbw_GBps"], 2),
            "ratio %": None if c["ratio"] is None else round(100 * c["ratio"]),
            "baseline": c["baseline"] or "-",
        }
        for c in f["classes"][:MAX_TEXT_ROWS]
    ]
    more = f["n_classes"] - len(rows)
    tail = f"\n… {len(rows)} of {f['n_classes']} classes shown" if more > 0 else ""
    return (
        "\n".join([textwrap.fill(f["sentence"] or "", width=100), table(pd.DataFrame(rows))]) + tail
    )


_MARKS = {"attention": "[!]", "ok": "[ok]", "not_observable": "[?]", "not_applicable": "[-]"}


def _checklist(items: list[dict], table: Table) -> str:
    """Items needing attention first, then those the run shows fine, then the unobservable."""
    out = []
    for it in ordered(items):
        mark = _MARKS.get(it["status"], f"[{it['status']}]")
        out.append(f"{mark} {it['title']} ({it['status'].replace('_', ' ')})")
        out.append(f"      evidence: {it['evidence']}")
        if it.get("action") and it["status"] != "ok":
            out.append(f"      action: {it['action']}")
    return "\n".join(out)


def _pipeline(p: dict, table: Table) -> str:
    if not p.get("available"):
        return f"not available: {p.get('reason') or 'no pipeline found'}"
    out = [textwrap.fill(str(p.get("sentence") or ""), width=100)]
    for c in p.get("pipelines") or []:
        formula = c.get("bubble_formula")
        bubble = f", bubble formula {100 * formula:.0f}%" if formula is not None else ""
        out.append(
            f"pipeline of ranks {', '.join(map(str, c['ranks']))}: "
            f"{c['micro_batches']} micro-batches per step{bubble}; replayed step "
            f"{ms_text(c.get('step_ms'))}, stages balanced {ms_text(c.get('balanced_step_ms'))}"
        )
        stages = pd.DataFrame(c["stages"])
        out.append(
            table(
                stages.rename(
                    columns=lambda k: k.replace("_ms", " (ms per step)").replace("_", " ")
                )
            )
        )
    return "\n".join(out)


def _dimensions(d: dict, table: Table) -> str:
    run = d.get("run") or []
    if not run:
        return f"not available: {d.get('reason') or 'no communication to split'}"
    rows = pd.DataFrame(run)[
        ["label", "exposed_ms", "exposed_transfer_ms", "exposed_wait_ms", "share_of_step"]
    ]
    rows["share_of_step"] = (100 * rows["share_of_step"]).round(1)
    head = (
        f"exposed communication by parallelism dimension, ms per step (of the "
        f"{ms_text(d.get('step_ms'))} step, {ms_text(d.get('exposed_comm_ms'))} exposed):"
    )
    names = {
        "label": "dimension",
        "exposed_ms": "exposed",
        "exposed_transfer_ms": "transfer",
        "exposed_wait_ms": "waiting",
        "share_of_step": "% of the step",
    }
    return head + "\n" + table(rows.rename(columns=names))


#: Renderers per report key; keys without one are printed generically.
RENDERERS: dict[str, Callable[[Any, Table], str]] = {
    "diagnosis": _diagnosis,
    "decomposition": _decomposition,
    "replay": render_replay,
    "run_info": _run_info,
    "model": _model,
    "checklist": _checklist,
    "summary": _summary,
    "ranks": _ranks_table,
    "steps": _steps_table,
    "stragglers": _stragglers,
    "collectives": _collectives,
    "nccl": render_nccl,
    "hang": render_hang,
    "fabric": _fabric,
    "pipeline": _pipeline,
    "dimensions": _dimensions,
    "inspector": render_inspector,
}

TITLES = {
    "diagnosis": "Diagnosis: why",
    "decomposition": "Where the step goes",
    "replay": "What-if replay of the measured run",
    "run_info": "Run",
    "summary": "Summary",
    "ranks": "Per rank (whole trace)",
    "steps": "Per rank and step",
    "stragglers": "Stragglers",
    "collectives": "Collectives across ranks",
    "nccl": "NCCL logs",
    "hang": "Hang (Flight Recorder)",
    "fabric": "Collectives against nccl-tests on this fabric",
    "pipeline": "Pipeline stages",
    "dimensions": "The step by parallelism dimension",
    "inspector": "Over the whole run (NCCL Inspector)",
}


def render_text(report: Mapping[str, Any], table: Table) -> str:
    """The report as sections of text."""
    out = [f"commwall report — run {report['run']}"]
    errors = report.get("analysis_errors") or {}
    first = [k for k in ("diagnosis",) if k in report]
    for key in [*first, *(k for k in report if k not in first)]:
        value = report[key]
        if key in ("run", "analysis_errors"):
            continue
        title = TITLES.get(key, key.replace("_", " ").capitalize())
        if value is None and key in errors:
            body = f"not available: {errors[key]}"
        else:
            try:
                body = RENDERERS.get(key, _generic)(value, table)
            except Exception as e:  # noqa: BLE001 (one section never hides the others)
                body = f"not available: cannot show it ({type(e).__name__}: {e})"
                logging.getLogger("commwall.report").error("%s: %s", key, body, exc_info=e)
        out.append(f"\n== {title}\n{body}")
    return "\n".join(out)
