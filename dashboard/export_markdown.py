"""The post-mortem document as Markdown (GitHub tables; the figures are in the HTML one).

Every string from the data is backslash-escaped, so a trace cannot inject markup; the content
is export_content.py's, the same as the HTML document's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from commwall.dashboard.export_content import (
    HANDLED,
    INSPECTOR_HEADING,
    NA,
    answer_text,
    as_text,
    brief_items,
    checklist,
    collective_rows,
    diagnosis_text,
    diff_sentence,
    dimension_rows,
    fabric_rows,
    frame_rows,
    hang_rows,
    measured_vs_predicted,
    model_note,
    nccl_rows,
    pipeline_rows,
    rank_rows,
    run_rows,
    straggler_rows,
    summary_rows,
)
from commwall.dashboard.inspector_text import postmortem_rows, summary_line

#: Characters that make Markdown inline markup or break a table cell (`.`, `-`, `(` only
#: matter at the start of a line, handled by _md's leading escape).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|<>~#])")


def _md(v: Any) -> str:
    text = _MD_SPECIAL.sub(r"\\\1", as_text(v)).replace("\n", " ")
    return re.sub(r"^([-+])", r"\\\1", re.sub(r"^(\d+)\.", r"\1\\.", text))


def _md_code(v: Any) -> str:
    """Text whose `x` spans stay inline code, the rest escaped."""
    parts = str(v).split("`")
    return "".join(f"`{s}`" if i % 2 else _md(s) for i, s in enumerate(parts))


def _md_table(rows: list[dict] | str) -> str:
    if isinstance(rows, str):
        return f"*{_md(rows)}*"
    if not rows:
        return f"*{NA}: none*"
    cols = list(dict.fromkeys(c for r in rows for c in r))
    lines = ["| " + " | ".join(_md(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_md(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(report: Mapping[str, Any], extra: dict | None = None) -> str:
    """The document as Markdown (GitHub tables; the figures are in the HTML document)."""
    data = {"report": report, **(extra or {})}
    diff = data.get("diff")
    title = _md(report.get("run"))
    if diff is not None:
        title += f" against {_md(data.get('baseline'))}"
    para, cause = diagnosis_text(report)
    out = [f"# commwall post-mortem — {title}", "", _md(report.get("run_info")), "",
           "## Diagnosis", ""]  # fmt: skip
    if a := answer_text(report):
        out += [f"**{_md(a)}**", ""]
    if items := brief_items(report):
        out += [*(f"- {_md(x)}" for x in items), "", "### In detail", ""]
    out += [_md(para) if a else f"**{_md(para)}**", ""]
    if cause:
        out += [f"Cause: {_md(cause)}", ""]
    if diff is not None:
        out += ["## Before and after", "", _md(diff_sentence(diff)), ""]
        for key in ("step_time", "summary", "decomposition", "collectives", "stragglers",
                    "nccl", "model"):  # fmt: skip
            out += [f"### {_md(key.replace('_', ' '))}", "", _md_table(frame_rows(diff[key])), ""]
    sections = [
        ("Measured and predicted", measured_vs_predicted(report) or f"{NA}: no model section"),
        (
            "What-ifs, best first (step time in ms, saving in %)",
            frame_rows(data.get("whatifs")) if "whatifs" in data else f"{NA}: needs the store",
        ),
        ("Summary (means over ranks and steps)", summary_rows(report)),
        ("Stragglers", straggler_rows(report)),
        ("Collectives", collective_rows(report)),
        ("The step by parallelism dimension", dimension_rows(report)),
        ("Pipeline", pipeline_rows(report)),
        ("Collectives against nccl-tests on this fabric", fabric_rows(report)),
        ("NCCL", nccl_rows(report) or (report.get("nccl") or {}).get("hint") or NA),
        ("Per rank (whole trace)", rank_rows(report)),
    ]
    for head, rows in sections:
        out += [f"## {head}", ""]
        if head == "Measured and predicted" and (note := model_note(report, data.get("whatifs"))):
            out += [f"**{_md(note)}**", ""]
        if head == "Stragglers":
            caveat = (report.get("stragglers") or {}).get("caveat")
            out += [f"**{_md(caveat)}**", ""] if caveat else []
            out += [_md((report.get("stragglers") or {}).get("verdict") or NA), ""]
        if head == "Pipeline" and (report.get("pipeline") or {}).get("sentence"):
            out += [_md(report["pipeline"]["sentence"]), ""]
        if head == "NCCL":
            out += [f"- {_md(f)}" for f in (report.get("nccl") or {}).get("findings") or []]
        out += [_md_table(rows), ""]
    hang_text, hang_table = hang_rows(report)
    out += ["## Hang (Flight Recorder)", "", _md(hang_text), ""]
    out += [_md_table(hang_table), ""] if hang_table else []
    if (ins := report.get("inspector") or {}).get("present"):
        out += [f"## {INSPECTOR_HEADING}", "", _md(summary_line(ins)), ""]
        out += [*(f"- {_md(f)}" for f in ins["findings"]), ""]
        out += [_md_table(rows), ""] if (rows := postmortem_rows(ins)) else []
    out += ["## Checklist", ""]
    out += [
        f"- **{_md(str(i.get('status')).replace('_', ' '))}** — {_md(i.get('title'))}: "
        + _md_code(i.get("evidence"))
        + (f" *{_md_code(i['action'])}*" if i.get("action") else "")
        for i in checklist(report)
    ]
    out.append("")
    for key in report:
        if key not in HANDLED:
            value = report[key]
            rows = (
                [{k: as_text(v) for k, v in r.items()} for r in value]
                if isinstance(value, list) and value and all(isinstance(r, dict) for r in value)
                else [{"key": k, "value": as_text(v)} for k, v in value.items()]
                if isinstance(value, dict) and value
                else as_text(value) or NA
            )
            out += [f"## {_md(key.replace('_', ' ').capitalize())}", "", _md_table(rows), ""]
    out += ["## Run", "", _md_table(run_rows(report)), ""]
    return "\n".join(out)
