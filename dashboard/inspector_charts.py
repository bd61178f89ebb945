"""Charts of the NCCL Inspector page (module-level builders, drawn through dashboard.figures):
bus bandwidth over the run with its change points, and who was last, ranks × time."""

from __future__ import annotations

import altair as alt
import pandas as pd

from commwall.dashboard.charts import LEGEND, row_step


def bandwidth_over_time(lines: pd.DataFrame, changes: pd.DataFrame) -> alt.LayerChart:
    """Per series (`series`: its label) the bus bandwidth of each minute (`time`, `busbw`), and
    a rule at each change point (`time`, `change`: its sentence)."""
    line = (
        alt.Chart(lines)
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("time:T", title="time (UTC)", axis=alt.Axis(format="%H:%M")),
            y=alt.Y("busbw:Q", title="bus bandwidth (GB/s)"),
            color=alt.Color("series:N", title=None, legend=alt.Legend(**LEGEND)),
            tooltip=[
                alt.Tooltip("series:N", title="series"),
                alt.Tooltip("time:T", title="minute (UTC)", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("busbw:Q", title="bus bandwidth (GB/s)", format=".1f"),
                alt.Tooltip("instances:Q", title="instances"),
            ],
        )
    )
    rule = (
        alt.Chart(changes)
        .mark_rule(color="#e45756", strokeDash=[6, 4], size=2)
        .encode(x="time:T", tooltip=[alt.Tooltip("change:N", title="change point")])
    )
    return alt.layer(line, rule).properties(height=320)


def last_heatmap(grid: pd.DataFrame) -> alt.Chart:
    """Ranks (`who`, rows, in `order`) × time buckets (`time`): the share of the bucket's
    instances the rank was last in (`share`, 0-1)."""
    return (
        alt.Chart(grid, title="share of the instances the rank was last in")
        .mark_rect()
        .encode(
            x=alt.X("time:T", title="time (UTC)", axis=alt.Axis(format="%H:%M")),
            y=alt.Y("who:N", title="rank", sort=alt.EncodingSortField("order")),
            color=alt.Color(
                "share:Q",
                title=None,
                scale=alt.Scale(domain=[0, 1], scheme="orangered"),
                legend=alt.Legend(format="%", gradientLength=120, **LEGEND),
            ),
            tooltip=[
                alt.Tooltip("who:N", title="rank"),
                alt.Tooltip("time:T", title="from (UTC)", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("last:Q", title="last in"),
                alt.Tooltip("instances:Q", title="instances"),
                alt.Tooltip("share:Q", title="share", format=".0%"),
            ],
        )
        .properties(height=row_step(grid["who"]))
    )
