"""Static charts for the post-mortem document: Altair specifications rendered to SVG by
vl-convert (no browser, no scripts in the output). Drawing only: every value arrives computed.

vl-convert runs the charts in V8, which reserves tens of GiB of address space before it draws
anything (here it failed under a limit of 64 GiB and drew under 128 GiB) and ends the whole
process when it cannot (SIGTRAP, "Fatal process out of memory"). Under an address-space limit
(`ulimit -v`) the charts are therefore drawn by a child process, which first raises its own
limit to the hard one; when it dies, `to_svgs` raises NotRendered and the document says so.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import altair as alt
import pandas as pd

import commwall.addrspace as addrspace
from commwall.analysis.steps.summary import PART_LABELS
from commwall.dashboard.charts import KIND_COLORS, LEGEND, PART_COLOR

WIDTH = 620
PART_COLORS = alt.Scale(domain=list(PART_COLOR), range=list(PART_COLOR.values()))
LANE_COLORS = alt.Scale(
    domain=["compute", "comm", "memory", "wait"],
    range=[*KIND_COLORS.range, "#f58518"],
)


def _data(df: pd.DataFrame) -> alt.InlineData:
    """The frame as inline values (JSON-safe: NaN → None)."""
    clean = df.astype(object).where(df.notna(), None)
    return alt.InlineData(values=clean.to_dict("records"))


class NotRendered(Exception):
    """The charts could not be drawn at all (the renderer's process died); says why."""


#: Seconds the child process drawing a document's charts may take.
CHILD_TIMEOUT_S = 300.0
#: The child: raises its address-space limit to the hard one, then draws each specification
#: of the JSON list on stdin; writes one {"svg": ...} or {"error": ...} per chart.
_CHILD = """
import json, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
if soft != hard:
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
import vl_convert
out = []
for spec in json.load(sys.stdin):
    try:
        out.append({"svg": vl_convert.vegalite_to_svg(spec)})
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"})
json.dump(out, sys.stdout)
"""


def _bare(svg: str) -> str:
    """An SVG document as an element to inline in HTML (no XML declaration)."""
    return re.sub(r"^<\?xml[^>]*>\s*", "", svg)


def to_svgs(specs: list[dict[str, Any]]) -> list[str | Exception]:
    """Each Vega-Lite specification as an SVG element, or the exception drawing it raised. In
    this process without an address-space limit, else in a child process; NotRendered when
    that child dies (V8 could not reserve its address space) or cannot be run."""
    if addrspace.limit() is None:
        import vl_convert  # noqa: PLC0415 (only documents pay for the renderer)

        out: list[str | Exception] = []
        for spec in specs:
            try:
                out.append(_bare(vl_convert.vegalite_to_svg(spec)))
            except Exception as e:  # one chart that cannot be drawn costs only itself
                out.append(e)
        return out
    return _in_child(specs)


def _in_child(specs: list[dict[str, Any]]) -> list[str | Exception]:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(specs, default=str),
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        raise NotRendered(f"the chart renderer did not finish in {CHILD_TIMEOUT_S:g} s") from e
    except OSError as e:
        raise NotRendered(f"the chart renderer could not be started ({e})") from e
    if done.returncode != 0:
        raise NotRendered(_why(done.returncode, done.stderr))
    try:
        drawn = json.loads(done.stdout)
    except ValueError as e:
        raise NotRendered("the chart renderer's output could not be read") from e
    if not isinstance(drawn, list) or len(drawn) != len(specs):
        raise NotRendered("the chart renderer's output could not be read")
    return [_bare(d["svg"]) if "svg" in d else RuntimeError(d.get("error")) for d in drawn]


def _why(code: int, stderr: str) -> str:
    """Why the child drawing the charts died, in words."""
    text = stderr.lower()
    cap = addrspace.limit(hard=True)  # the child's, once it raised its own
    if cap is not None and (code < 0 or "out of memory" in text or "memoryerror" in text):
        return (
            f"the address space is limited (ulimit -v: {cap / 2**30:.3g} GiB), and the chart "
            "renderer (vl-convert's V8 engine) must reserve more than that before it draws "
            "anything; raise the limit (ulimit -v unlimited) or export on a machine without "
            "one to have them drawn"
        )
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    return f"the chart renderer failed (exit status {code}" + (
        f": {lines[-1][:200]})" if lines else ")"
    )


def decomposition(df: pd.DataFrame, title: str, facet: str | None = None) -> alt.Chart:
    """Stacked horizontal bars: the mean per step of each part, per rank (df: rank, part, ms,
    and `facet` — a run — when given). Ranks as text (blocks of ranks, "0–15") keep the
    frame's order: as text they would sort "1008–1023" before "112–127"."""
    domain, colors = PART_COLORS.domain, PART_COLORS.range
    text = not pd.api.types.is_numeric_dtype(df["rank"])
    rows: list | str = list(dict.fromkeys(df["rank"].tolist())) if text else "ascending"
    present = [(p, c) for p, c in zip(domain, colors, strict=True) if p in set(df["part"])]
    # the legend in words (PART_LABELS), never the report's keys
    shown = {p: PART_LABELS.get(p, "exposed communication") for p, _ in present}
    scale = alt.Scale(domain=[shown[p] for p, _ in present], range=[c for _, c in present])
    df = df.assign(order=df["part"].map({p: i for i, (p, _) in enumerate(present)}))
    df = df.assign(part=df["part"].map(lambda p: shown.get(p, p)))
    chart = (
        alt.Chart(_data(df), title=title)
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", title="mean per step (ms)", stack="zero"),
            y=alt.Y("rank:O", title="rank", sort=rows),
            color=alt.Color("part:N", scale=scale, title="part of the step", legend=LEGEND),
            order=alt.Order("order:Q"),
        )
        .properties(width=WIDTH)
    )
    if facet:
        return chart.facet(row=alt.Row(f"{facet}:N", title=None))
    return chart


def ranked_bars(df: pd.DataFrame, x: str, y: str, title: str, x_title: str) -> alt.Chart:
    """Horizontal bars of `x` per `y`, in the frame's order; `flagged` rows in red."""
    enc: dict[str, alt.X | alt.Y | alt.Color] = {
        "x": alt.X(f"{x}:Q", title=x_title),
        "y": alt.Y(f"{y}:N", sort=None, title=None, axis=alt.Axis(labelLimit=0)),
    }
    if "flagged" in df.columns:
        enc["color"] = alt.Color(
            "flagged:N",
            scale=alt.Scale(domain=[False, True], range=["#9ecae9", "#e45756"]),
            legend=alt.Legend(title="straggler", **LEGEND),
        )
    return alt.Chart(_data(df), title=title).mark_bar().encode(**enc).properties(width=WIDTH)


def busbw_by_size(df: pd.DataFrame, title: str, peak: float | None, series: str) -> alt.Chart:
    """Bus bandwidth (GB/s) against message size (bytes, log), one line per `series`; a
    dashed rule at the link's peak when known."""
    df = df[df["bytes"].notna() & (df["bytes"] > 0) & df["busbw_GBps"].notna()]
    base = alt.Chart(_data(df), title=title).encode(
        x=alt.X("bytes:Q", scale=alt.Scale(type="log"), title="message size (bytes)"),
        y=alt.Y("busbw_GBps:Q", title="bus bandwidth (GB/s)"),
        color=alt.Color(f"{series}:N", title=None, legend=LEGEND),
    )
    chart = (base.mark_line(point=True)).properties(width=WIDTH, height=260)
    if peak:
        rule = pd.DataFrame({"y": [peak], "label": [f"peak {peak:g} GB/s"]})
        line = alt.Chart(_data(rule)).mark_rule(strokeDash=[6, 4]).encode(y="y:Q")
        text = (
            alt.Chart(_data(rule))
            .mark_text(align="left", dx=4, dy=-6)
            .encode(y="y:Q", text="label:N")
        )
        return chart + line + text
    return chart


def step_timeline(tracks: pd.DataFrame, colls: pd.DataFrame, title: str) -> alt.Chart:
    """One lane per rank and kind (compute, comm, memory) and a lane of the waits for the
    last arrival of each collective (from the call's start, wait_ms long)."""
    waits = colls[colls["wait_ms"] > 0]
    waits = pd.DataFrame(
        {
            "rank": waits["rank"],
            "kind": "wait",
            "start_ms": waits["start_ms"],
            "end_ms": waits["start_ms"] + waits["wait_ms"],
        }
    )
    df = pd.concat([tracks[["rank", "kind", "start_ms", "end_ms"]], waits], ignore_index=True)
    df["lane"] = [f"rank {r} · {k}" for r, k in zip(df["rank"], df["kind"], strict=True)]
    kinds = ["compute", "comm", "memory", "wait"]
    lanes = [f"rank {r} · {k}" for r in sorted(df["rank"].unique()) for k in kinds]
    lanes = [x for x in lanes if x in set(df["lane"])]
    return (
        alt.Chart(_data(df), title=title)
        .mark_bar(height={"band": 0.8})
        .encode(
            x=alt.X("start_ms:Q", title="ms from the step's start (aligned clock)"),
            x2="end_ms:Q",
            y=alt.Y("lane:N", sort=lanes, title=None, axis=alt.Axis(labelLimit=0)),
            color=alt.Color("kind:N", scale=LANE_COLORS, title=None, legend=LEGEND),
        )
        .properties(width=WIDTH, height=max(120, 14 * len(lanes)))
    )


def step_distribution(df: pd.DataFrame, title: str) -> alt.LayerChart:
    """Each run's step times (df: run, step_ms) as points over a box plot."""
    data = _data(df)
    y = alt.Y("run:N", sort=None, title=None, axis=alt.Axis(labelLimit=0))
    box = (
        alt.Chart(data)
        .mark_boxplot(extent="min-max", opacity=0.4)
        .encode(x=alt.X("step_ms:Q", title="step time, slowest rank (ms)"), y=y)
    )
    pts = alt.Chart(data).mark_tick(thickness=2).encode(x="step_ms:Q", y=y)
    return (box + pts).properties(title=title, width=WIDTH)
