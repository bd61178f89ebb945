"""Timeline: one step, chosen ranks, compute and communication on one clock, collectives linked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from commwall.analysis.steps import timeline
from commwall.analysis.steps.dimension import LABELS
from commwall.dashboard import charts, data, figures, session
from commwall.dashboard.ui import md, steps_hint, table

MAX_DEFAULT_RANKS = timeline.DEFAULT_RANKS

#: A kind's lane is drawn when it is busy for at least this share of the step on some rank;
#: below, its bars would be invisible slivers (the caption says what was left out).
MIN_LANE_SHARE = 0.005

#: A run without steps is drawn in this many windows of its span.
WINDOWS = 20


def span_view() -> None:
    """A run without step annotations: its span in WINDOWS windows, one drawn at a time."""
    st.caption(f"No step annotations in these traces. {md(steps_hint(v.report))}")
    left, right = st.columns([1, 3])
    window = left.select_slider(
        "Window of the trace", list(range(1, WINDOWS + 1)), 1, key=f"timeline_window:{wk}"
    )
    chosen = right.multiselect(
        "Ranks", ranks, default=ranks[:MAX_DEFAULT_RANKS], key=f"span_ranks:{wk}"
    )
    got = data.window_timeline(v.path, v.run, v.fp, window - 1, WINDOWS, tuple(sorted(chosen)))
    if got is None or got[0].empty:
        st.caption("No activity of the chosen ranks in this window.")
        return
    tracks, start_ms, length_ms = got
    tracks = tracks.assign(lane=lanes(tracks))
    order = [lane(r, k) for r in sorted(chosen) for k in ("compute", "comm", "memory")]
    figures.chart(
        st,
        charts.timeline,
        tracks,
        NO_CALLS,
        [x for x in order if x in set(tracks["lane"].unique())],
        f"Window {window} of {WINDOWS}: what each rank was busy with (ms)",
        f"ms since the window began ({start_ms:.3f} ms into the trace; {length_ms:.3f} ms long)",
        key="span_chart",
    )
    st.caption(
        f"The trace's span cut into {WINDOWS} equal windows; bars: time covered by each kind of "
        "activity on the aligned clock."
    )


def lane(rank: int, kind: str) -> str:
    """The row label: rank, kind, and a mark on straggler ranks."""
    return f"rank {rank}{' ◀ straggler' if rank in stragglers else ''} · {kind}"


def lanes(df: pd.DataFrame, kind: str | None = None) -> pd.Series:
    """The row label of every row of `df` (its rank and kind, or `kind` for all), labelled
    once per distinct row, not per interval."""
    pairs = pd.DataFrame({"rank": df["rank"], "kind": df["kind"] if kind is None else kind})
    names = pairs.drop_duplicates()
    names["lane"] = [lane(r, k) for r, k in names.itertuples(index=False)]
    return pairs.merge(names, on=["rank", "kind"], how="left")["lane"].set_axis(df.index)


def role_words(role: str | None) -> str | None:
    """A process group's role (the report's `dimensions.groups`) in words: "TP" is "tensor
    parallel", "TP+CP" "tensor parallel + context parallel", "expert TP" "expert tensor
    parallel"; None when the role is not known or is the whole world."""
    if not role or role in ("world", "unknown"):
        return None
    expert = role.startswith("expert ")
    words = " + ".join(LABELS.get(p, p) for p in role.removeprefix("expert ").split("+"))
    return f"expert {words}" if expert else words


def roles_in_words(report: Mapping[str, Any]) -> dict[str | None, str]:
    """Process group name → its role in words, for the groups whose role is known."""
    groups = (report.get("dimensions") or {}).get("groups") or []
    out = {g.get("pg_name"): role_words(g.get("role")) for g in groups}
    return {k: w for k, w in out.items() if w}


def with_roles(calls: pd.DataFrame, roles: dict[str | None, str]) -> pd.DataFrame:
    """`calls` with `role` (its group's role in words, or None) after `op`."""
    pg = calls["pg_name"] if "pg_name" in calls.columns else pd.Series(None, index=calls.index)
    role = [roles.get(None if pd.isna(p) else p) for p in pg]
    out = calls.copy()
    out.insert(list(out.columns).index("op") + 1, "role", role)
    return out


#: No collective calls (a run without steps has no per-step collective table).
NO_CALLS = pd.DataFrame(
    columns=["rank", "pg_name", "op", "instance", "ik", "bytes", "wait_ms", "start_ms", "end_ms"]
    + ["lane"]
)

v = session.current_run()
#: Widget keys are the run's: ranks or a step chosen on one run must not carry over to the next.
wk = f"{v.run}:{v.fp}"
st.header(f"Timeline — {md(v.run)}")
steps = sorted({r["step"] for r in v.report.get("steps") or []})
ranks = sorted({r["rank"] for r in v.report.get("ranks") or []})
stragglers = set((v.report.get("stragglers") or {}).get("flagged") or [])
if not steps:
    span_view()
    st.stop()

left, right = st.columns([1, 3])
step = left.selectbox("Step", steps, key=f"timeline_step:{wk}")
chosen = right.multiselect(
    "Ranks", ranks, default=timeline.default_ranks(v.report), key=f"timeline_ranks:{wk}"
)
if not chosen:
    st.info("Choose at least one rank.")
    st.stop()

tracks, colls = data.step_timeline(v.path, v.run, v.fp, int(step), tuple(sorted(chosen)))
if tracks.empty:
    st.caption(f"No activity of the chosen ranks in step {step}.")
    st.stop()


span = float(tracks["end_ms"].max() - tracks["start_ms"].min()) or 1.0
busy = (tracks["end_ms"] - tracks["start_ms"]).groupby(tracks["kind"])
widest = (tracks["end_ms"] - tracks["start_ms"]).groupby([tracks["kind"], tracks["rank"]]).sum()
widest = widest.groupby(level=0).max()
thin = sorted(widest[widest < MIN_LANE_SHARE * span].index)
drawn = tracks[~tracks["kind"].isin(thin)]
drawn = drawn.assign(lane=lanes(drawn))
colls = with_roles(colls, roles_in_words(v.report)).assign(lane=lanes(colls, "collectives"))
# the chart's bars and legend name each call's group role beside its op, where it is known
drawn_calls = colls.assign(
    op=[
        op if r is None else f"{op} · {r}" for op, r in zip(colls["op"], colls["role"], strict=True)
    ]
)
order = [lane(r, k) for r in sorted(chosen) for k in ("compute", "comm", "memory", "collectives")]
order = [x for x in order if x in {*drawn["lane"].unique(), *colls["lane"].unique()}]
figures.chart(
    st,
    charts.timeline,
    drawn,
    drawn_calls.drop(columns="role"),
    order,
    f"Step {step}: what each rank was busy with (ms)",
    "ms since the step began (earliest rank, aligned clock)",
    key="timeline_chart",
)
bases = (v.report.get("run_info") or {}).get("time_bases") or []
notes = [
    "Bars: time covered by each kind of activity, clipped to each rank's step window. Black "
    "lines join the start of the same collective on every rank: a slanted line is arrival "
    f"skew. Clock: epoch time from the traces ({md(', '.join(bases) or 'unknown')}), each "
    "host's offset (fitted on collective end times) removed. Bars of one row less than "
    f"{1000 * charts.join_gap(drawn):.2f} µs apart are drawn as one (the chart's resolution; "
    "the tooltip names the longest activity in it)."
]
if colls["role"].notna().any():
    notes.append(
        "Each collective is named with its process group's role (tensor parallel, data "
        "parallel, …: from the group's name, else from what its calls do)."
    )
if stragglers:
    notes.append(
        f"◀ straggler: rank(s) {', '.join(map(str, sorted(stragglers)))} (Stragglers page)."
    )
for k in thin:
    ms = busy.sum()[k]
    notes.append(f"{k} activity ({ms:.3f} ms in all) is too short to see at this scale: not drawn.")
st.caption(" ".join(notes))
if "unknown" in bases:
    st.warning("Some ranks have no absolute time base: their tracks cannot be aligned.")
if colls.empty:
    st.caption("No collective calls in this step.")
else:
    # instance as `commwall collectives` numbers it (per process group and op); ik, the
    # run-wide id the chart joins on, means nothing to a reader
    table(colls.drop(columns=["lane", "ik"]), key="timeline_collectives")
