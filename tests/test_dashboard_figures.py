"""Charts drawn from the spec cache (dashboard.figures) and the timeline's bars joined at the
resolution a screen shows (dashboard.charts.joined)."""

from __future__ import annotations

import io

import altair as alt
import pandas as pd
import pyarrow as pa
import pytest
import streamlit as st

from commwall.dashboard import charts, figures

BUILDS: list[int] = []


def dots(df: pd.DataFrame, title: str) -> alt.Chart:
    """A module-level builder that counts its calls."""
    BUILDS.append(len(df))
    return alt.Chart(df, title=title).mark_point().encode(x=alt.X("x:Q"), y=alt.Y("y:Q"))


class Sink:
    """Stands for st / a column: records the specs it is asked to draw."""

    def __init__(self) -> None:
        self.specs: list[dict] = []

    def vega_lite_chart(self, spec: dict, key: str | None = None, width: str = "") -> None:
        self.specs.append(spec)


def rows(spec: dict) -> list[dict]:
    """The rows of the one dataset a drawn spec carries (Arrow IPC bytes, as sent)."""
    (data,) = spec["datasets"].values()
    return pa.ipc.open_stream(io.BytesIO(data)).read_all().to_pylist()


def test_a_chart_is_built_once_per_builder_arguments_and_data():
    st.cache_data.clear()
    BUILDS.clear()
    sink = Sink()
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [4.0, 5.0, 6.0]})
    figures.chart(sink, dots, df, "a title")
    figures.chart(sink, dots, df.copy(), "a title")  # same content: from the cache
    assert BUILDS == [3]
    figures.chart(sink, dots, df.assign(y=[4.0, 5.0, 7.0]), "a title")  # other data
    figures.chart(sink, dots, df, "another title")  # other arguments
    assert BUILDS == [3, 3, 3]
    assert rows(sink.specs[0]) == df.to_dict("records")
    assert rows(sink.specs[2])[2] == {"x": 3.0, "y": 7.0}
    assert sink.specs[3]["title"] == "another title"


def test_a_builder_without_a_stable_name_is_refused():
    with pytest.raises(ValueError, match="module-level"):
        figures.chart(Sink(), lambda df: dots(df, "t"), pd.DataFrame({"x": [1], "y": [1]}))


def lane(rank: int, kind: str, spans: list[tuple[float, float, float]]) -> pd.DataFrame:
    """Intervals of one lane: (start_ms, end_ms, top_ms) each, one activity each."""
    return pd.DataFrame(
        {
            "rank": rank,
            "kind": kind,
            "top_name": [f"op{s}" for s, _, _ in spans],
            "top_ms": [t for _, _, t in spans],
            "n_activities": 1,
            "start_ms": [s for s, _, _ in spans],
            "end_ms": [e for _, e, _ in spans],
            "label": f"rank {rank} · {kind}",
        }
    )


#: (lanes of intervals, gap in ms, the bars expected: rank, kind, start, end, activities, top).
JOINED = [
    # a gap under 0.5 ms joins, a wider one does not; the longest part names the bar
    (
        [lane(0, "compute", [(0, 1, 0.9), (1.2, 2, 0.8), (5, 6, 1)])],
        0.5,
        [(0, "compute", 0, 2, 2, "op0"), (0, "compute", 5, 6, 1, "op5")],
    ),
    # a long interval covering shorter ones: the gap is measured from the farthest end so far
    (
        [lane(1, "comm", [(0, 10, 10), (2, 3, 1), (10.3, 11, 0.7)])],
        0.5,
        [(1, "comm", 0, 11, 3, "op0")],
    ),
    # lanes never join each other, however close (another kind, another rank)
    (
        [
            lane(0, "compute", [(0, 1, 1)]),
            lane(0, "comm", [(1, 2, 1)]),
            lane(1, "compute", [(1, 2, 1)]),
        ],
        0.5,
        [
            (0, "comm", 1, 2, 1, "op1"),
            (0, "compute", 0, 1, 1, "op0"),
            (1, "compute", 1, 2, 1, "op1"),
        ],
    ),
    # no gap allowed: only touching or overlapping intervals join
    (
        [lane(2, "memory", [(0, 1, 1), (1, 2, 1), (2.001, 3, 1)])],
        0.0,
        [(2, "memory", 0, 2, 2, "op0"), (2, "memory", 2.001, 3, 1, "op2.001")],
    ),
]


@pytest.mark.parametrize(("lanes", "gap", "want"), JOINED)
def test_timeline_bars_closer_than_the_gap_are_drawn_as_one(lanes, gap, want):
    got = charts.joined(pd.concat(lanes, ignore_index=True), gap)
    cols = ["rank", "kind", "start_ms", "end_ms", "n_activities", "top_name"]
    assert [tuple(r) for r in got[cols].itertuples(index=False)] == want
    assert list(got["label"]) == [f"rank {r} · {k}" for r, k, *_ in want]  # other columns kept


def test_datasets_are_named_by_position_so_new_data_keeps_the_spec():
    st.cache_data.clear()
    sink = Sink()
    df = pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    figures.chart(sink, dots, df, "t")
    figures.chart(sink, dots, df.assign(y=[3.0, 5.0]), "t")
    first, second = ({k: v for k, v in s.items() if k != "datasets"} for s in sink.specs)
    assert first == second and first["data"] == {"name": "data-0"}
    assert list(sink.specs[1]["datasets"]) == ["data-0"]
    assert rows(sink.specs[1]) == [{"x": 1.0, "y": 3.0}, {"x": 2.0, "y": 5.0}]


def curve_args(ys: list[float], point_y: float | None) -> tuple:
    """Arguments of charts.curves: a line over x = 1, 2, … and the run's point (none: empty)."""
    line = pd.DataFrame(
        {"x": [float(i + 1) for i in range(len(ys))], "step_ms": ys, "verdict": "ok"}
    )
    point = pd.DataFrame(
        {"x": [] if point_y is None else [2.0], "step_ms": [] if point_y is None else [point_y]}
    )
    return (line, "x", "step_ms", point, "Predicted step time (ms) by x", "x", "ms", False)


def test_a_shape_only_chart_is_the_full_build_with_new_rows():
    st.cache_data.clear()
    name = figures.builder_name(charts.curves)
    for ys, point_y in [
        ([5.0, 4.0, 3.5], 4.2),  # builds the chart
        ([6.0, 4.5, 3.0], 4.2),  # new rows: the chart reused
        ([6.0, 4.5, 3.0, 2.0, 1.0], 3.9),  # more rows, another point
        ([6.0, 4.5, 3.0], None),  # no point: another chart (one layer)
        ([1.0, 1.0, 1.0], 1.0),  # the point's rows alike the line's in value
    ]:
        args = curve_args(ys, point_y)
        got = figures.shape_spec(name, args)
        assert got == figures.spec.__wrapped__(name, args)  # built from scratch, uncached
    assert [r["step_ms"] for r in rows({"datasets": {"d": got["datasets"]["data-0"]}})] == [
        1.0,
        1.0,
        1.0,
    ]


def test_a_shape_only_chart_is_built_once_per_shape():
    st.cache_data.clear()
    BUILDS.clear()
    sink = Sink()
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [4.0, 5.0, 6.0]})
    figures.chart(sink, dots, df, "t", shape_only=True)
    figures.chart(sink, dots, df.assign(y=[1.0, 2.0, 9.0]), "t", shape_only=True)
    figures.chart(sink, dots, df.head(2), "t", shape_only=True)
    assert BUILDS == [3]
    figures.chart(sink, dots, df, "another title", shape_only=True)
    figures.chart(sink, dots, df.assign(y=["a", "b", "c"]), "t", shape_only=True)  # other type
    assert BUILDS == [3, 3, 3]
    assert [r["y"] for r in rows(sink.specs[1])] == [1.0, 2.0, 9.0]
    assert rows(sink.specs[2]) == df.head(2).to_dict("records")


def test_a_shape_only_chart_with_two_equal_frames_is_built_in_full():
    st.cache_data.clear()
    name = figures.builder_name(charts.curves)
    line = pd.DataFrame({"x": [2.0], "step_ms": [4.0], "verdict": ["ok"]})
    args = (line, "x", "step_ms", line.copy(), "t", "x", "ms", False)
    assert figures.shape_spec(name, args) == figures.spec(name, args)


@pytest.mark.parametrize(
    ("n_ranks", "max_rows", "size"),
    [
        (8, 80, 1),  # fits: one rank a row
        (80, 80, 1),
        (81, 80, 2),  # 41 rows of 2
        (160, 80, 2),
        (161, 80, 4),  # 2 would need 81 rows
        (1024, 80, 16),  # 64 rows of 16 (8 would need 128)
        (20, 8, 4),  # 5 rows of 4 (2 would need 10)
    ],
)
def test_rank_block_size_is_the_least_power_of_two_that_fits(n_ranks, max_rows, size):
    assert charts.rank_block_size(n_ranks, max_rows) == size


def test_rank_blocks_show_each_blocks_worst_rank_and_any_outlier():
    # 20 ranks in 2 steps, value = rank + 100 * step, except rank 6 of step 1 is the lowest of
    # its block (-5) and an outlier; with 8 rows at most: blocks of 4 ranks (0-3, ..., 16-19)
    rows = [(r, s, r + 100.0 * s, False) for r in range(20) for s in (0, 1)]
    df = pd.DataFrame(rows, columns=["rank", "step", "v", "out"])
    df.loc[(df["rank"] == 6) & (df["step"] == 1), ["v", "out"]] = (-5.0, True)
    lo = charts.rank_blocks(df, "v", "min", "out", max_rows=8)
    hi = charts.rank_blocks(df, "v", "max", "out", max_rows=8)
    labels = ["0–3", "4–7", "8–11", "12–15", "16–19"]
    assert list(lo["rank"]) == [lab for lab in labels for _ in (0, 1)]  # block, then step
    assert list(lo["worst_rank"]) == [0, 0, 4, 6, 8, 8, 12, 12, 16, 16]
    assert list(lo["v"]) == [0, 100, 4, -5, 8, 108, 12, 112, 16, 116]
    assert list(hi["worst_rank"]) == [3, 3, 7, 7, 11, 11, 15, 15, 19, 19]
    assert list(lo["out"]) == list(hi["out"]) == [False, False, False, True] + [False] * 6
    # few ranks: the rows as they are
    assert charts.rank_blocks(df, "v", "min", "out", max_rows=20) is df
    spec = charts.heatmap(lo, "v", "v", "out").to_dict()
    assert spec["layer"][0]["encoding"]["y"]["sort"] is None  # blocks keep their rank order


def stacked(df: pd.DataFrame) -> alt.VConcatChart:
    """A module-level builder of a composition."""
    return alt.vconcat(dots(df, "a"), dots(df, "b"))


def test_a_charts_height_is_its_plots_and_compositions_keep_streamlits_sizing():
    """Streamlit's default sizing of a single or layered chart ("fit") fits title, axes and
    legends into the height the builder gave the plot: a two-rank timeline with its two
    legends below was drawn as a flat line. Only the width is fitted; compositions, which
    fit-x breaks, keep Streamlit's own."""
    st.cache_data.clear()
    sink = Sink()
    df = pd.DataFrame({"x": [1.0], "y": [2.0]})
    figures.chart(sink, dots, df, "one")
    figures.chart(sink, stacked, df)
    single, composed = sink.specs
    assert single["autosize"] == {"type": "fit-x", "contains": "padding"}
    assert "autosize" not in composed


def test_each_part_of_the_step_has_one_colour_on_every_chart():
    """The Overview's stacked bars (charts.stacked_parts) and the Compare page's and the
    post-mortem's decomposition (doc_charts.decomposition) colour each part alike."""
    import pandas as pd

    from commwall.analysis.steps.summary import PART_LABELS
    from commwall.dashboard import charts, doc_charts

    keys = [k for k in PART_LABELS if k in charts.PART_COLOR]
    wide = pd.DataFrame({"rank": [0], **{k: [1.0] for k in keys}})
    overview = charts.stacked_parts(wide, "rank", {k: PART_LABELS[k] for k in keys}, "t")
    enc = overview.to_dict()["encoding"]["color"]["scale"]
    by_label_overview = dict(zip(enc["domain"], enc["range"], strict=True))
    long = pd.DataFrame({"rank": [0] * len(keys), "part": keys, "ms": [1.0] * len(keys)})
    compare = doc_charts.decomposition(long, "t").to_dict()["encoding"]["color"]["scale"]
    by_label_compare = dict(zip(compare["domain"], compare["range"], strict=True))
    assert by_label_overview == by_label_compare
    assert len(set(by_label_overview.values())) == len(keys)  # parts told apart
    # the Timeline's compute and communication are the parts' compute and transfer colours
    kinds = dict(zip(charts.KIND_COLORS.domain, charts.KIND_COLORS.range, strict=True))
    assert kinds["compute"] == charts.PART_COLOR["compute_only_ms"]
    assert kinds["comm"] == charts.PART_COLOR["exposed_transfer_ms"]
    assert not set(charts.OP_COLORS) & set(kinds.values())  # collectives apart from both
