"""Plain-text rendering of the `hang` report section (formatting only; analysis/hangs/section.py
finds
everything)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from commwall.dashboard.nccl_text import ranges

Table = Callable[[pd.DataFrame], str]

_GROUP_COLS = ("pg_name", "pg_desc", "members", "missing_dumps", "last_common_seq",
               "last_completed_seq", "max_seq")  # fmt: skip
_FINDING_COLS = ("pg_name", "seq", "kind", "op_name", "culprit_ranks", "other_ranks",
                 "expected", "culprit_values")  # fmt: skip
_TIMELINE_COLS = ("pg_name", "rank", "seq", "op_name", "state", "in_nelems", "trace_ms",
                  "trace_dur_ms", "join_key")  # fmt: skip


def _cell(v: object) -> object:
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return ranges(v)
    if isinstance(v, list):
        return " / ".join(str(x) for x in v)
    return v


def _frame(rows: list[dict], cols: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame([{c: _cell(r.get(c)) for c in cols} for r in rows], columns=list(cols))


def timeline_rows(section: dict) -> list[dict]:
    """The timeline with trace start (ms after the first matched start) and duration (ms)."""
    rows = section.get("timeline") or []
    starts = [r["trace_ts"] for r in rows if r.get("trace_ts") is not None]
    t0 = min(starts) if starts else 0
    return [
        {
            **r,
            "trace_ms": None if r.get("trace_ts") is None else (r["trace_ts"] - t0) / 1e6,
            "trace_dur_ms": None if r.get("trace_dur") is None else r["trace_dur"] / 1e6,
        }
        for r in rows
    ]


def listed(values: object) -> str:
    """A list of names as text; a value that is no text reads `unknown`."""
    if not isinstance(values, list) or not values:
        return "unknown"
    return ", ".join(v if isinstance(v, str) else "unknown" for v in values)


def render_hang(section: dict, table: Table) -> str:
    """The section as text: the verdict, then groups, findings and the last collectives."""
    if not section.get("present"):
        return f"not available: {section.get('reason')}"
    out = [
        section["verdict"],
        f"\n{section['n_dumps']} dump(s), {listed(section.get('forms'))}, "
        f"format {listed(section.get('versions'))}",
        "\nProcess groups",
        table(_frame(section["groups"], _GROUP_COLS)),
        "\nFindings (earliest first)",
        table(_frame(section["findings"], _FINDING_COLS)),
        "\nLast collectives per rank (trace_ms: Kineto start after the first, when joined)",
        table(_frame(timeline_rows(section), _TIMELINE_COLS)),
    ]
    return "\n".join(out)
