"""What the post-mortem document says, the same for HTML and Markdown: sentences and tables.

Each function reads the report (and, for the before/after part, analysis.compare's diff) and
returns plain text or rows (a list of dicts, or a "not available: ..." string) that the HTML
(export.py) and Markdown (export_markdown.py) renderers lay out; `as_text` turns any report
value into short text. Formatting only: no number is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from commwall.analysis.compare.diff import change_sentence
from commwall.analysis.model import whatif
from commwall.analysis.op_words import OP_WORDS
from commwall.analysis.report.checklist import evaluate
from commwall.analysis.steps.verdict import verdict

#: Report keys with a section of their own in the document; any other key is shown generically.
HANDLED = {
    "run", "run_info", "summary", "ranks", "steps", "stragglers", "collectives", "model",
    "nccl", "checklist", "decomposition", "diagnosis", "replay", "hang", "inspector",
    "fabric",
}  # fmt: skip
#: The heading of the NCCL Inspector section (only when the run has Inspector output).
INSPECTOR_HEADING = "Over the whole run (NCCL Inspector)"
NA = "not available"


def _num(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != 0 and (abs(v) < 10 ** (-digits) or abs(v) >= 1e7):
            return f"{v:.3g}"
        return f"{v:.{digits}f}"
    return as_text(v)


def _pct(v: Any) -> str:
    return "" if v is None else f"{100 * v:.1f}%"


def as_text(v: Any) -> str:
    """A value as short text: lists of records as `a / b; c / d`, dicts as `k: v, ...`."""
    if v is None:
        return ""
    if isinstance(v, dict):
        return ", ".join(
            f"{str(k).replace('_', ' ')}: {as_text(x)}"
            for k, x in v.items()
            if x not in (None, "", [], {})
        )
    if isinstance(v, list):
        return "; ".join(
            " / ".join(as_text(x) for x in e.values() if x not in (None, "", []))
            if isinstance(e, dict)
            else as_text(e)
            for e in v
        )
    if isinstance(v, float):
        return _num(v)
    return str(v)


# --- content: the same for HTML and Markdown --------------------------------------------------


def answer_text(report: Mapping[str, Any]) -> str | None:
    """The diagnosis's answer at a glance (at most 25 words), when the report has one."""
    d = report.get("diagnosis") or {}
    return str(d["answer"]) if isinstance(d, dict) and d.get("answer") else None


def brief_items(report: Mapping[str, Any]) -> list[str]:
    """The diagnosis's brief points (at most five), when the report has them."""
    d = report.get("diagnosis") or {}
    brief = d.get("brief") if isinstance(d, dict) else None
    return [str(p["text"]) for p in brief or [] if isinstance(p, dict) and p.get("text")]


def diagnosis_text(report: Mapping[str, Any]) -> tuple[str, str | None]:
    """(the paragraph that opens the document, its cause): the diagnosis's when the report
    has one, else the verdict and the straggler verdict."""
    d = report.get("diagnosis") or {}
    if isinstance(d, dict) and d.get("paragraph"):
        return str(d["paragraph"]), as_text(d.get("label") or d.get("cause")) or None
    v = verdict(report.get("summary"))
    parts = [f"{v['verdict']}: {v['reason']}." if v else "No communication was measured."]
    s = (report.get("stragglers") or {}).get("verdict")
    if s:
        parts.append(f"Straggler analysis — {s}.")
    return " ".join(parts), None


def model_note(report: Mapping[str, Any], whatifs: Any = None) -> str | None:
    """What a reader of the model's figures must know first: that the fit is not calibrated
    (its status), and that the model's what-ifs leave out the bandwidth and compression ones
    when the link bandwidth was not fitted. None when neither applies."""
    m = report.get("model") or {}
    status = str(m.get("status") or "")
    notes = []
    if status and status != "calibrated":
        notes.append(
            f"Model status: {status}. Its prediction and what-ifs rest on a fit whose held-out "
            "error is too large, or unknown, to act on."
        )
    labels = set(whatifs["what_if"]) if isinstance(whatifs, pd.DataFrame) else set()
    if "as measured (model)" in labels and not labels & {"2× link bandwidth"}:
        notes.append(f"What-ifs: {whatif.LINK_NOT_FITTED}.")
    return " ".join(notes) or None


def measured_vs_predicted(report: Mapping[str, Any]) -> list[dict]:
    """Rows quantity | measured | predicted of the model section (times in ms)."""
    m = report.get("model") or {}
    meas, pred = m.get("measured") or {}, m.get("predicted") or {}
    rows = []
    for key, label in [
        ("step_ms", "step time (ms)"),
        ("tau_comp_ms", "τ_comp, compute (ms)"),
        ("tau_comm_ms", "τ_comm, communication (ms)"),
        ("exposed_comm_ms", "exposed communication (ms)"),
        ("idle_ms", "idle (ms)"),
        ("eta", "η, overlap efficiency"),
        ("comm_overhead", "exposed share of the step"),
        ("verdict", "verdict"),
    ]:
        a, b = meas.get(key), pred.get(key)
        if a is None and b is None:
            continue
        fmt = _pct if key == "comm_overhead" else _num
        rows.append({"quantity": label, "measured": fmt(a), "predicted": fmt(b)})
    return rows


def summary_rows(report: Mapping[str, Any]) -> list[dict]:
    s = report.get("summary") or {}
    labels = [
        ("step_ms", "step time (ms)"),
        ("tau_comp_ms", "τ_comp (ms)"),
        ("tau_comm_ms", "τ_comm (ms)"),
        ("overlap_ms", "overlap (ms)"),
        ("exposed_comm_ms", "exposed communication (ms)"),
        ("idle_ms", "idle (ms)"),
        ("eta", "η (overlap ÷ min(τ_comp, τ_comm))"),
        ("gamma", "γ (τ_comm ÷ τ_comp)"),
    ]
    rows = [{"metric": lab, "value": _num(s.get(k))} for k, lab in labels if k in s]
    if "exposed_comm_share" in s:
        rows.append({"metric": "exposed communication share of step time",
                     "value": _pct(s["exposed_comm_share"])})  # fmt: skip
    return rows


def straggler_rows(report: Mapping[str, Any]) -> list[dict]:
    return [
        {
            "rank": r.get("rank"),
            "host": r.get("host"),
            "straggler": (r.get("kind") or "yes") if r.get("flagged") else "",
            "last arrivals": f"{r.get('n_last')}/{r.get('n_instances')}"
            if r.get("n_instances")
            else "",
            "lateness (ms)": _num(r.get("lateness_ms")),
            "wait caused (ms)": _num(r.get("wait_caused_ms")),
            "own wait (ms)": _num(r.get("wait_ms")),
            "compute (ms/step)": _num(r.get("compute_ms")),
        }
        for r in (report.get("stragglers") or {}).get("ranks") or []
    ]


def collective_rows(report: Mapping[str, Any]) -> list[dict]:
    return [
        {
            "op": o.get("op"),
            "instances": o.get("count"),
            "median size (B)": _num(o.get("bytes_median"), 0),
            "median transfer (ms)": _num(o.get("transfer_ms_median")),
            "median busbw (GB/s)": _num(o.get("busbw_GBps_median")),
            "best busbw (GB/s)": _num(o.get("busbw_GBps_max")),
            "arrival skew, median (ms)": _num(o.get("skew_start_ms_median")),
            "total wait (ms)": _num(o.get("wait_ms_total")),
        }
        for o in (report.get("collectives") or {}).get("ops") or []
    ]


def fabric_rows(report: Mapping[str, Any]) -> list[dict] | str:
    """The run's collective classes against nccl-tests on its fabric (the `fabric` section),
    or why there is no comparison."""
    f = report.get("fabric")
    if not isinstance(f, dict) or not f.get("present"):
        why = f.get("reason") if isinstance(f, dict) else None
        return f"{NA}: {why or 'no fabric section'}"
    return [
        {
            "op": OP_WORDS.get(c.get("op") or "", c.get("op")),
            "size (B)": _num(c.get("size_bytes"), 0),
            "calls": c.get("n_calls"),
            "training busbw (GB/s)": _num(c.get("busbw_GBps")),
            "nccl-tests busbw (GB/s)": _num(c.get("baseline_busbw_GBps")),
            "training ÷ nccl-tests": _pct(c.get("ratio")),
            "priced from": (
                f"{c['baseline']} (run {f['baseline_run']})"
                if c.get("baseline") and f.get("baseline_run")
                else c.get("baseline") or "—"
            ),
        }
        for c in f.get("classes") or []
    ]


def dimension_rows(report: Mapping[str, Any]) -> list[dict] | str:
    """The step's exposed communication by parallelism dimension (the `dimensions` section),
    or why there is none."""
    d = report.get("dimensions")
    rows = d.get("run") if isinstance(d, dict) else None
    if not rows:
        why = d.get("reason") if isinstance(d, dict) else None
        return f"{NA}: {why or 'no collectives with a process group'}"
    return [
        {
            "dimension": r.get("label") or r.get("dimension"),
            "exposed (ms per step)": _num(r.get("exposed_ms")),
            "waiting (ms)": _num(r.get("exposed_wait_ms")),
            "transfer (ms)": _num(r.get("exposed_transfer_ms")),
            "share of the step": _pct(r.get("share_of_step")),
        }
        for r in rows
    ]


def pipeline_rows(report: Mapping[str, Any]) -> list[dict] | str:
    """Each pipeline's stages (the `pipeline` section) with the pipeline's step as measured and
    under its what-ifs, or why there is no pipeline."""
    p = report.get("pipeline")
    if not isinstance(p, dict) or not p.get("available") or not p.get("pipelines"):
        why = p.get("reason") if isinstance(p, dict) else None
        return f"{NA}: {why or 'no sends and receives between stages'}"
    out = []
    for chain in p["pipelines"]:
        ranks = " → ".join(str(r) for r in chain.get("ranks") or [])
        for s in chain.get("stages") or []:
            out.append(
                {
                    "pipeline (ranks)": ranks,
                    "stage": s.get("stage"),
                    "rank": s.get("rank"),
                    "compute (ms per step)": _num(s.get("compute_ms")),
                    "waiting for a neighbour (ms)": _num(s.get("wait_ms")),
                    "receiving (ms)": _num(s.get("transfer_ms")),
                }
            )
        out.append(
            {
                "pipeline (ranks)": ranks,
                "stage": "step",
                "rank": "",
                "compute (ms per step)": f"measured {_num(chain.get('step_ms'))}",
                "waiting for a neighbour (ms)": (
                    f"stages balanced {_num(chain.get('balanced_step_ms'))}"
                ),
                "receiving (ms)": (
                    f"2× micro-batches {_num(chain.get('micro_batches_2m_step_ms'))} replayed, "
                    f"{_num(chain.get('micro_batches_2m_formula_step_ms'))} by the formula"
                ),
            }
        )
    return out


def nccl_rows(report: Mapping[str, Any]) -> list[dict]:
    n = report.get("nccl") or {}
    if not n.get("present"):
        return []
    facts = {
        "versions": n.get("versions"),
        "version mismatch": n.get("version_mismatch"),
        "ranks with a log": n.get("ranks", {}).get("with_log"),
        "ranks without a log": n.get("ranks", {}).get("without_log"),
        "networks": n.get("networks"),
        "transports": n.get("transports"),
        "GPU Direct RDMA": n.get("gdr"),
        "TCP fallback": (n.get("tcp_fallback") or {}).get("explanation")
        or (n.get("tcp_fallback") or {}).get("detected"),
        "warnings": (n.get("warnings") or {}).get("count"),
        "errors": (n.get("errors") or {}).get("count"),
        "watchdog timeouts": (n.get("timeouts") or {}).get("count"),
    }
    return [
        {"fact": k, "value": "yes" if v is True else "no" if v is False else as_text(v)}
        for k, v in facts.items()
        if v not in (None, [], "")
    ]


def hang_rows(report: Mapping[str, Any]) -> tuple[str, list[dict] | str]:
    """The hang section: its sentence and its findings (who never entered, mismatched or
    stuck), or why it is not available."""
    h = report.get("hang") or {}
    if not h.get("present"):
        return f"{NA}: {h.get('reason') or 'no hang section'}", []
    rows = [
        {"group": f["pg_name"], "seq": f["seq"], "kind": f["kind"], "op": f["op_name"],
         "culprit ranks": as_text(f["culprit_ranks"]), "other ranks": as_text(f["other_ranks"]),
         "expected": f["expected"], "culprits passed": as_text(f["culprit_values"])}
        for f in h.get("findings") or []
    ]  # fmt: skip
    return h.get("verdict") or NA, rows or "no rank missing, mismatched or stuck"


def rank_rows(report: Mapping[str, Any]) -> list[dict]:
    return [
        {
            "rank": r.get("rank"),
            "span (ms)": _num(r.get("span_ms")),
            "τ_comp (ms)": _num(r.get("tau_comp_ms")),
            "τ_comm (ms)": _num(r.get("tau_comm_ms")),
            "overlap (ms)": _num(r.get("overlap_ms")),
            "exposed comm (ms)": _num(r.get("exposed_comm_ms")),
            "idle (ms)": _num(r.get("idle_ms")),
            "η": _num(r.get("eta")),
            "γ": _num(r.get("gamma")),
        }
        for r in report.get("ranks") or []
    ]


def run_rows(report: Mapping[str, Any]) -> list[dict]:
    """The run's facts, those without a value left out (an empty cell says nothing)."""
    info = report.get("run_info") or {}
    return [
        {"fact": k.replace("_", " "), "value": text}
        for k, v in info.items()
        if (text := as_text(v)) not in ("", "None", "[]", "{}")
    ]


def frame_rows(df: Any) -> list[dict] | str:
    """A DataFrame as display rows (numbers formatted), or the "not available" string."""
    if isinstance(df, str):
        return df
    if df is None or len(df) == 0:
        return f"{NA}: none"
    return [{str(k): _num(v) for k, v in r.items()} for r in df.to_dict("records")]


def checklist(report: Mapping[str, Any]) -> list[dict]:
    items = report.get("checklist") or evaluate(report)
    rank = {"attention": 0, "ok": 1, "not_observable": 2}
    return sorted(items, key=lambda i: rank.get(i.get("status"), 3))


def diff_sentence(diff: dict) -> str:
    """The step-time judgement of a before/after document in words."""
    rows = diff["step_time"].to_dict("records")
    base, after = rows[0], rows[1]
    where = change_sentence(diff, after["run"]) if "step_change" in diff else None
    where = f" {where}" if where else ""  # it begins with the run's name, as written
    if after["change_pct"] is None or pd.isna(after["change_pct"]):
        judged = str(after.get("judgement") or "")
        return f"Step time: {judged if judged.startswith(NA) else NA}.{where}"
    ci = (
        f" (95% CI {after['ci_low_pct']:+.1f}% to {after['ci_high_pct']:+.1f}%,"
        f" p = {after['p_value']:.3g})"
        if after["ci_low_pct"] is not None and not pd.isna(after["ci_low_pct"])
        else ""
    )
    return (
        f"Median step time {base['median_ms']:.3f} ms → {after['median_ms']:.3f} ms, "
        f"{after['change_pct']:+.1f}%{ci}: {after['judgement']}. Test: {after['test']}.{where}"
    )
