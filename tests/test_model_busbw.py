"""nccl-tests bus-bandwidth conventions (cost_model.md §4)."""

from __future__ import annotations

import pytest

from commwall.analysis.model.busbw import busbw_factor, ring_steps
from commwall.analysis.model.collectives import Link, Topology, ring


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("allreduce", 8, 1.75),
        ("allreduce", 2, 1.0),
        ("allreduce", 1, 0.0),
        ("reduce_scatter", 8, 0.875),
        ("allgather", 4, 0.75),
        ("alltoall", 16, 0.9375),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
    ],
)
def test_factors(op, n, factor):
    assert busbw_factor(op, n) == factor


def test_a_ring_at_link_bandwidth_b_has_bus_bandwidth_b():
    # the convention's point: a ring all-reduce of 14 GB over 8 ranks on 480 GB/s links takes
    # 2·7/8 · 14 / 480 s = 51.04 ms (hand arithmetic), and factor · S / t gives back 480 GB/s
    t = ring("allreduce", 14e9, Topology(8, Link(480e9))).total_s
    assert t * 1e3 == pytest.approx(51.04, abs=0.01)
    assert busbw_factor("allreduce", 8) * 14e9 / t == pytest.approx(480e9)


def test_ring_steps():
    assert ring_steps("allreduce", 8) == 14
    assert ring_steps("allgather", 8) == 7
    assert ring_steps("broadcast", 8) == 7  # a chain: the first chunk crosses 7 hops
    assert ring_steps("send", 8) == 1


def test_unknown_op():
    with pytest.raises(ValueError):
        busbw_factor("barrier", 8)
