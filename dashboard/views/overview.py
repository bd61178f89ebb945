"""Overview: the answer to "why" first, then where the step goes, measured beside predicted."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from commwall.analysis.model.summary import predicted_reason
from commwall.analysis.steps import summary
from commwall.dashboard import charts, session
from commwall.dashboard.ui import (
    UPLOAD_TRACES,
    diagnosis_points,
    files_text,
    fmt_ms,
    fmt_pct,
    fmt_ratio,
    md,
    missing,
    plot,
    table,
)

#: Headline metrics: summary key → (label, formatter, help).
HEADLINE = {
    "step_ms": ("Step time", fmt_ms, "mean step window over ranks and steps"),
    "tau_comp_ms": ("τ_comp", fmt_ms, "time covered by compute"),
    "tau_comm_ms": ("τ_comm", fmt_ms, "time covered by communication (waiting included)"),
    "exposed_comm_ms": ("Exposed comm", fmt_ms, "communication not hidden under compute"),
    "eta": ("Overlap η", fmt_ratio, "overlap / min(τ_comp, τ_comm)"),
    "gamma": ("γ", fmt_ratio, "τ_comm / τ_comp"),
    "idle_ms": ("Idle", fmt_ms, "step time with no activity at all"),
}

v = session.current_run()
st.header(f"Overview — {md(v.run)}")
info, s = v.report.get("run_info") or {}, v.report.get("summary") or {}
gpus = ", ".join(info.get("gpus") or []) or (
    "GPU (model not recorded)" if info.get("device_kind") == "gpu" else "CPU only"
)
if info.get("device_kind") is None:
    gpus = "no traces"
n_ranks, n_steps = info.get("n_ranks", 0), info.get("n_steps", 0)
dumps = info.get("n_dump_ranks") or 0
ranks = f"{n_ranks} rank{'s' * (n_ranks != 1)}" if n_ranks or not dumps else "no traced rank"
if dumps:
    ranks += f" · {dumps} Flight Recorder dump{'s' * (dumps != 1)}"
st.caption(
    f"{ranks} · {n_steps} step{'s' * (n_steps != 1)} · {md(gpus)} · "
    f"files: {md(files_text(info.get('files') or {}))}"
)
if info.get("capture"):  # the checks of a `commwall capture` directory, made at ingest
    capture = str(info["capture"])
    (st.warning if capture.startswith("incomplete") else st.caption)(f"Capture {md(capture)}")
d = v.report.get("diagnosis") or {}


def why() -> None:
    """The diagnosis: its label, then its points by topic."""
    st.subheader("Why")
    if d.get("available"):
        shown = st.error if d.get("wall") else st.success
        label = d["label"][0].upper() + d["label"][1:]
        if not d.get("answer"):
            shown(f"**{md(label)}**")
            st.markdown(diagnosis_points(d))
            return
        # the answer at a glance, its points, the fixes ranked; the whole diagnosis behind them
        shown(f"**{md(d['answer'])}**")
        st.markdown("\n".join(f"- {md(p['text'])}" for p in d.get("brief") or []))
        fixes = d.get("fixes") or {}
        if fixes.get("rows"):
            st.markdown(
                f"**Fixes, ranked** — replayed from {md(fixes['baseline'])} "
                f"({fmt_ms(fixes['baseline_ms'])})"
            )
            rows = pd.DataFrame(fixes["rows"])
            table(
                pd.DataFrame(
                    {
                        "Fix": rows["fix"].str.capitalize(),
                        "Step after": rows["step_ms"].map(fmt_ms),
                        "Saving": rows["saving_pct"].map(lambda x: f"−{x:.0f}%"),
                    }
                ),
                key="fixes",
            )
        with st.expander(f"The whole diagnosis — {md(label)}"):
            st.markdown(diagnosis_points(d))
    else:
        missing("The diagnosis", md(d.get("reason") or "the report could not derive it"))


if "step_ms" not in s:
    if d.get("available"):  # a hang or a crash named from dumps or logs alone
        why()
    missing("Step metrics", "The run has no timeline activity. " + UPLOAD_TRACES)
    if not d.get("available") and d.get("paragraph"):  # what the logs alone say
        st.markdown(md(d["paragraph"]))
    st.stop()

why()

dec = v.report.get("decomposition") or {}
if dec.get("ranks"):
    st.subheader("Where the step goes, per rank")
    parts = dec["labels"]
    ranks = pd.DataFrame(dec["ranks"])
    size = charts.rank_block_size(ranks["rank"].nunique())
    title = "Mean step per rank, split into its parts (ms)"
    if size > 1:
        title = f"Mean step per block of {size} consecutive ranks, split into its parts (ms)"
    plot(
        summary.parts_per_rank_block(ranks, list(parts), size),
        charts.stacked_parts,
        ("rank", parts, title),
        "No step windows to split.",
        key="decomposition_ranks",
    )
    steps = pd.DataFrame(dec.get("steps") or [])
    if not steps.empty and steps["step"].nunique() > 1:
        per_step = summary.parts_per_step(steps, list(parts))
        plot(
            per_step,
            charts.stacked_parts,
            ("step", parts, "Each step, mean over ranks, split into its parts (ms)"),
            "No steps to split.",
            key="decomposition_steps",
        )
    st.caption(
        "The six parts add up to the step window. Exposed wait = in a collective before the "
        "last rank arrived, with no compute running; exposed transfer = after it."
    )

rep = v.report.get("replay") or {}
if rep.get("available"):
    st.subheader("What would make the step faster")
    w = pd.DataFrame(rep["whatifs"])
    w["step (ms)"] = w["step_ms"].round(3)
    w["saving (ms)"] = w["saving_ms"].round(3)
    w["saving"] = w["saving_pct"].map(lambda p: f"{p:.0f}%")
    st.dataframe(
        w[["label", "step (ms)", "saving (ms)", "saving"]],
        hide_index=True,
        key="replay_whatifs",
    )
    st.caption(
        f"Replay of the measured run: {fmt_ms(rep['measured_step_ms'])} measured "
        f"({md(rep['statistic'])}), {fmt_ms(rep['replayed_step_ms'])} replayed."
    )

items = list(HEADLINE.items())
if s.get("scope") == "whole trace":  # no ProfilerStep annotations: one window per rank
    items[0] = ("step_ms", ("Trace span", fmt_ms, "each rank's whole trace, mean over ranks"))
st.subheader("Measured")
for row in (items[:4], items[4:]):
    for col, (key, (label, fmt, help_)) in zip(st.columns(4), row, strict=False):
        col.metric(label, fmt(s.get(key)), help=help_, border=True)
st.caption(
    f"Mean over ranks and {md(s['scope'])}. Exposed communication is "
    f"{fmt_pct(s.get('exposed_comm_share'))} of step time."
)

model = v.report.get("model")
predicted = model.get("predicted") if isinstance(model, dict) else None
st.subheader("Measured and predicted")
if predicted and predicted.get("verdict"):
    st.markdown(
        f"**Predicted** (α-β model): {md(predicted['verdict'])} — "
        f"{md(predicted_reason(model or {}) or predicted['reason'])}"
    )
    status = str(model.get("status") or "") if isinstance(model, dict) else ""
    if status and status != "calibrated":
        st.warning(
            f"Model status: {md(status)}. Its prediction rests on a fit whose held-out error is "
            "too large, or unknown, to act on (see the Model page).",
            icon=":material/warning:",
        )
    if predicted.get("not_modelled"):
        st.caption(
            "Gradient sync only: leaves out "
            + ", ".join(md(op) for op in predicted["not_modelled"])
            + " (see the Model page)."
        )
else:
    missing("The model's prediction", "It needs collectives with sizes (" + UPLOAD_TRACES + ")")
rows = [
    {
        "metric": label,
        "measured": fmt(s.get(key)),
        "predicted": fmt(predicted.get(key))
        if predicted and predicted.get(key) is not None
        else "—",
    }
    for key, (label, fmt, _) in HEADLINE.items()
]
st.dataframe(pd.DataFrame(rows), hide_index=True, key="measured_predicted")
