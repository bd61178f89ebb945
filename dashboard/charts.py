"""Altair chart builders: drawing only (every value plotted arrives computed)."""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pandas as pd

KIND_COLORS = alt.Scale(
    domain=["compute", "comm", "memory"], range=["#4c78a8", "#e45756", "#b5b5b5"]
)
#: Every colour legend: below its chart, labels never cut short (Vega's default cuts at 160 px).
LEGEND: dict[str, Any] = {"orient": "bottom", "labelLimit": 0, "titleLimit": 0, "columns": 4}
FLAG_COLORS = alt.Scale(domain=[False, True], range=["#9ecae9", "#e45756"])
#: One colour per part of the step on every chart (Overview, Compare, Timeline, the post-mortem
#: and the docs): compute blues (as the Timeline's compute), communication red (transfer) and
#: orange (waiting, as the Timeline's wait lane), memory grey, idle light grey.
PART_COLOR = {
    "compute_only_ms": "#4c78a8",
    "compute_overlapped_ms": "#72b7b2",
    "exposed_transfer_ms": "#e45756",
    "exposed_wait_ms": "#f58518",
    "exposed_comm_ms": "#e45756",
    "memory_only_ms": "#b5b5b5",
    "idle_ms": "#dddddd",
}
#: Collectives on the Timeline: colours apart from compute's blue and communication's red.
OP_COLORS = ["#7570b3", "#1b9e77", "#e7298a", "#66a61e", "#a6761d", "#666666"]
#: The fewest values a histogram is drawn from: below it the bins are single points.
HISTOGRAM_MIN_POINTS = 50
#: Charts fill their column (Streamlit's width="stretch"); heights are set here.
ROW_PX = (8, 20)  # height per rank of a heatmap row: least, most


def tips(df: pd.DataFrame, columns: list[str] | None = None) -> list[alt.Tooltip]:
    """Tooltips for `columns` (default: all) with their types given, numbers to 4 significant
    digits: Altair would otherwise infer each column's type from the data on every draw."""
    out = []
    for c in columns if columns is not None else list(df.columns):
        if pd.api.types.is_bool_dtype(df[c]):
            out.append(alt.Tooltip(f"{c}:N"))
        elif pd.api.types.is_numeric_dtype(df[c]):
            out.append(alt.Tooltip(f"{c}:Q", format=".4~g"))
        else:
            out.append(alt.Tooltip(f"{c}:N"))
    return out


def row_step(rows: pd.Series) -> alt.Step:
    """Height per category of `rows`: 20 px, less for many (the chart stays under ~640 px),
    never under 8 px."""
    return alt.Step(max(ROW_PX[0], min(ROW_PX[1], 640 // max(1, rows.nunique()))))


#: A heatmap draws at most this many rows of ranks (640 px at the least row height); a run
#: with more is drawn in blocks of consecutive ranks (rank_blocks): 1,024 rows squeezed into a
#: chart show nothing one can read and cost the browser about a second to draw.
MAX_HEATMAP_ROWS = 640 // ROW_PX[0]


def rank_block_size(n_ranks: int, max_rows: int = MAX_HEATMAP_ROWS) -> int:
    """How many consecutive ranks one heatmap row holds: 1 up to `max_rows` ranks, else the
    least power of two that fits them in `max_rows` rows (whole hosts of 8 from 8 up)."""
    size = 1
    while -(-n_ranks // size) > max_rows:
        size *= 2
    return size


def rank_blocks(
    df: pd.DataFrame, value: str, worst: str, outlier: str | None = None,
    max_rows: int = MAX_HEATMAP_ROWS,
) -> pd.DataFrame:  # fmt: skip
    """`df` (rank, step, `value`, `outlier`) as it is when it has at most `max_rows` ranks;
    otherwise one row per (block of consecutive ranks, step): rank becomes the block's label
    ("8–15"), `value` its worst rank's (`worst`: "min" or "max"), worst_rank that rank, and
    `outlier` true when any rank of the block is an outlier in that step. Blocks of
    rank_block_size ranks, in rank order (the last may hold fewer)."""
    ranks = pd.Series(df["rank"].unique()).sort_values().to_numpy()
    size = rank_block_size(len(ranks), max_rows)
    if size == 1:
        return df
    block = ranks.searchsorted(df["rank"].to_numpy()) // size
    first = ranks[block * size]
    last = ranks[pd.Series(block * size + size - 1).clip(upper=len(ranks) - 1).to_numpy()]
    label = [f"{a}" if a == b else f"{a}–{b}" for a, b in zip(first, last, strict=True)]
    d = df.assign(_block=block, _label=label)
    g = d.groupby(["_block", "step"], sort=True)
    pick = g[value].idxmin() if worst == "min" else g[value].idxmax()
    out = d.loc[pick.to_numpy()].rename(columns={"rank": "worst_rank"})
    if outlier is not None:
        out[outlier] = g[outlier].any().to_numpy()
    out = out.assign(rank=out["_label"]).drop(columns=["_block", "_label"])
    return out.reset_index(drop=True)


def heatmap(df: pd.DataFrame, value: str, title: str, outlier: str | None = None) -> alt.Chart:
    """Ranks (rows) × steps (columns) coloured by `value`; cells where `outlier` is true get a
    black border. `title` says what is coloured and in which unit. Rows of blocks of ranks
    (rank_blocks: a worst_rank column) keep their order and name each cell's worst rank."""
    blocks = "worst_rank" in df.columns
    tooltip: list[Any] = ["rank:O", "step:O"]
    tooltip += ["worst_rank:O"] if blocks else []
    base = alt.Chart(df, title=title).encode(
        x=alt.X("step:O", title="step", axis=alt.Axis(labelAngle=0, labelOverlap=True)),
        y=alt.Y(
            "rank:O",
            title="ranks (block: its worst rank)" if blocks else "rank",
            sort=None if blocks else "ascending",
            axis=alt.Axis(labelOverlap=True),
        ),
        tooltip=[*tooltip, alt.Tooltip(f"{value}:Q", title=title, format=".3f")],
    )
    legend = alt.Legend(title=None, gradientLength=120, **LEGEND)
    cells = base.mark_rect().encode(color=alt.Color(f"{value}:Q", legend=legend))
    height = row_step(df["rank"])
    if outlier is None:
        return cells.properties(height=height)
    marks = base.transform_filter(alt.datum[outlier]).mark_rect(
        fill=None, stroke="black", strokeWidth=2
    )
    return (cells + marks).properties(height=height)


def histogram(df: pd.DataFrame, value: str, title: str, x_title: str) -> alt.Chart:
    """Distribution of `value` over rows (rank-steps); `x_title` names it with its unit."""
    return (
        alt.Chart(df, title=title)
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", bin=alt.Bin(maxbins=30), title=x_title),
            y=alt.Y("count()", title="rank-steps", axis=alt.Axis(tickMinStep=1, format="d")),
        )
        .properties(height=160)
    )


#: Busy intervals of a lane closer than this share of the timeline's span are drawn as one
#: bar: on a chart about 1,000 px wide that is a pixel, a gap nobody can see (a step of
#: thousands of microsecond kernels is otherwise thousands of sliver bars to send and draw).
JOIN_SHARE = 1 / 1000


def join_gap(tracks: pd.DataFrame) -> float:
    """The gap (ms) under which `timeline` draws two bars of a row as one: JOIN_SHARE of the
    span of `tracks`."""
    return (
        float(tracks["end_ms"].max() - tracks["start_ms"].min()) * JOIN_SHARE
        if len(tracks)
        else 0.0
    )


def joined(tracks: pd.DataFrame, gap_ms: float) -> pd.DataFrame:
    """`tracks` (rank, kind, start_ms, end_ms, …) with the intervals of each lane (rank, kind)
    that are less than `gap_ms` apart drawn as one bar: its start and end, `n_activities`
    summed, `top_name`/`top_ms` of its longest part, any other column as on its first part.
    Drawing only: the resolution a screen shows; every total on the page comes from the
    intervals as measured."""
    lane = ["rank", "kind"]
    t = tracks.sort_values([*lane, "start_ms"], kind="stable").reset_index(drop=True)
    reach = t.groupby(lane, sort=False)["end_ms"].cummax()
    before = reach.groupby([t["rank"], t["kind"]], sort=False).shift()
    bar = (before.isna() | (t["start_ms"] - before > gap_ms)).cumsum()
    parts = t.groupby(bar)
    out = t.loc[parts["start_ms"].idxmin()].reset_index(drop=True)  # sorted: the first part
    out["end_ms"] = reach.groupby(bar).max().to_numpy()
    if "n_activities" in t.columns:
        out["n_activities"] = parts["n_activities"].sum().to_numpy()
    if "top_ms" in t.columns:
        longest = t.loc[t["top_ms"].fillna(-1.0).groupby(bar).idxmax()]
        for c in ("top_name", "top_ms"):
            if c in t.columns:
                out[c] = longest[c].to_numpy()
    return out


def timeline(
    tracks: pd.DataFrame, colls: pd.DataFrame, lanes: list[str], title: str, x_title: str
) -> alt.LayerChart:
    """One lane per rank and kind of busy intervals (those closer than JOIN_SHARE of the span
    joined) plus a lane of collective calls per rank (lanes drawn in the order of `lanes`),
    and a line joining the start of the same collective instance on every rank (its arrival
    skew)."""
    tracks = joined(tracks, join_gap(tracks))
    y = alt.Y(
        "lane:N",
        title=None,
        sort=lanes,
        axis=alt.Axis(labelOverlap=False, labelLimit=0, labelFontSize=12),
    )
    height = max(160, 26 * len(lanes))
    top = [c for c in ("top_name", "top_ms") if c in tracks.columns]
    busy = (
        alt.Chart(tracks, title=title)
        .mark_bar(height={"band": 0.8})
        .encode(
            x=alt.X("start_ms:Q", title=x_title),
            x2=alt.X2("end_ms"),
            y=y,
            color=alt.Color("kind:N", scale=KIND_COLORS, title="activity", legend=LEGEND),
            tooltip=tips(tracks, ["rank", "kind", *top, "start_ms", "end_ms"]),
        )
    )
    calls = (
        alt.Chart(colls)
        .mark_bar(height={"band": 0.8}, opacity=0.85)
        .encode(
            x=alt.X("start_ms:Q"),
            x2=alt.X2("end_ms"),
            y=y,
            color=alt.Color(
                "op:N", title="collective", legend=LEGEND, scale=alt.Scale(range=OP_COLORS)
            ),
            tooltip=tips(
                colls, ["rank", "pg_name", "op", "instance", "bytes", "wait_ms", "start_ms"]
            ),
        )
    )
    links = (
        alt.Chart(colls)
        .mark_line(color="black", strokeWidth=0.8, opacity=0.7)
        .encode(x=alt.X("start_ms:Q"), y=y, detail=alt.Detail("ik:N"))
    )
    return (busy + calls + links).resolve_scale(color="independent").properties(height=height)


def scatter_loglog(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str,
    title: str,
    x_title: str,
    y_title: str,
    rule: tuple[float, str] | None = None,
) -> alt.Chart | alt.LayerChart:
    """A log-log scatter, coloured by `color` (legend below, labels uncut); with `rule`
    (y, label) a labelled dashed horizontal rule at that y."""
    chart = (
        alt.Chart(df, title=title)
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X(f"{x}:Q", scale=alt.Scale(type="log"), title=x_title),
            y=alt.Y(f"{y}:Q", scale=alt.Scale(type="log"), title=y_title),
            color=alt.Color(f"{color}:N", legend=alt.Legend(**LEGEND)),
            tooltip=tips(df),
        )
        .properties(height=300)
    )
    return with_rule(chart, *rule) if rule else chart


def bandwidth_curves(df: pd.DataFrame, title: str) -> alt.Chart:
    """Bus bandwidth (`busbw_gbs`) against message size (`bytes`, log scale), one line per
    `table`, as nccl-tests measures a fabric; the legend below names the tables."""
    return (
        alt.Chart(df, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("bytes:Q", scale=alt.Scale(type="log", base=2), title="message size (bytes)"),
            y=alt.Y("busbw_gbs:Q", title="bus bandwidth (GB/s)"),
            color=alt.Color("table:N", legend=alt.Legend(**LEGEND)),
            tooltip=tips(df),
        )
        .properties(height=300)
    )


def hang_entries(df: pd.DataFrame, hang_seq: int | None) -> alt.LayerChart | alt.FacetChart:
    """The last collectives of each rank: seq (x) × rank (y), coloured by op; a rule at the
    seq where the hang or mismatch is."""
    points = (
        alt.Chart(df, title="Each rank's last collectives (red: where the cause is)")
        .mark_square(size=140)
        .encode(
            x=alt.X("seq:O", title="collective seq id", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("label:N", title=None, sort=None),
            color=alt.Color("op_name:N", title="op", legend=alt.Legend(**LEGEND)),
            tooltip=["pg_name", "rank", "seq", "op_name", "state", "in_nelems"],
        )
        .properties(height=row_step(df["label"]))
    )
    if hang_seq is None:
        return alt.layer(points)
    rule = alt.Chart(pd.DataFrame({"seq": [hang_seq]})).mark_rule(color="#e45756", size=3)
    return alt.layer(rule.encode(x="seq:O"), points)


def with_rule(chart: alt.Chart, y: float, label: str) -> alt.LayerChart:
    """`chart` with a dashed horizontal rule at `y`, labelled."""
    rule = pd.DataFrame({"y": [y], "label": [label]})
    line = alt.Chart(rule).mark_rule(strokeDash=[6, 4], color="black").encode(y="y:Q")
    text = alt.Chart(rule).mark_text(align="left", dx=4, dy=-6).encode(y="y:Q", text="label:N")
    return chart + line + text


def bars(
    df: pd.DataFrame, x: str, y: str, title: str, x_title: str, highlight: str | None = None
) -> alt.Chart:
    """Horizontal bars of `x` per category `y` (kept in the frame's order); rows where
    `highlight` is true in red (the meaning is said in the title or caption, not a legend)."""
    enc = {
        "x": alt.X(f"{x}:Q", title=x_title),
        "y": alt.Y(f"{y}:N", sort=None, title=y, axis=alt.Axis(labelOverlap=True)),
        "tooltip": tips(df),
    }
    if highlight:
        enc["color"] = alt.Color(f"{highlight}:N", scale=FLAG_COLORS, legend=None)
    return alt.Chart(df, title=title).mark_bar().encode(**enc).properties(height=row_step(df[y]))


def ring(order: list, title: str) -> alt.LayerChart:
    """A ring drawn as a closed polygon through ranks placed on a circle in ring order."""
    n = len(order)
    pts = pd.DataFrame(
        {
            "rank": [str(r) for r in order] + [str(order[0])],
            "i": list(range(n + 1)),
            "x": [math.cos(2 * math.pi * i / n) for i in range(n + 1)],
            "y": [math.sin(2 * math.pi * i / n) for i in range(n + 1)],
        }
    )
    axis: dict[str, Any] = {"axis": None, "scale": alt.Scale(domain=[-1.3, 1.3])}
    base = alt.Chart(pts, title=title).encode(x=alt.X("x:Q", **axis), y=alt.Y("y:Q", **axis))
    path = base.mark_line(point=False, color="#4c78a8").encode(order="i:Q")
    nodes = base.mark_circle(size=500, color="#f2f2f2", stroke="#4c78a8").transform_filter(
        alt.datum.i < n
    )
    labels = base.mark_text().encode(text="rank:N").transform_filter(alt.datum.i < n)
    return (path + nodes + labels).properties(height=220)


def _tree_positions(edges: pd.DataFrame) -> dict[int, float]:
    """x of every rank: leaves left to right in depth-first order, parents centred above."""
    children: dict[int, list[int]] = {}
    for r, p in zip(edges["rank"], edges["parent"], strict=True):
        children.setdefault(int(p), []).append(int(r))
    x: dict[int, float] = {}
    leaves = iter(range(len(edges)))

    def place(r: int) -> float:
        kids = [k for k in sorted(children.get(r, [])) if k not in x]
        x[r] = float(next(leaves)) if not kids else 0.0  # marks r as placed (cycles)
        if kids:
            xs = [place(k) for k in kids]
            x[r] = sum(xs) / len(xs)
        return x[r]

    for root in sorted(children.get(-1, [])):
        place(root)
    return x


def tree(edges: pd.DataFrame, title: str) -> alt.LayerChart:
    """A tree drawn top down from (rank, parent, depth) rows (parent -1 for a root)."""
    drawn = edges.dropna(subset=["depth"])
    x = _tree_positions(drawn)
    nodes = drawn.assign(x=drawn["rank"].map(x), y=-drawn["depth"], label=drawn["rank"].astype(str))
    links = nodes[nodes["parent"] >= 0]
    links = links.assign(px=links["parent"].map(x), py=links["y"] + 1)
    axis: dict[str, Any] = {"axis": None}
    lines = (
        alt.Chart(links, title=title)
        .mark_rule(color="#4c78a8")
        .encode(x=alt.X("x:Q", **axis), y=alt.Y("y:Q", **axis), x2="px:Q", y2="py:Q")
    )
    dots = (
        alt.Chart(nodes)
        .mark_circle(size=400, color="#f2f2f2", stroke="#4c78a8", opacity=1)
        .encode(x="x:Q", y="y:Q")
    )
    text = alt.Chart(nodes).mark_text().encode(x="x:Q", y="y:Q", text="label:N")
    return (lines + dots + text).properties(height=220)


def curves(
    df: pd.DataFrame,
    x: str,
    y: str,
    point: pd.DataFrame | None,
    title: str,
    x_title: str,
    y_title: str,
    log_x: bool = False,
) -> alt.LayerChart | alt.Chart:
    """The line of `y` against `x`, with an optional highlighted point (the run). One series,
    so no legend: the page's caption says what the line and the point are."""
    scale = alt.Scale(type="log") if log_x else alt.Scale(zero=False)
    tip = [alt.Tooltip(f"{x}:Q", title=x_title), alt.Tooltip(f"{y}:Q", format=".3f")]
    lines = (
        alt.Chart(df, title=title)
        .mark_line(point=True, color="#4c78a8")
        .encode(
            x=alt.X(f"{x}:Q", title=x_title, scale=scale),
            y=alt.Y(f"{y}:Q", title=y_title),
            tooltip=[*tip, alt.Tooltip("verdict:N")],
        )
        .properties(height=220)
    )
    if point is None or point.empty:
        return lines
    dot = (
        alt.Chart(point)
        .mark_point(size=160, filled=True, color="black", shape="diamond")
        .encode(x=alt.X(f"{x}:Q"), y=alt.Y(f"{y}:Q"), tooltip=tip)
    )
    return lines + dot


def stacked_parts(
    df: pd.DataFrame, y: str, parts: dict[str, str], title: str, x_title: str = "ms per step"
) -> alt.Chart:
    """Horizontal stacked bars: one bar per `y` (e.g. rank), one segment per part (column →
    label in `parts`, stacked in that order), with the legend below the chart so it is never
    clipped."""
    long = df.melt(id_vars=[y], value_vars=list(parts), var_name="part", value_name="ms")
    long["part"] = long["part"].map(parts)
    long["order"] = long["part"].map({label: i for i, label in enumerate(parts.values())})
    return (
        alt.Chart(long, title=title)
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", title=x_title, stack="zero"),
            y=alt.Y(f"{y}:N", sort=None, title=y),
            color=alt.Color(
                "part:N",
                sort=list(parts.values()),
                scale=alt.Scale(
                    domain=list(parts.values()), range=[PART_COLOR.get(k, "#999999") for k in parts]
                ),
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=260, title=None),
            ),
            order=alt.Order("order:Q"),
            tooltip=[y, "part", alt.Tooltip("ms:Q", format=".3f")],
        )
        .properties(height=row_step(df[y]))
    )
