"""Plain-text rendering of the report dict (formatting only; the numbers come from analysis)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pandas as pd

Table = Callable[[pd.DataFrame], str]


def _summary(s: dict, table: Table) -> str:
    if "step_ms" not in s:
        return "no timeline activity"
    share = s.get("exposed_comm_share")
    lines = [
        f"scope: {s['scope']} (medians over ranks and steps)",
        f"step {s['step_ms']:.3f} ms | τ_comp {s['tau_comp_ms']:.3f} ms | "
        f"τ_comm {s['tau_comm_ms']:.3f} ms | overlap {s['overlap_ms']:.3f} ms",
        f"η {_f(s['eta'])} | γ {_f(s['gamma'])} | exposed comm {s['exposed_comm_ms']:.3f} ms"
        f" | idle {s['idle_ms']:.3f} ms"
        + (f" | exposed comm is {100 * share:.1f}% of step time" if share is not None else ""),
    ]
    return "\n".join(lines)


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _records(rows: list[dict], table: Table) -> str:
    return table(pd.DataFrame(rows))


def _generic(value: Any, table: Table) -> str:
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return _records(value, table)
    return json.dumps(value, indent=2, default=str)


#: Renderers per report key; keys without one are printed generically.
RENDERERS: dict[str, Callable[[Any, Table], str]] = {
    "summary": _summary,
    "ranks": _records,
    "steps": _records,
}

TITLES = {
    "run_info": "Run",
    "summary": "Summary",
    "ranks": "Per rank (whole trace)",
    "steps": "Per rank and step",
}


def render_text(report: dict, table: Table) -> str:
    """The report as sections of text."""
    out = [f"commwall report — run {report['run']}"]
    for key, value in report.items():
        if key == "run":
            continue
        title = TITLES.get(key, key.replace("_", " ").capitalize())
        body = RENDERERS.get(key, _generic)(value, table)
        out.append(f"\n== {title}\n{body}")
    return "\n".join(out)
