"""Shared page helpers: plain-text escaping, number formats, and the "what is missing" notice.

Names and strings from traces and logs go through `md()` before they reach any Streamlit
element that renders Markdown; nothing is ever rendered with unsafe_allow_html.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from commwall.analysis.safe_text import visible, visible_column
from commwall.analysis.units import ms_text
from commwall.dashboard import figures

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&\"'])")


def md(text: object) -> str:
    """`text` with every Markdown/HTML/LaTeX/emoji control character backslash-escaped, so
    Streamlit shows it literally (no links, images, markup or directives)."""
    return _MD_SPECIAL.sub(r"\\\1", visible(str(text))).replace("\n", " ")


def md_code(text: object) -> str:
    """`text` escaped like `md()`, except that `code spans` stay code spans (shown as code, never
    as literal backticks; nothing inside a code span is markup)."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans
        return md(text)
    return "".join(f"`{p}`" if i % 2 else md(p) for i, p in enumerate(parts))


def fmt_ms(v: float | None) -> str:
    """Milliseconds to three significant figures, or n/a."""
    return ms_text(v)


def fmt_ratio(v: float | None) -> str:
    """A dimensionless ratio to three significant figures, or n/a."""
    return "n/a" if v is None else f"{v:#.3g}".rstrip(".")


def fmt_pct(v: float | None) -> str:
    """A fraction as a percentage to three significant figures (at most one decimal), or
    n/a."""
    if v is None:
        return "n/a"
    return f"{100 * v:.1f}%" if abs(v) < 1 else f"{100 * v:.0f}%"


def plot(
    df: pd.DataFrame | None,
    build: figures.Builder,
    args: tuple,
    empty: str,
    key: str | None = None,
    where: Any = st,
    shape_only: bool = False,
) -> None:
    """`build(df, *args)` (a module-level chart builder, its spec cached: dashboard.figures,
    `shape_only` as there) drawn across its column in `where` (st, a column, a container), or
    the sentence `empty` instead of a chart with nothing in it."""
    if df is None or df.empty:
        where.caption(empty)
    else:
        figures.chart(where, build, df, *args, key=key, shape_only=shape_only)


def _as_text(v: object) -> str:
    """A cell of a mixed column as text: numbers to six significant digits."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return f"{v:.6g}"
    return str(v)


def findings(text: str, sep: str = "; ") -> list[str]:
    """`text` cut at every `sep` outside parentheses: the findings of a verdict, whose
    parenthesised evidence ("(87% of all of it; t = 2741.6)") stays with its finding."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        depth += (c == "(") - (c == ")")
        if depth == 0 and text.startswith(sep, i):
            out.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    out.append(text[start:])
    return [f for f in out if f]


def table(df: pd.DataFrame, key: str | None = None, where: Any = st) -> None:
    """`df` as a table without the columns that hold nothing, and with "—" where a value is
    missing (not "None")."""
    df = df.dropna(axis=1, how="all")
    text = df.select_dtypes(include=["object", "string"]).columns
    df = df.fillna(dict.fromkeys(text, "—"))
    for col in df.select_dtypes(include=["float"]).columns:  # 3 significant figures
        df[col] = df[col].map(lambda x: float(f"{x:.3g}") if pd.notna(x) else x)
    for col in text:  # a column mixing text and numbers is shown as text (Arrow needs one type)
        if df[col].map(lambda v: isinstance(v, str)).nunique() > 1:
            df[col] = df[col].map(_as_text)
        df[col] = visible_column(df[col])
    labels = {c: st.column_config.Column(column_label(str(c))) for c in df.columns}
    where.dataframe(df, hide_index=True, key=key, column_config=labels)


#: The formats of a run's files in words (ingest's format names), singular and plural.
FILE_KINDS = {
    "kineto": ("Kineto trace", "Kineto traces"),
    "nsys": ("Nsight Systems export", "Nsight Systems exports"),
    "nccl_log": ("NCCL log", "NCCL logs"),
    "flight_recorder": ("Flight Recorder dump", "Flight Recorder dumps"),
    "inspector": ("NCCL Inspector log", "NCCL Inspector logs"),
}


def files_text(files: Mapping[str, int]) -> str:
    """'8 Kineto traces, 1 NCCL log' for a run's file counts by format."""
    out = []
    for kind, n in files.items():
        one, many = FILE_KINDS.get(kind, (kind.replace("_", " "), kind.replace("_", " ")))
        out.append(f"{n} {one if n == 1 else many}")
    return ", ".join(out)


#: Column headers in words where the rule of `column_label` would not say it well.
COLUMN_LABELS = {
    "n_last": "last at (collectives)",
    "n_instances": "collectives",
    "n_steps": "steps",
    "n_ranks": "ranks",
    "excess_ms": "later than the median rank (ms)",
    "compute_ratio": "operator time vs the median rank (×)",
    "late_fraction": "share of collectives joined last",
    "start_delay_ms": "starts its steps late by (ms)",
    "delay_ms": "arrives late by (ms)",
    "wait_caused_ms": "wait caused on peers (ms)",
    "tau_comp_ms": "τ_comp (ms)",
    "tau_comm_ms": "τ_comm (ms)",
    "eta": "η",
    "gamma": "γ",
    "busbw_GBps": "bus bandwidth (GB/s)",
    "algbw_GBps": "algorithm bandwidth (GB/s)",
    "top_rank": "rank causing the most waiting",
}


def column_label(name: str) -> str:
    """A column's header in words: COLUMN_LABELS, else its name with the unit of a `_ms`,
    `_GBps`, `_bytes` or `_pct` suffix in brackets and underscores as spaces (`wait_ms` →
    "wait (ms)")."""
    if name in COLUMN_LABELS:
        return COLUMN_LABELS[name]
    stat = ""
    for s in STATS:  # 'busbw_GBps_median' → 'bus bandwidth, median (GB/s)'
        if name.endswith(f"_{s}"):
            name, stat = name[: -len(s) - 1], f", {s}"
            break
    for suffix, unit in (("_ms", "ms"), ("_GBps", "GB/s"), ("_bytes", "bytes"), ("_pct", "%")):
        if name.endswith(suffix):
            return f"{_words(name[: -len(suffix)])}{stat} ({unit})"
    return _words(name) + stat


#: Statistics a column's name may end with.
STATS = ("median", "mean", "p90", "p10", "max", "min", "total")
#: Abbreviations in column names, in words.
WORDS = {"busbw": "bus bandwidth", "algbw": "algorithm bandwidth", "ms": "ms"}


def _words(name: str) -> str:
    return " ".join(WORDS.get(w, w) for w in name.split("_"))


def prose(df: pd.DataFrame, text: str, where: Any = st) -> None:
    """One paragraph per row of `df`: its `run` in bold, its other columns as `name: value`,
    then its `text` column whole (a table cell would cut a paragraph to one line)."""
    for row in df.to_dict("records"):
        facts = [
            f"{k}: {_as_text(v)}"
            for k, v in row.items()
            if k not in ("run", text) and v is not None and not pd.isna(v)
        ]
        head = f"**{md(row.get('run', ''))}**" + (f" ({md('; '.join(facts))})" if facts else "")
        where.markdown(f"{head}: {md(row.get(text) or '—')}")


#: How the Overview titles each topic of the diagnosis (analysis.report.diagnosis `points`).
POINT_TITLES = {
    "hang": "Hang",
    "what": "What dominates",
    "bandwidth": "Bandwidth",
    "who": "Who is late",
    "whatif": "What-if replay",
    "fix": "Largest fix",
    "model": "Model",
}


def diagnosis_points(diagnosis: Mapping[str, Any]) -> str:
    """The diagnosis as a Markdown list, one item per topic (its sentences joined in order);
    the plain paragraph when the report has no `points`."""
    points = diagnosis.get("points")
    if not points:
        return md(diagnosis.get("paragraph") or "")
    items: list[tuple[str, list[str]]] = []
    for p in points:
        if items and items[-1][0] == p["topic"]:
            items[-1][1].append(p["text"])
        else:
            items.append((p["topic"], [p["text"]]))
    return "\n".join(
        f"- **{POINT_TITLES.get(topic, topic.capitalize())}.** {md(' '.join(texts))}"
        for topic, texts in items
    )


def missing(what: str, how: str) -> None:
    """Say plainly that `what` is not available for this run and `how` to get it."""
    st.info(f"**{what}** is not available for this run. {how}", icon=":material/info:")


UPLOAD_TRACES = "Upload one Kineto trace (or Nsight Systems SQLite export) per rank."
UPLOAD_NCCL = (
    "Upload the NCCL_DEBUG=INFO logs of the run (set `NCCL_DEBUG=INFO`, optionally "
    "`NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING` and `NCCL_DEBUG_FILE=nccl.%h.%p.log`) "
    "together with its traces."
)


def _run_info(report: Mapping[str, Any]) -> dict:
    return report.get("run_info") or {}


def matched_instances(report: Mapping[str, Any]) -> int:
    """How many collective instances the run's collectives section matched across ranks."""
    section = report.get("collectives")
    matching = section.get("matching") if isinstance(section, dict) else None
    return int((matching or {}).get("instances") or 0)


def traces_hint(report: Mapping[str, Any]) -> str:
    """What to upload (or what the uploaded traces lack) for analyses of collectives matched
    across ranks, worded from what this run already holds."""
    info = _run_info(report)
    files = info.get("files") or {}
    n = info.get("n_ranks") or 0
    if not (files.get("kineto") or files.get("nsys")):
        return UPLOAD_TRACES
    if n < 2:
        return (
            "The run holds the trace of one rank only; collectives are matched across ranks, "
            "so upload the other ranks' traces too."
        )
    return (
        f"The traces of the run's {n} ranks hold no collective found on two or more ranks "
        "(matched by sequence number, else by order per process group): every rank must be "
        "traced over the same steps with its communication recorded."
    )


def steps_hint(report: Mapping[str, Any]) -> str:
    """Why per-step views are empty: the traces carry no `ProfilerStep#N` annotations."""
    files = _run_info(report).get("files") or {}
    if not (files.get("kineto") or files.get("nsys")):
        return UPLOAD_TRACES
    return (
        "The traces carry no ProfilerStep#N annotations (profile with "
        "torch.profiler.schedule and call prof.step() every iteration, or mark steps with an "
        "NVTX range of that name for Nsight Systems)."
    )


def nccl_hint(report: Mapping[str, Any]) -> str:
    """What to upload for NCCL findings; for a run that does not use NCCL, that they do not
    apply."""
    backends = [b for b in _run_info(report).get("backends") or [] if b]
    if backends and "nccl" not in backends:
        return (
            f"This run communicates through {', '.join(map(md, backends))}, not NCCL: NCCL "
            "logs do not apply to it."
        )
    return UPLOAD_NCCL
