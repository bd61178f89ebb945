"""NCCL Inspector: the whole run, not a profiled window (the `inspector` section): bus
bandwidth over time with its change points, who was last (ranks × time), stragglers, slow
hosts, lost records, and the run's traces and nccl-tests set beside it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from commwall.dashboard import inspector_charts, session
from commwall.dashboard.inspector_text import (
    bandwidth_frames,
    baseline_frame,
    comm_label,
    grid_frame,
    loss_frame,
    slow_host_frame,
    straggler_frame,
    summary_line,
)
from commwall.dashboard.ui import md, missing, plot, table

UPLOAD_INSPECTOR = (
    "Upload NCCL Inspector output of the run (one file per process): run the job with "
    "`NCCL_PROFILER_PLUGIN` pointing at `libnccl-profiler-inspector.so`, "
    "`NCCL_INSPECTOR_ENABLE=1` and a dump interval "
    "(`NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=10000000`), then upload the files of "
    "`NCCL_INSPECTOR_DUMP_DIR`."
)

v = session.current_run()
st.header(f"Inspector: NCCL over the whole run — {md(v.run)}")
s = v.report.get("inspector")
if not isinstance(s, dict) or not s.get("present"):
    missing("NCCL Inspector output", UPLOAD_INSPECTOR)
    st.stop()

st.caption(md(summary_line(s)))
findings = s.get("findings") or []
st.markdown("\n".join(f"- {md(f)}" for f in findings) or "Nothing unusual found.")

comms = s.get("communicators") or []
if comms:
    changed = {b["comm_id"] for b in s.get("bandwidth") or [] if b["changes"]}
    flagged = {x["comm_id"] for x in s.get("stragglers") or []}
    order = sorted(comms, key=lambda c: (c["comm_id"] not in changed | flagged,
                                         -(c["n_ranks"] or 0)))  # fmt: skip
    labels = {c["comm_id"]: comm_label(c) for c in order}
    pick = st.selectbox(
        "Communicator",
        list(labels),
        format_func=lambda cid: labels[cid],
        key=f"inspector_comm:{v.run}",
    )

    st.subheader("Bus bandwidth over time")
    lines, changes = bandwidth_frames(s, pick)
    plot(
        lines,
        inspector_charts.bandwidth_over_time,
        (changes,),
        "No collective of this communicator was recorded.",
        key="inspector_bandwidth",
    )
    st.caption(
        "Per minute, the median over the minute's instances of the bus bandwidth of the rank "
        "that did not wait (per-minute aggregates where no instance was kept); dashed red lines "
        "mark the change points."
    )

    st.subheader("Who was last")
    grid = grid_frame(s, pick)
    plot(
        grid,
        inspector_charts.last_heatmap,
        (),
        "No instance of this communicator named a last rank (one rank, ties, or not drawn: "
        "the page draws the communicators with a straggler first, then the largest).",
        key="inspector_last",
    )

    st.subheader("Stragglers")
    frame = straggler_frame(s)
    if frame.empty:
        st.caption("No rank was last in most instances of any period.")
    else:
        table(frame, key="inspector_stragglers")

    st.subheader("Slow hosts")
    frame = slow_host_frame(s)
    if frame.empty:
        st.caption("No host is common to every communicator whose bandwidth fell.")
    else:
        table(frame, key="inspector_slow_hosts")

    st.subheader("Lost records")
    losses = s.get("losses") or {}
    st.markdown(md(losses.get("sentence") or "Nothing is known of lost records."))
    frame = loss_frame(s)
    if not frame.empty:
        table(frame, key="inspector_losses")

    st.subheader("With the rest of the run")
    joined = [x for x in ((s.get("join") or {}).get("sentence"),
                          (s.get("traced_window") or {}).get("sentence")) if x]  # fmt: skip
    st.markdown("\n".join(f"- {md(x)}" for x in joined) or "No trace, log or dump of the run "
                "to set the Inspector beside.")  # fmt: skip
    frame = baseline_frame(s)
    if frame.empty:
        st.caption("No nccl-tests result of the same collective, ranks and size in the run.")
    else:
        table(frame, key="inspector_baseline")

prom = s.get("prometheus") or []
if prom:
    st.subheader("Prometheus textfiles (the last dump interval)")
    table(
        pd.DataFrame(
            [
                {
                    "communicator": b["comm_name"],
                    "collective": b["op"],
                    "message size": b["message_size"],
                    "algorithm and protocol": b["algo_proto"],
                    "GPUs": b["n_gpus"],
                    "median bus bandwidth (GB/s)": b["busbw_median"],
                    "least (GB/s)": b["busbw_min"],
                    "on node": b["slowest_node"],
                    "GPU": b["slowest_gpu"],
                }
                for b in prom
            ]
        ),
        key="inspector_prometheus",
    )
