"""Model and what-if: the calibrated α-β prediction beside the measurement, and live what-ifs
(gradient accumulation, link bandwidth, overlap, compression, nodes) with the run on the curves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from commwall.analysis.hangs.stopped import HUNG
from commwall.analysis.model import whatif
from commwall.analysis.model.scenario import Scenario
from commwall.analysis.units import size_text
from commwall.dashboard import charts, data, fabric_chart, fabric_data, session
from commwall.dashboard.ui import (
    fmt_ms,
    fmt_pct,
    fmt_ratio,
    matched_instances,
    md,
    missing,
    plot,
    traces_hint,
)

#: Rows of the measured/predicted table: key → (label, formatter).
ROWS: dict[str, tuple[str, Callable[[Any], str]]] = {
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
#: What a knob's curve plots when not the step time: column, words.
CURVE_Y = {"grad_accum": ("micro_batch_ms", "time per micro-batch")}
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

replay = v.report.get("replay") or {}
st.subheader("Replay of the measured run")
if replay.get("available"):
    st.caption(
        f"The run's own timeline replayed: {fmt_ms(replay['measured_step_ms'])} measured, "
        f"{fmt_ms(replay['replayed_step_ms'])} replayed ({md(replay['statistic'])}). Each row "
        "changes one thing; the α-β what-ifs below change the job instead."
    )
    rows = pd.DataFrame(replay["whatifs"])
    st.dataframe(
        pd.DataFrame(
            {
                "what if": rows["label"],
                "step": rows["step_ms"].map(fmt_ms),
                "saving": rows["saving_ms"].map(fmt_ms),
                "saving (%)": rows["saving_pct"].map(lambda p: f"{p:.0f}%"),
            }
        ),
        hide_index=True,
        key="model_replay",
    )
else:
    st.caption(f"No replay: {md(replay.get('reason') or 'not available for this run')}.")

fabric = v.report.get("fabric")
#: Runs whose nccl-tests tables the run can be measured against: the run itself first.
table_runs = [v.run] + [r for r in fabric_data.table_runs() if r != v.run]
if len(table_runs) > 1:
    baseline: str = (
        st.selectbox(
            "Baseline (nccl-tests) run",
            table_runs,
            index=0,
            format_func=lambda r: f"{r} (this run)" if r == v.run else r,
            key=f"fabric_baseline:{v.run}",
            help="The run whose nccl-tests tables price the run's collectives: one measured on the "
            "same nodes, ideally.",
        )
        or v.run
    )
    if baseline != v.run:
        fabric = fabric_data.fabric_against(
            v.path, v.run, v.fp, baseline, data.fingerprint(data.run_list(), baseline)
        )
    if isinstance(fabric, dict) and not fabric.get("present"):
        st.caption(f"No comparison with nccl-tests: {md(fabric.get('reason') or 'not available')}.")
if isinstance(fabric, dict) and fabric.get("present"):
    st.subheader("The run against nccl-tests on its fabric")
    st.markdown(md(fabric["sentence"] or ""))
    st.dataframe(
        pd.DataFrame(
            {
                "collective": [fabric_chart.op_label(c["op"]) for c in fabric["classes"]],
                "message size": [size_text(c["size_bytes"]) for c in fabric["classes"]],
                "ranks": [c["n_ranks"] for c in fabric["classes"]],
                "calls": [c["n_calls"] for c in fabric["classes"]],
                "training bus bandwidth (GB/s)": [
                    f"{c['busbw_GBps']:.3g}" for c in fabric["classes"]
                ],
                "nccl-tests at that size (GB/s)": [
                    "—" if c["baseline_busbw_GBps"] is None else f"{c['baseline_busbw_GBps']:.3g}"
                    for c in fabric["classes"]
                ],
                "training ÷ nccl-tests": [fmt_pct(c["ratio"]) for c in fabric["classes"]],
                "priced from": [
                    "—" if c["baseline"] is None else f"{c['baseline']} ({c['baseline_basis']})"
                    for c in fabric["classes"]
                ],
            }
        ),
        hide_index=True,
        key="model_fabric",
    )
    plot(
        fabric_chart.fabric_frame(fabric),
        fabric_chart.fabric_chart,
        ("Bus bandwidth by message size: nccl-tests (lines) and training (◆)",),
        "No bus bandwidth to draw.",
        key="model_fabric_chart",
    )
    st.caption(
        f"Below {fmt_pct(fabric['ratio_limit'])} of nccl-tests' bus bandwidth at the same size, "
        "the transfer is slow inside training, not on the fabric. Baselines: "
        f"{md(fabric['source'])}."
    )

model = v.report.get("model")
if not isinstance(model, dict) or not model.get("predicted"):
    status = model.get("status") if isinstance(model, dict) else None
    how = (
        f"The model was not calibrated on this run: {md(status or 'no model section')}."
        if matched_instances(v.report)
        else traces_hint(v.report)
    )
    missing("The calibrated model", how)
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
if model.get("status") != "calibrated":
    st.warning(
        f"Model status: {md(str(model.get('status')))}. The prediction and the what-ifs below "
        "rest on a fit whose held-out error is too large, or unknown, to act on."
    )
if measured.get("verdict") == HUNG:
    st.warning(
        "The job hung: its measured figures hold the wait for the hung collective. The "
        "prediction and the what-ifs below are for a step that does not hang; fix the hang "
        "first (the Hang page says who did not arrive)."
    )
if predicted.get("not_modelled"):
    ops = ", ".join(f"{md(op)} ({n:g} per step)" for op, n in predicted["not_modelled"].items())
    st.warning(
        f"Not in the prediction: {ops}. Their time is in the measured τ_comm; the model covers "
        "all-reduce-equivalent traffic (gradient sync) only."
    )

found = data.scenario(v.path, v.run, v.fp)
if found is None:
    missing("What-ifs", "The run moves no reducible bytes per step.")
    st.stop()
s: Scenario = found  # typed as found: what_if() below sees the name, not the None check
idle = measured.get("idle_ms") or 0.0
base = {k: whatif.knob_value(s, k) for k in whatif.KNOBS}
#: η on the slider's 0.01 grid; the prediction keeps the measured η until the slider moves,
#: so that the page's figures equal the report's.
eta_shown = round(base["eta"], 2)
#: A link bandwidth the fit could not tell (one message size: β unknown) has no what-if.
link_known = whatif.link_fitted(s)
#: Widget keys are the run's: a slider set on one run must not carry over to the next.
wk = f"{v.run}:{v.fp}"
#: The measured run on each knob's curve: the same on every slider move.
points = {k: whatif.measured_point(s, k, measured) for k in whatif.KNOBS}


def delta(now: float, then: float, fmt: str) -> str | None:
    """`now - then` formatted, or None when it rounds to nothing."""
    return fmt.format(now - then) if abs(now - then) > 5e-4 else None


@st.fragment
def what_if() -> None:
    """The sliders, the predictions and the curves: a slider move re-runs only this part."""
    st.subheader("What if…")
    a, b, c = st.columns(3)
    knobs: dict[str, float] = {
        "grad_accum": a.slider(whatif.KNOBS["grad_accum"][0], 1, 32, 1, key=f"wi_accum:{wk}"),
    }
    if link_known:
        knobs["link_Bps"] = b.select_slider(
            whatif.KNOBS["link_Bps"][0],
            [base["link_Bps"] * f for f in LINK_FACTORS],
            value=base["link_Bps"],
            format_func=lambda x: f"{x:.3g}",
            key=f"wi_link:{wk}",
        )
    else:
        knobs["link_Bps"] = base["link_Bps"]
        b.caption(whatif.LINK_NOT_FITTED[0].upper() + whatif.LINK_NOT_FITTED[1:] + ".")
    eta = c.slider(whatif.KNOBS["eta"][0], 0.0, 1.0, eta_shown, 0.01, key=f"wi_eta:{wk}")
    knobs["eta"] = base["eta"] if eta == eta_shown else eta
    a, b, _ = st.columns(3)
    if link_known:
        knobs["compression"] = a.select_slider(
            whatif.KNOBS["compression"][0],
            list(COMPRESSION),
            1.0,
            COMPRESSION.get,
            key=f"wi_comp:{wk}",
        )
    else:
        knobs["compression"] = base["compression"]
    knobs["n_nodes"] = b.slider(
        whatif.KNOBS["n_nodes"][0], 2, max(64, 4 * int(base["n_nodes"])), int(base["n_nodes"]),
        key=f"wi_nodes:{wk}",
    )  # fmt: skip

    now = data.whatif_prediction(v.path, v.run, v.fp, tuple(knobs.items()), idle)
    then = data.whatif_prediction(v.path, v.run, v.fp, tuple(base.items()), idle)
    same_batch = knobs["grad_accum"] == base["grad_accum"]
    m1, m2, m3 = st.columns(3)
    m1.metric(
        "Predicted step time",
        fmt_ms(now["step_ms"]),
        delta(now["step_ms"], then["step_ms"], "{:+.3f} ms"),
        # a step of more micro-batches is longer but does more work: not better or worse
        delta_color="inverse" if same_batch else "off",
    )
    m2.metric(
        "Time per micro-batch",
        fmt_ms(now["micro_batch_ms"]),
        delta(now["micro_batch_ms"], then["micro_batch_ms"], "{:+.3f} ms"),
        delta_color="inverse",
    )
    m3.metric(
        "Communication overhead",
        fmt_pct(now["comm_overhead"]),
        delta(100 * now["comm_overhead"], 100 * then["comm_overhead"], "{:+.1f} pts"),
        delta_color="inverse",
    )
    st.markdown(f"**Predicted verdict:** {md(now['verdict'])}. {md(now['reason'])}")
    if not same_batch:
        st.caption(
            f"A step of {knobs['grad_accum']} micro-batches covers {knobs['grad_accum']}× the "
            "samples of one: compare the time per micro-batch."
        )

    st.caption(
        "Each chart: the model's predicted step time (per optimizer step, ms) as one knob "
        "moves, the other knobs as set above; for gradient accumulation the time per "
        "micro-batch, since a step of more micro-batches does more work. ◆ the measured run."
    )
    cols = st.columns(2)
    for i, knob in enumerate(k for k in whatif.KNOBS if link_known or k not in whatif.NEED_LINK):
        others = tuple((k, x) for k, x in knobs.items() if k != knob)
        line = data.whatif_curve(v.path, v.run, v.fp, knob, SWEEPS[knob](base), others, idle)
        label = whatif.KNOBS[knob][0]
        name = label.split(" (")[0]
        point = points[knob]
        y, what = CURVE_Y.get(knob, ("step_ms", "step time"))
        plot(
            line,
            charts.curves,
            (knob, y, point, f"Predicted {what} (ms) by {name}", label, "ms", knob == "link_Bps"),
            f"No prediction to draw for {name}.",
            key=f"whatif_{knob}",
            where=cols[i % 2],
            shape_only=True,  # a slider move changes the curves' rows, not their chart
        )


what_if()
