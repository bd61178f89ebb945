"""The chart of a run against its fabric: the bus bandwidth nccl-tests measured by message size
(one line per table) and the training's collectives at their sizes (points), from the report's
`fabric` section."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from commwall.analysis.op_words import OP_WORDS
from commwall.dashboard.charts import LEGEND


def op_label(op: str | None) -> str:
    """An op's name on screen."""
    return OP_WORDS.get(op or "", op or "unknown op")


def fabric_frame(section: dict[str, Any]) -> pd.DataFrame:
    """One row per point to draw: `size` (bytes), `busbw` (GB/s), `series` (its label in the
    legend) and `source` ("nccl-tests" for a table's measured curve, "training" for a class)."""
    rows = [
        {
            "size": p["size_bytes"],
            "busbw": p["busbw_GBps"],
            "series": f"nccl-tests {op_label(t['op'])} ({t['n_ranks']} ranks)",
            "source": "nccl-tests",
        }
        for t in section.get("tables") or []
        for p in t.get("curve") or []
        if p["size_bytes"] > 0 and p["busbw_GBps"] and p["busbw_GBps"] > 0
    ]
    rows += [
        {
            "size": c["size_bytes"],
            "busbw": c["busbw_GBps"],
            "series": f"training {op_label(c['op'])} ({c['n_ranks']} ranks)",
            "source": "training",
        }
        for c in section.get("classes") or []
        if c.get("busbw_GBps")
    ]
    return pd.DataFrame(rows, columns=["size", "busbw", "series", "source"])


def fabric_chart(df: pd.DataFrame, title: str) -> alt.LayerChart:
    """Bus bandwidth against message size (log scale): nccl-tests' curves as lines, the
    training's collectives as large points, coloured by series."""
    x = alt.X("size:Q", scale=alt.Scale(type="log", base=2), title="message size (bytes)")
    y = alt.Y("busbw:Q", title="bus bandwidth (GB/s)")
    color = alt.Color("series:N", title=None, legend=alt.Legend(**LEGEND))
    tips = [
        alt.Tooltip("series:N", title="series"),
        alt.Tooltip("size:Q", title="message size (bytes)", format=","),
        alt.Tooltip("busbw:Q", title="bus bandwidth (GB/s)", format=".3g"),
    ]
    base = alt.Chart(df, title=title).encode(x=x, y=y, color=color, tooltip=tips)
    lines = base.transform_filter(alt.datum.source == "nccl-tests").mark_line(point=True)
    points = base.transform_filter(alt.datum.source == "training").mark_point(
        size=120, filled=True, shape="diamond"
    )
    return alt.layer(lines, points).properties(height=320)
