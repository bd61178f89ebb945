"""Collectives: size against transfer time, busbw against the link's peak, the step by dimension,
the pipeline's stages along a step, algorithm/protocol."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from commwall.analysis.collectives.instances import matching_sentence
from commwall.analysis.nccl.links import LINK_PEAKS_GBPS
from commwall.analysis.steps.dimension import dimension_sentence
from commwall.analysis.units import NS_PER_MS
from commwall.dashboard import charts, data, session
from commwall.dashboard.dimension_chart import dimension_bars, dimension_frame
from commwall.dashboard.pipeline_chart import pipeline_bars, pipeline_frame, stage_label
from commwall.dashboard.ui import md, missing, nccl_hint, plot, table, traces_hint

#: What a point of the scatters carries (its tooltip).
POINT_COLUMNS = ["op", "step", "instance", "bytes", "transfer_ms", "busbw_GBps", "last_rank"]
PEAK_KEY = "link_peak_gbps"  # plain session key: kept when the widget's page is not shown
#: The link chosen, in a plain session key as well: Streamlit drops a widget's own state when
#: its page is not shown, and the picker would come back "not set" and clear the peak.
PICK_KEY = "link_peak_pick"

v = session.current_run()
st.header(f"Collectives — {md(v.run)}")

choices = ["not set", *LINK_PEAKS_GBPS, "other…"]
saved = st.session_state.get(PICK_KEY)
pick = st.selectbox(
    "Link peak (achievable busbw)",
    choices,
    index=choices.index(saved) if saved in choices else 0,
    key="peak_pick",
)
st.session_state[PICK_KEY] = pick
if pick == "other…":
    st.session_state[PEAK_KEY] = st.number_input(
        "Peak GB/s", min_value=0.1, value=st.session_state.get(PEAK_KEY) or 50.0, key="peak_custom"
    )
elif pick is not None and pick in LINK_PEAKS_GBPS:
    st.session_state[PEAK_KEY] = LINK_PEAKS_GBPS[pick]
else:
    st.session_state[PEAK_KEY] = None
peak = st.session_state[PEAK_KEY]

section = v.report.get("collectives")
if not isinstance(section, dict):  # absent, or not available on this run
    section = {}
ops = section.get("ops")
st.subheader("Per operation")
if ops:
    table(pd.DataFrame(ops), key="collectives_per_op")
    m = section.get("matching") or {}
    st.caption(f"Collective {matching_sentence(m)}. Times in ms, bandwidths in GB/s (10⁹ B/s).")
else:
    missing("Per-operation collective statistics", traces_hint(v.report))

inst = data.collective_table(v.path, v.run, v.fp, "instances")
needed = {"op", "bytes", "transfer_ns", "busbw_GBps"}
if inst is None or inst.empty or not needed <= set(inst.columns):
    missing("Matched collective instances", traces_hint(v.report))
else:
    pts = inst[(inst["transfer_ns"] > 0) & (inst["bytes"] > 0)]
    # the report's own rules: a hung instance's time is its wait until the timeout, not a
    # transfer, and a bandwidth is drawn only where the per-op medians would count it
    left_out = int((~pts["has_transfer"].fillna(False).astype(bool)).sum())
    pts = pts[pts["has_transfer"].fillna(False).astype(bool)]
    pts = pts.assign(transfer_ms=pts["transfer_ns"] / NS_PER_MS)
    trusted = pts["trusted_bw"].fillna(False).astype(bool) & (pts["busbw_GBps"] > 0)
    bws = pts[trusted][[c for c in POINT_COLUMNS if c in pts.columns]]
    pts = pts[[c for c in POINT_COLUMNS if c in pts.columns]]
    left, right = st.columns(2)
    plot(
        pts,
        charts.scatter_loglog,
        (
            "bytes",
            "transfer_ms",
            "op",
            "Transfer time by message size (ms)",
            "message size (bytes)",
            "transfer (ms)",
        ),
        "No matched collective has both a message size and a transfer time to draw.",
        key="collective_size_time",
        where=left,
    )
    plot(
        bws,
        charts.scatter_loglog,
        (
            "bytes",
            "busbw_GBps",
            "op",
            "Bus bandwidth by message size (GB/s)",
            "message size (bytes)",
            "busbw (GB/s)",
            (peak, f"link peak {peak:g} GB/s") if peak else None,
        ),
        "No matched collective has a bus bandwidth to draw (it needs message sizes).",
        key="collective_busbw",
        where=right,
    )
    st.caption(
        "Transfer = end − last rank's start (waiting for late peers excluded); busbw uses the "
        "nccl-tests factors. Points far below the peak at large sizes point at the network."
        + (
            f" {left_out} instance(s) whose time is no transfer are not drawn, as the per-op "
            "figures leave them out: seen on one rank only, or never joined by a rank the run "
            "traced (a hang: the others waited there until the timeout)."
            if left_out
            else ""
        )
    )

st.subheader("The step by dimension")
dims = v.report.get("dimensions")
if isinstance(dims, dict) and dims.get("run"):
    plot(
        dimension_frame(dims["run"]),
        dimension_bars,
        ("Exposed communication by parallelism dimension (ms per step)",),
        "No exposed communication to split by dimension.",
        key="dimension_bars",
    )
    sentence = dimension_sentence(v.report)
    total = dims.get("exposed_comm_ms")
    st.caption(
        (f"{md(sentence[0].upper() + sentence[1:])}. " if sentence else "")
        + (f"Together {total:.2f} ms per step of exposed communication. " if total else "")
        + "Each collective's dimension is its process group's role, from the group's name, "
        "else from what its calls do; time two dimensions share is split between them."
    )
    groups = dims.get("groups") or []
    if groups:
        table(
            pd.DataFrame(
                {
                    "Process group": [g.get("pg_name") or "whole world" for g in groups],
                    "Description": [g.get("pg_desc") or "" for g in groups],
                    "Calls": [g.get("n_calls") for g in groups],
                    "Role": [g.get("role") for g in groups],
                    "Role from": [
                        {"name": "its name", "structure": "its calls"}.get(g.get("source"), "—")
                        for g in groups
                    ],
                }
            ),
            key="dimension_groups",
        )
    ep = dims.get("ep") or {}
    if ep.get("available"):
        st.caption(
            f"Expert-parallel all-to-alls: rank {ep['top_receiver']} receives the most, "
            f"{ep['top_receiver_over_mean']:.2f}× the mean rank; the busiest rank pair carries "
            f"{ep['pair_max_over_mean']:.2f}× the mean pair."
        )
else:
    missing("The step by dimension", traces_hint(v.report))

pipeline = v.report.get("pipeline")
if isinstance(pipeline, dict) and pipeline.get("available") and pipeline.get("pipelines"):
    st.subheader("Pipeline")
    if pipeline.get("sentence"):
        st.caption(md(pipeline["sentence"]))
    chains = pipeline["pipelines"]
    wk = f"{v.run}:{v.fp}"  # widget keys are the run's: a choice on one run is not the next's
    left, right = st.columns([1, 1])
    which = left.selectbox(
        "Pipeline",
        range(len(chains)),
        format_func=lambda i: "ranks " + " → ".join(str(r) for r in chains[i]["ranks"]),
        key=f"pipeline_pick:{wk}",
    )
    chain = chains[which or 0]
    pp_steps = sorted({int(r["step"]) for r in v.report.get("steps") or []})
    pp_step = None
    if pp_steps:
        pp_step = right.selectbox(
            "Step", pp_steps, index=len(pp_steps) // 2, key=f"pipeline_step:{wk}"
        )
    if pp_step is not None:
        rows = data.pipeline_timeline(v.path, v.run, v.fp, int(pp_step), tuple(chain["ranks"]))
        plot(
            pipeline_frame(rows),
            pipeline_bars,
            (
                [stage_label(i, r) for i, r in enumerate(chain["ranks"])],
                f"Step {pp_step}: each stage's compute, transfers and waiting (ms)",
                "ms since the step began (earliest rank, aligned clock)",
            ),
            f"No compute, sends or receives of these stages in step {pp_step}.",
            key="pipeline_chart",
        )
    stages = chain["stages"]
    table(
        pd.DataFrame(
            {
                "Stage": [s["stage"] for s in stages],
                "Rank": [s["rank"] for s in stages],
                "Compute (ms per step)": [s["compute_ms"] for s in stages],
                "Waiting for a neighbour (ms per step)": [s["wait_ms"] for s in stages],
                "Receiving (ms per step)": [s["transfer_ms"] for s in stages],
            }
        ),
        key="pipeline_stages",
    )
    st.caption(
        "Stages in pipeline order (stage 0 sends first). Per step, medians over steps: compute "
        "time; waiting for a neighbour, the pipeline's bubble (a receive before its send was "
        "issued, a send before its receive was posted); receiving, the receives' time after "
        "their send was issued."
    )
    fixes = [
        ("As measured", chain.get("step_ms")),
        ("Stages balanced (replayed)", chain.get("balanced_step_ms")),
        ("Twice the micro-batches (replayed)", chain.get("micro_batches_2m_step_ms")),
        ("Twice the micro-batches (bubble formula)", chain.get("micro_batches_2m_formula_step_ms")),
    ]
    fixes = [(k, x) for k, x in fixes if x is not None]
    if len(fixes) > 1:
        table(
            pd.DataFrame({"Pipeline": [k for k, _ in fixes], "Step (ms)": [x for _, x in fixes]}),
            key="pipeline_whatifs",
        )
        st.caption(
            "The step of this pipeline as measured and under each change: replayed over the "
            "measured schedule (each micro-batch split in two for twice the micro-batches), "
            "beside the bubble formula (p − 1)/(m + p − 1) applied to the measured step."
        )

st.subheader("Algorithm and protocol")
backends = (v.report.get("run_info") or {}).get("backends") or []
chosen = data.run_table(v.path, v.run, v.fp, "nccl_algorithm_choices")
hints = data.run_table(v.path, v.run, v.fp, "collective_algorithms")
if chosen is not None and not chosen.empty:
    table(chosen, key="nccl_algorithms")
    st.caption("NCCL's own choices, from its TUNING log lines.")
elif backends and "nccl" not in backends:
    st.caption(
        f"The run's collectives ran on {md(', '.join(backends))}: there is no algorithm or "
        "protocol choice of NCCL's to show."
    )
elif hints is not None and not hints.empty:
    table(hints, key="kernel_algorithms")
    st.caption(
        "From kernel names only (a hint). NCCL's own choice is in its TUNING log lines: "
        "log with NCCL_DEBUG_SUBSYS=TUNING."
    )
else:
    missing("NCCL's algorithm and protocol choice", nccl_hint(v.report))
