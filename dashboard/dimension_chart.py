"""The step by dimension as a chart: one stacked bar per dimension, its waiting beside its
transfer (the report's `dimensions`, analysis/steps/dimension.py). A module-level builder, so
that dashboard.figures caches its specification."""

from __future__ import annotations

import altair as alt
import pandas as pd

#: The two parts of a dimension's exposed communication, in words, and their colours.
PARTS = {"exposed_transfer_ms": "transfer", "exposed_wait_ms": "waiting for late ranks"}
COLORS = {"transfer": "#4c78a8", "waiting for late ranks": "#e45756"}


def dimension_frame(run: list[dict]) -> pd.DataFrame:
    """The report's `dimensions.run` rows as a long frame: dimension (its words), part (words),
    ms, share (of the step, %), in the report's order (largest first)."""
    rows = []
    for r in run:
        name = f"{r['label']} ({r['dimension']})" if r["dimension"] != "unknown" else r["label"]
        for key, part in PARTS.items():
            share = r.get("share_of_step")
            rows.append({"dimension": name, "part": part, "ms": r[key],
                         "share": None if share is None else 100 * share})  # fmt: skip
    return pd.DataFrame(rows, columns=["dimension", "part", "ms", "share"])


def dimension_bars(df: pd.DataFrame, title: str) -> alt.Chart:
    """Horizontal bars, one per dimension, stacked transfer then waiting (ms per step)."""
    order = list(PARTS.values())
    return (
        alt.Chart(df, title=title)
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", title="exposed ms per step", stack="zero"),
            y=alt.Y("dimension:N", sort=None, title="dimension"),
            color=alt.Color(
                "part:N",
                sort=order,
                scale=alt.Scale(domain=order, range=[COLORS[p] for p in order]),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            order=alt.Order("part:N", sort="ascending"),
            tooltip=[
                alt.Tooltip("dimension:N", title="dimension"),
                alt.Tooltip("part:N", title="part"),
                alt.Tooltip("ms:Q", title="ms per step", format=".3f"),
                alt.Tooltip("share:Q", title="share of the step (%)", format=".1f"),
            ],
        )
    )
