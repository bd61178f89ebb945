"""nccl-tests bus-bandwidth conventions (MODEL.md §4)."""

from __future__ import annotations

import pytest

from analysis.model.busbw import busbw_factor, ring_steps


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


def test_nvls_busbw_to_time():
    # MODEL.md §8: 14 GB on one 8×H100 node at NVLS busbw 480 GB/s takes 51 ms
    t = busbw_factor("allreduce", 8) * 14e9 / 480e9
    assert t * 1e3 == pytest.approx(51.04, abs=0.01)


def test_ring_steps():
    assert ring_steps("allreduce", 8) == 14
    assert ring_steps("allgather", 8) == 7
    assert ring_steps("broadcast", 8) == 1


def test_unknown_op():
    with pytest.raises(ValueError):
        busbw_factor("barrier", 8)
