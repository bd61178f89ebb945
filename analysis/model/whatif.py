"""What-ifs on a calibrated run (analysis.model.section.run_scenario): predicted step time and
communication overhead as knobs move, as curves, with the measured run as a point on them.

Step times include the run's measured idle time, as the `model` section's prediction does,
so that the unchanged scenario predicts the measured step. Idle time is host, input and launch
gaps (waiting for a late rank is exposed communication, not idle), which every micro-batch has
again: with k micro-batches per step the step holds k times the run's idle time (the run's
scenario has one micro-batch per step). Counted once per optimizer step, a host-bound run
(DLRM: idle 53% of its step) would be predicted 6.7x faster per micro-batch at 32 micro-batches,
the opposite of its diagnosis. Knob values are given and returned
in display units (link bandwidth in GB/s); times in ms.
"""

from __future__ import annotations

import math

import pandas as pd

from commwall.analysis.model.scenario import Scenario, comm_time, vary
from commwall.analysis.model.step import DEFAULT_TARGET_OVERHEAD, step_model, verdict

#: Knobs: key of analysis.model.scenario.vary → (label, display unit per model unit).
KNOBS: dict[str, tuple[str, float]] = {
    "grad_accum": ("gradient accumulation (micro-batches per step)", 1.0),
    "link_Bps": ("link bandwidth (GB/s, fitted bus bandwidth)", 1e-9),
    "eta": ("overlap η", 1.0),
    "compression": ("gradient compression (× fewer bytes)", 1.0),
    "n_nodes": ("nodes (ranks in the ring)", 1.0),
}


def link_fitted(s: Scenario) -> bool:
    """Whether the run's fit told its link bandwidth (β): not when its collectives have one
    message size, where bandwidth and latency cannot be told apart. Without it, no what-if on
    the bandwidth or on the bytes sent (compression) means anything."""
    bw = s.topology.net.bandwidth_Bps
    return math.isfinite(bw) and bw > 0


#: Knobs whose what-ifs need the link bandwidth fitted (`link_fitted`).
NEED_LINK = ("link_Bps", "compression")
#: Why such a what-if is not given, in words.
LINK_NOT_FITTED = (
    "link bandwidth not fitted (the run's collectives have one message size, so bandwidth and "
    "latency cannot be told apart): no what-if on the bandwidth or the bytes sent"
)


def knob_value(s: Scenario, knob: str) -> float:
    """The value of `knob` in scenario `s`, in display units."""
    t = s.topology
    model = {
        "grad_accum": s.grad_accum,
        "link_Bps": t.net.bandwidth_Bps,
        "eta": s.eta,
        "compression": s.compression,
        "n_nodes": t.n_nodes,
    }[knob]
    return model * KNOBS[knob][1]


def with_knobs(s: Scenario, values: dict[str, float]) -> Scenario:
    """`s` with each knob of `values` (display units) set."""
    for knob, v in values.items():
        s = vary(s, knob, v / KNOBS[knob][1])
    return s


def predicted(s: Scenario, idle_ms: float = 0.0) -> dict:
    """step_ms (compute + exposed communication + idle, per optimizer step; `idle_ms` is per
    micro-batch, so the step holds `s.grad_accum` of it), micro_batch_ms
    (step_ms over the step's grad_accum micro-batches: the time per sample's worth of work, fair
    across gradient accumulation), tau_comp_ms, tau_comm_ms, exposed_comm_ms, comm_overhead
    (exposed / step), verdict and reason.

    The step model of `analysis.model.scenario.predict` from the chosen algorithm's τ_comm
    alone: a slider move recomputes tens of these, and predict's other parts (every NCCL
    algorithm, the bisection for the bandwidth that meets the target) are not shown."""
    if s.compute_s is None:
        raise ValueError("the scenario has no compute time")
    comm_s = comm_time(s)
    st = step_model(s.compute_s, comm_s, s.eta, s.grad_accum, s.target_overhead)
    step_ms = st.step_s * 1e3 + idle_ms * s.grad_accum
    overhead = st.exposed_comm_s * 1e3 / step_ms if step_ms else 0.0
    v, reason = verdict(overhead, st.gamma, s.eta, DEFAULT_TARGET_OVERHEAD)
    return {
        "step_ms": step_ms,
        "micro_batch_ms": step_ms / s.grad_accum,
        "tau_comp_ms": st.compute_s * 1e3,
        "tau_comm_ms": comm_s * 1e3,
        "exposed_comm_ms": st.exposed_comm_s * 1e3,
        "comm_overhead": overhead,
        "verdict": v,
        "reason": reason,
    }


def curve(s: Scenario, knob: str, values: list[float], idle_ms: float = 0.0) -> pd.DataFrame:
    """One row per value of `knob` (display units) with `predicted`'s columns."""
    rows = [{knob: v, **predicted(with_knobs(s, {knob: v}), idle_ms)} for v in values]
    return pd.DataFrame(rows)


def measured_point(s: Scenario, knob: str, measured: dict) -> pd.DataFrame:
    """The measured run on the `knob` axis: its knob value, step_ms, micro_batch_ms (step_ms
    over the run's grad_accum) and comm_overhead (from the `model` section's `measured` dict)."""
    step = measured.get("step_ms")
    return pd.DataFrame(
        [
            {
                knob: knob_value(s, knob),
                "step_ms": step,
                "micro_batch_ms": None if step is None else step / s.grad_accum,
                "comm_overhead": measured.get("comm_overhead"),
                "series": "measured run",
            }
        ]
    )
