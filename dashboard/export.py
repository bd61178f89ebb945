"""The post-mortem report of a run as one self-contained HTML page or a Markdown file.

Formatting only: the numbers are the report dict's. Every string from the data is escaped
(HTML: html.escape; Markdown: backslash escapes), so a trace cannot inject markup.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from analysis.checklist import evaluate
from analysis.verdict import verdict

TITLES = {
    "run_info": "Run",
    "summary": "Summary (medians over ranks and steps)",
    "checklist": "Checklist",
    "stragglers": "Stragglers",
    "collectives": "Collectives",
    "model": "Model",
    "nccl": "NCCL",
    "ranks": "Per rank (whole trace)",
    "steps": "Per rank and step",
}
#: Sections shown first, in this order; the others follow in report order.
ORDER = [
    "summary",
    "checklist",
    "stragglers",
    "collectives",
    "model",
    "nccl",
    "run_info",
    "ranks",
    "steps",
]
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:72rem;color:#222}"
    "table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}"
    "td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}"
    ".attention{color:#b00020;font-weight:600}.ok{color:#1b7f3b}.not_observable{color:#777}"
    ".verdict{font-size:1.2rem;padding:.6rem 1rem;background:#f6f6f6;border-left:4px solid #b00020}"
)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e-3 or abs(v) >= 1e6 else f"{v:.3f}"
    if isinstance(v, dict | list):
        return json.dumps(v, default=str)
    return str(v)


def _sections(report: dict) -> list[str]:
    keys = [k for k in ORDER if k in report] + [k for k in report if k not in ORDER and k != "run"]
    return keys


def _rows(value: Any) -> list[dict] | None:
    """`value` as table rows: a list of dicts, or a flat dict as (key, value) rows."""
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return value
    if isinstance(value, dict) and value:
        return [{"key": k, "value": v} for k, v in value.items()]
    return None


def _html_table(rows: list[dict]) -> str:
    cols = list(dict.fromkeys(c for r in rows for c in r))
    left = {c for c in cols if all(not isinstance(r.get(c), int | float) for r in rows)}
    head = "".join(f'<th class="{"l" if c in left else ""}">{html.escape(c)}</th>' for c in cols)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"l" if c in left else ""}">{html.escape(_cell(r.get(c)))}</td>'
            for c in cols
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _checklist(report: dict) -> list[dict]:
    return report.get("checklist") or evaluate(report)


def render_html(report: dict) -> str:
    """The report as one HTML page with inline CSS and no external resources or scripts."""
    esc = html.escape
    run = esc(str(report.get("run")))
    v = verdict(report.get("summary"))
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>commwall — {run}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>commwall post-mortem — {run}</h1>",
    ]
    if v:
        parts.append(f"<p class='verdict'><b>{esc(v['verdict'])}</b>: {esc(v['reason'])}</p>")
    for key in _sections(report):
        title = esc(TITLES.get(key, key.replace("_", " ").capitalize()))
        parts.append(f"<h2 id='{esc(key)}'>{title}</h2>")
        if key == "checklist":
            items = _checklist(report)
            parts.append(
                "<ul>"
                + "".join(
                    f"<li><span class='{esc(i['status'])}'>[{esc(i['status'].replace('_', ' '))}]"
                    f"</span> <b>{esc(i['title'])}</b> — {esc(i['evidence'])}"
                    + (f" <i>{esc(i['action'])}</i>" if i.get("action") else "")
                    + "</li>"
                    for i in items
                )
                + "</ul>"
            )
            continue
        rows = _rows(report[key])
        parts.append(
            _html_table(rows)
            if rows
            else f"<pre>{esc(json.dumps(report[key], indent=2, default=str))}</pre>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def _md(v: Any) -> str:
    return _MD_SPECIAL.sub(r"\\\1", _cell(v)).replace("\n", " ")


def _md_table(rows: list[dict]) -> str:
    cols = list(dict.fromkeys(c for r in rows for c in r))
    lines = ["| " + " | ".join(_md(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_md(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(report: dict) -> str:
    """The report as Markdown (GitHub tables)."""
    out = [f"# commwall post-mortem — {_md(report.get('run'))}", ""]
    v = verdict(report.get("summary"))
    if v:
        out += [f"**{_md(v['verdict'])}**: {_md(v['reason'])}", ""]
    for key in _sections(report):
        out += [f"## {TITLES.get(key, key.replace('_', ' ').capitalize())}", ""]
        if key == "checklist":
            out += [
                f"- **{_md(i['status'].replace('_', ' '))}** — {_md(i['title'])}: "
                + _md(i["evidence"])
                for i in _checklist(report)
            ]
        else:
            rows = _rows(report[key])
            out.append(
                _md_table(rows)
                if rows
                else f"```\n{json.dumps(report[key], indent=2, default=str)}\n```"
            )
        out.append("")
    return "\n".join(out)


def postmortem(con: Any, run: str, fmt: str = "html", baseline: str | None = None) -> str:
    """The post-mortem of run `run` of the store `con` as HTML or Markdown."""
    from analysis.report import build_report  # noqa: PLC0415

    report = build_report(con, run, keep_going=True)
    return render_markdown(report) if fmt == "md" else render_html(report)
