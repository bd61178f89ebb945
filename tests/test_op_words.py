"""Collectives named in words (analysis/op_words.py): the store's names and PyTorch's spellings
as Flight Recorder dumps and traces give them."""

import pytest

from commwall.analysis.op_words import op_words


@pytest.mark.parametrize(
    "op,want",
    [
        ("allreduce", "all-reduce"),
        ("all_reduce", "all-reduce"),
        ("gloo:all_reduce", "all-reduce"),
        ("nccl:all_gather", "all-gather"),
        ("_allgather_base", "all-gather"),
        ("all_gather_into_tensor_coalesced", "all-gather"),
        ("reduce_scatter_tensor", "reduce-scatter"),
        ("_reduce_scatter_base", "reduce-scatter"),
        ("reduce", "reduce"),
        ("all_to_all", "all-to-all"),
        ("alltoall_base", "all-to-all"),
        ("recv", "receive"),
        ("sendrecv", "send/receive"),
        ("barrier", "barrier"),
        ("scatter", "scatter"),  # unknown: as given
    ],
)
def test_op_words(op, want):
    assert op_words(op) == want
