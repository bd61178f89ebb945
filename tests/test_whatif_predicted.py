"""The what-ifs' prediction (analysis.model.whatif.predicted) against the model's full prediction
(analysis.model.scenario.predict), which it used to call: the same step, τ and verdict for
every algorithm choice and knob setting."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commwall.analysis.model import whatif
from commwall.analysis.model.scenario import calculator, predict
from commwall.analysis.model.step import DEFAULT_TARGET_OVERHEAD, verdict

ALGORITHMS = ("best", "ring", "tree", "nccl")


@settings(max_examples=60, deadline=None)
@given(
    algorithm=st.sampled_from(ALGORITHMS),
    gpus=st.sampled_from([2, 8, 16, 64]),
    gpus_per_node=st.sampled_from([1, 8]),
    link=st.sampled_from(["25Gbps", "100Gbps", "400Gbps"]),
    compute_ms=st.floats(0.5, 500),
    eta=st.floats(0.0, 1.0),
    grad_accum=st.sampled_from([1, 2, 8, 32]),
    compression=st.sampled_from([1.0, 2.0, 4.0]),
    idle_ms=st.floats(0.0, 50.0),
)
def test_predicted_is_the_full_predictions_step(
    algorithm, gpus, gpus_per_node, link, compute_ms, eta, grad_accum, compression, idle_ms
):
    s = calculator(
        "1.5e9",
        "fp32",
        max(gpus, gpus_per_node),
        link,
        gpus_per_node=gpus_per_node,
        compute_s=compute_ms / 1e3,
        eta=eta,
        grad_accum=grad_accum,
        compression=compression,
        algorithm=algorithm,
    )
    full = predict(s)
    st_ = full.step
    assert st_ is not None
    step_ms = st_.step_s * 1e3 + idle_ms * grad_accum  # host gaps: every micro-batch has them
    overhead = st_.exposed_comm_s * 1e3 / step_ms
    got = whatif.predicted(s, idle_ms)
    assert got == {
        "step_ms": step_ms,
        "micro_batch_ms": step_ms / grad_accum,
        "tau_comp_ms": st_.compute_s * 1e3,
        "tau_comm_ms": full.comm_s * 1e3,
        "exposed_comm_ms": st_.exposed_comm_s * 1e3,
        "comm_overhead": overhead,
        **dict(
            zip(
                ("verdict", "reason"),
                verdict(overhead, st_.gamma, eta, DEFAULT_TARGET_OVERHEAD),
                strict=True,
            )
        ),
    }


def test_predicted_needs_compute_time():
    with pytest.raises(ValueError, match="compute time"):
        whatif.predicted(calculator("1e9", "fp32", 8, "100Gbps"))


def test_idle_time_comes_with_every_micro_batch():
    """A host-bound step (idle 8 ms of host gaps beside 1 ms of compute, little to send): more
    micro-batches per optimizer step cannot make one micro-batch faster than its compute and
    its own gaps, 9 ms (the gradient all-reduce is paid once per step and only shrinks)."""
    s = calculator("1e6", "fp32", 8, "100Gbps", compute_s=0.001, eta=0.0)
    one = whatif.predicted(s, idle_ms=8.0)
    for k in (1, 4, 32):
        got = whatif.predicted(whatif.with_knobs(s, {"grad_accum": k}), idle_ms=8.0)
        assert got["micro_batch_ms"] >= 9.0
        assert got["micro_batch_ms"] <= one["micro_batch_ms"] + 1e-9
        assert got["step_ms"] == pytest.approx(k * 9.0 + got["exposed_comm_ms"])
