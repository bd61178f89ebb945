"""Overview: the headline numbers, the verdict, measured beside predicted."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.model.step import COMPUTE_BOUND
from analysis.verdict import verdict
from dashboard import session
from dashboard.ui import UPLOAD_TRACES, fmt_ms, fmt_pct, fmt_ratio, md, missing

#: Headline metrics: summary key → (label, formatter, help).
HEADLINE = {
    "step_ms": ("Step time", fmt_ms, "median over ranks and steps of the step window"),
    "tau_comp_ms": ("τ_comp", fmt_ms, "time covered by compute kernels"),
    "tau_comm_ms": ("τ_comm", fmt_ms, "time covered by communication kernels (wait included)"),
    "exposed_comm_ms": ("Exposed comm", fmt_ms, "communication not hidden under compute"),
    "eta": ("Overlap η", fmt_ratio, "overlap / min(τ_comp, τ_comm)"),
    "gamma": ("γ", fmt_ratio, "τ_comm / τ_comp"),
    "idle_ms": ("Idle", fmt_ms, "step time with no activity at all"),
}

v = session.current_run()
st.header(f"Overview — {md(v.run)}")
info, s = v.report.get("run_info") or {}, v.report.get("summary") or {}
st.caption(
    f"{info.get('n_ranks', 0)} ranks · {info.get('n_steps', 0)} steps · "
    f"{md(', '.join(info.get('gpus') or []) or 'no GPU recorded')} · "
    f"files: {md(', '.join(f'{n} {k}' for k, n in (info.get('files') or {}).items()))}"
)
if "step_ms" not in s:
    missing("Step metrics", "The run has no timeline activity. " + UPLOAD_TRACES)
    st.stop()

items = list(HEADLINE.items())
for row in (items[:4], items[4:]):
    for col, (key, (label, fmt, help_)) in zip(st.columns(4), row, strict=False):
        col.metric(label, fmt(s.get(key)), help=help_, border=True)
st.caption(
    f"Medians over ranks and {md(s['scope'])}. Exposed communication is "
    f"{fmt_pct(s.get('exposed_comm_share'))} of step time."
)

model = v.report.get("model")
predicted = model.get("predicted") if isinstance(model, dict) else None
measured_v, predicted_v = verdict(s), verdict(predicted)

st.subheader("Verdict")
left, right = st.columns(2)
with left:
    st.markdown("**Measured**")
    if measured_v:
        shown = st.success if measured_v["verdict"] == COMPUTE_BOUND else st.error
        shown(f"**{measured_v['verdict']}**: {measured_v['reason']}")
with right:
    st.markdown("**Predicted** (α-β model)")
    if predicted_v:
        shown = st.success if predicted_v["verdict"] == COMPUTE_BOUND else st.error
        shown(f"**{predicted_v['verdict']}**: {predicted_v['reason']}")
        if predicted.get("not_modelled"):
            st.caption(
                "Gradient sync only: leaves out "
                + ", ".join(md(op) for op in predicted["not_modelled"])
                + " (see the Model page)."
            )
    else:
        missing("The model's prediction", "It needs collectives with sizes (" + UPLOAD_TRACES + ")")

st.subheader("Measured and predicted")
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
if isinstance(model, dict) and model.get("fit"):
    fit = model["fit"]
    st.caption(
        f"Model fitted on this run's collectives: α = {fmt_ratio(fit.get('alpha_us'))} µs, "
        f"β⁻¹ = {fmt_ratio(fit.get('beta_GBps'))} GB/s."
    )
