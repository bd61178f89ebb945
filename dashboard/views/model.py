"""Model and what-if: the calibrated α-β prediction beside the measurement, and live what-ifs
(gradient accumulation, link bandwidth, overlap, compression, nodes) with the run on the curves."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from analysis import whatif
from dashboard import charts, data, session
from dashboard.ui import UPLOAD_TRACES, fmt_ms, fmt_pct, fmt_ratio, md, missing

#: Rows of the measured/predicted table: key → (label, formatter).
ROWS = {
    "step_ms": ("step time", fmt_ms),
    "tau_comp_ms": ("τ_comp", fmt_ms),
    "tau_comm_ms": ("τ_comm", fmt_ms),
    "exposed_comm_ms": ("exposed communication", fmt_ms),
    "idle_ms": ("idle", fmt_ms),
    "eta": ("overlap η", fmt_ratio),
    "gamma": ("γ", fmt_ratio),
    "comm_overhead": ("communication overhead", fmt_pct),
    "verdict": ("verdict", str),
}
LINK_FACTORS = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
COMPRESSION = {1.0: "none", 2.0: "×2 (fp32 → bf16)", 4.0: "×4 (fp32 → fp8)"}
#: The values each curve sweeps, from the run's own knob values.
SWEEPS = {
    "grad_accum": lambda b: (1, 2, 4, 8, 16, 32),
    "link_Bps": lambda b: tuple(b["link_Bps"] * f for f in LINK_FACTORS),
    "eta": lambda b: tuple(x / 10 for x in range(11)),
    "compression": lambda b: tuple(COMPRESSION),
    "n_nodes": lambda b: tuple(sorted({2, 4, 8, 16, 32, 64, int(b["n_nodes"])})),
}

v = session.current_run()
st.header(f"Model and what-if — {md(v.run)}")
model = v.report.get("model")
if not isinstance(model, dict) or not model.get("predicted"):
    status = model.get("status") if isinstance(model, dict) else "no model section"
    missing("The calibrated model", f"Status: {md(status)}. It needs matched collectives "
            "with message sizes. " + UPLOAD_TRACES)  # fmt: skip
    st.stop()

measured, predicted, fit = model["measured"], model["predicted"], model.get("fit") or {}
st.subheader("Measured and predicted")
rows = [
    {
        "metric": label,
        "measured": "—" if measured.get(k) is None else fmt(measured[k]),
        "predicted": "—" if predicted.get(k) is None else fmt(predicted[k]),
    }
    for k, (label, fmt) in ROWS.items()
]
st.dataframe(pd.DataFrame(rows), hide_index=True, key="model_table")
st.caption(
    f"Fitted on {fit.get('n')} {md(fit.get('op'))} collectives over {fit.get('n_ranks')} ranks: "
    f"α = {fmt_ratio(fit.get('alpha_us'))} µs per hop, bus bandwidth "
    f"{fmt_ratio(fit.get('beta_GBps'))} GB/s (R² {fmt_ratio(fit.get('r2'))}). The model counts "
    "transfer time only: the gap to the measured step is waiting for late ranks and host time."
)
if predicted.get("not_modelled"):
    ops = ", ".join(f"{md(op)} ({n:g} per step)" for op, n in predicted["not_modelled"].items())
    st.warning(
        f"Not in the prediction: {ops}. Their time is in the measured τ_comm; the model covers "
        "all-reduce-equivalent traffic (gradient sync) only."
    )

s = data.scenario(v.path, v.run, v.fp)
if s is None:
    missing("What-ifs", "The run moves no reducible bytes per step.")
    st.stop()
idle = measured.get("idle_ms") or 0.0
base = {k: whatif.knob_value(s, k) for k in whatif.KNOBS}
base["eta"] = round(base["eta"], 2)  # the slider's resolution

st.subheader("What if…")
a, b, c = st.columns(3)
knobs = {
    "grad_accum": a.slider(whatif.KNOBS["grad_accum"][0], 1, 32, 1, key="wi_accum"),
    "link_Bps": b.select_slider(
        whatif.KNOBS["link_Bps"][0],
        [base["link_Bps"] * f for f in LINK_FACTORS],
        value=base["link_Bps"],
        format_func=lambda x: f"{x:.3g}",
        key="wi_link",
    ),
    "eta": c.slider(whatif.KNOBS["eta"][0], 0.0, 1.0, base["eta"], 0.01, key="wi_eta"),
}
a, b, _ = st.columns(3)
knobs["compression"] = a.select_slider(
    whatif.KNOBS["compression"][0], list(COMPRESSION), 1.0, COMPRESSION.get, key="wi_comp"
)
knobs["n_nodes"] = b.slider(
    whatif.KNOBS["n_nodes"][0], 2, max(64, 4 * int(base["n_nodes"])), int(base["n_nodes"]),
    key="wi_nodes",
)  # fmt: skip

now = whatif.predicted(whatif.with_knobs(s, knobs), idle)
then = whatif.predicted(whatif.with_knobs(s, base), idle)
m1, m2, m3 = st.columns(3)
d_step, d_over = now["step_ms"] - then["step_ms"], now["comm_overhead"] - then["comm_overhead"]
m1.metric(
    "Predicted step time",
    fmt_ms(now["step_ms"]),
    f"{d_step:+.3f} ms" if abs(d_step) > 5e-4 else None,
    delta_color="inverse",
)
m2.metric(
    "Communication overhead",
    fmt_pct(now["comm_overhead"]),
    f"{100 * d_over:+.1f} pts" if abs(d_over) > 5e-4 else None,
    delta_color="inverse",
)
m3.metric("Verdict", now["verdict"])
st.caption(md(now["reason"]))

st.caption("Lines: the model with the other knobs as set above. ◆ the measured run.")
curves = []
for knob in whatif.KNOBS:
    others = tuple((k, x) for k, x in knobs.items() if k != knob)
    line = data.whatif_curve(v.path, v.run, v.fp, knob, SWEEPS[knob](base), others, idle)
    curves.append(
        charts.curves(
            line.assign(series="predicted"),
            knob,
            "step_ms",
            "series",
            whatif.measured_point(s, knob, measured),
            "Step time (per optimizer step)",
            whatif.KNOBS[knob][0],
            "ms",
            log_x=knob == "link_Bps",
        )
    )
st.altair_chart(alt.concat(*curves, columns=2), key="whatif_curves")
