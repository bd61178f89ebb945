"""Collectives named in words: `all-reduce` for the store's `allreduce` and for PyTorch's
`all_reduce`, `gloo:all_reduce`, `_allgather_base` or `reduce_scatter_tensor` as a Flight
Recorder dump or a trace gives them."""

from __future__ import annotations

#: How an op of the store (ingest's normalized names) is named in words.
OP_WORDS = {
    "allreduce": "all-reduce",
    "allgather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "alltoall": "all-to-all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "send": "send",
    "recv": "receive",
    "sendrecv": "send/receive",
    "barrier": "barrier",
}

#: PyTorch's spellings by their first word (underscores removed): the store's name.
_PREFIXES = (
    ("allreduce", "allreduce"),
    ("allgather", "allgather"),
    ("reducescatter", "reduce_scatter"),
    ("alltoall", "alltoall"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
    ("sendrecv", "sendrecv"),
    ("send", "send"),
    ("recv", "recv"),
    ("barrier", "barrier"),
)


def op_words(op: str) -> str:
    """`op` in words ("all-reduce"); an op it does not know is returned as given."""
    key = op.rsplit(":", 1)[-1].strip().lower().replace("_", "")
    for prefix, name in _PREFIXES:
        if key.startswith(prefix):
            return OP_WORDS[name]
    return op
