"""Shared page helpers: plain-text escaping, number formats, and the "what is missing" notice.

Names and strings from traces and logs go through `md()` before they reach any Streamlit
element that renders Markdown; nothing is ever rendered with unsafe_allow_html.
"""

from __future__ import annotations

import re

import streamlit as st

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&\"'])")


def md(text: object) -> str:
    """`text` with every Markdown/HTML/LaTeX/emoji control character backslash-escaped, so
    Streamlit shows it literally (no links, images, markup or directives)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def fmt_ms(v: float | None) -> str:
    """Milliseconds with three decimals, or n/a."""
    return "n/a" if v is None else f"{v:.3f} ms"


def fmt_ratio(v: float | None) -> str:
    """A dimensionless ratio with three decimals, or n/a."""
    return "n/a" if v is None else f"{v:.3f}"


def fmt_pct(v: float | None) -> str:
    """A fraction as a percentage with one decimal, or n/a."""
    return "n/a" if v is None else f"{100 * v:.1f}%"


def missing(what: str, how: str) -> None:
    """Say plainly that `what` is not available for this run and `how` to get it."""
    st.info(f"**{what}** is not available for this run. {how}", icon=":material/info:")


UPLOAD_TRACES = "Upload one Kineto trace (or Nsight Systems SQLite export) per rank."
UPLOAD_NCCL = (
    "Upload the NCCL_DEBUG=INFO logs of the run (set `NCCL_DEBUG=INFO`, optionally "
    "`NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING` and `NCCL_DEBUG_FILE=nccl.%h.%p.log`) "
    "together with its traces."
)
