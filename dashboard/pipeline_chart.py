"""A pipeline's step as a chart: one row per stage, in stage order, with its compute, sends,
receives and waiting for a neighbour (the bubble) as bars along time (the rows of
analysis.report.pipeline.pipeline_timeline). A module-level builder, so that dashboard.figures
caches its specification."""

from __future__ import annotations

import altair as alt
import pandas as pd

#: The parts of a stage's time in words, in drawing order, and their colours.
PARTS = {
    "compute": "compute",
    "send": "sending",
    "receive": "receiving",
    "waiting": "waiting for a neighbour (bubble)",
}
COLORS = {
    "compute": "#54a24b",
    "sending": "#4c78a8",
    "receiving": "#72b7b2",
    "waiting for a neighbour (bubble)": "#e45756",
}


def stage_label(stage: int, rank: int) -> str:
    """A stage's row: its number and its rank."""
    return f"stage {stage} · rank {rank}"


def pipeline_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """pipeline_timeline's rows for the chart: stage (its words, stage_label), part (words),
    peer ("rank r", or "" for compute), start_ms, end_ms, ms (the bar's length)."""
    peer = rows["peer"].map(lambda p: "" if p is None or pd.isna(p) else f"rank {int(p)}")
    return pd.DataFrame(
        {
            "stage": [stage_label(s, r) for s, r in zip(rows["stage"], rows["rank"], strict=True)],
            "part": rows["part"].map(PARTS),
            "peer": peer,
            "start_ms": rows["start_ms"],
            "end_ms": rows["end_ms"],
            "ms": rows["end_ms"] - rows["start_ms"],
        }
    )


def pipeline_bars(df: pd.DataFrame, stages: list[str], title: str, x_title: str) -> alt.Chart:
    """Bars along time (start_ms to end_ms), one row per stage in the order of `stages`,
    coloured by part, the legend below in words."""
    order = list(PARTS.values())
    return (
        alt.Chart(df, title=title)
        .mark_bar(height={"band": 0.7})
        .encode(
            x=alt.X("start_ms:Q", title=x_title),
            x2=alt.X2("end_ms"),
            y=alt.Y("stage:N", sort=stages, title=None, axis=alt.Axis(labelLimit=0)),
            color=alt.Color(
                "part:N",
                sort=order,
                scale=alt.Scale(domain=order, range=[COLORS[p] for p in order]),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=[
                alt.Tooltip("stage:N", title="stage"),
                alt.Tooltip("part:N", title="what"),
                alt.Tooltip("peer:N", title="with"),
                alt.Tooltip("start_ms:Q", title="from (ms)", format=".3f"),
                alt.Tooltip("ms:Q", title="for (ms)", format=".3f"),
            ],
        )
        .properties(height=max(120, 40 * len(stages)))
    )
