"""Normalised collective operation names from kernel names, c10d names and NCCL log names."""

from __future__ import annotations

import re
from functools import lru_cache

OPS = (
    "allreduce",
    "allgather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "send",
    "recv",
    "barrier",
    "gather",
    "scatter",
)

_ALIASES = {
    "reducescatter": "reduce_scatter",
    "alltoallv": "alltoall",
    "alltoallbase": "alltoall",
    "allgatherintotensor": "allgather",
    "reducescattertensor": "reduce_scatter",
    "allreducecoalesced": "allreduce",
    "allgathercoalesced": "allgather",
    "reducescattertensorcoalesced": "reduce_scatter",
    "allgatherintotensorcoalesced": "allgather",
}

# ncclKernel_<Func>_..., ncclDevKernel_<Func>..., ncclSymDevKernel_/ncclSymkDevKernel_<Func>_...
_MODERN = re.compile(r"^nccl(?:Symk?)?(?:Dev)?Kernel_([A-Za-z]+)")
# NCCL <= 2.7: nccl<Coll><Algo>[LL]Kernel_<op>_<ty>
_LEGACY = re.compile(r"^nccl([A-Z][A-Za-z]*?)(?:Ring|Tree|CollNet)[A-Za-z]*Kernel")
_ALGO = re.compile(
    r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)(?:_|\(|$)"
)
_LEGACY_ALGO = re.compile(r"^nccl[A-Z][A-Za-z]*?(Ring|Tree|CollNet)")


@lru_cache(maxsize=4096)
def normalize_op(name: str | None) -> str:
    """`allreduce`, `allgather`, ... for any spelling (`nccl:_all_gather_base`, `AllReduce`,
    `reduce_scatter_tensor_coalesced`, `gloo:all_reduce`); `unknown` when unrecognised."""
    if not name:
        return "unknown"
    s = name.split(":", 1)[-1].strip().lower()
    s = s.replace("_base", "").replace("_", "")
    if s in _ALIASES:
        return _ALIASES[s]
    for suffix in ("coalesced", "intotensor", "tensor"):
        if s.endswith(suffix) and s[: -len(suffix)] in {o.replace("_", "") for o in OPS}:
            s = s[: -len(suffix)]
    s = _ALIASES.get(s, s)
    for op in OPS:
        if s == op.replace("_", ""):
            return op
    return "unknown"


def kernel_op(kernel_name: str) -> str:
    """The collective a communication kernel runs, from its name alone."""
    m = _MODERN.match(kernel_name) or _LEGACY.match(kernel_name)
    return normalize_op(m.group(1)) if m else "unknown"


def kernel_algo(kernel_name: str) -> str | None:
    """The algorithm the kernel name claims (a hint only: NCCL >= 2.19 prints RING for most)."""
    m = _ALGO.search(kernel_name)
    if m:
        return m.group(1)
    m = _LEGACY_ALGO.match(kernel_name)
    return m.group(1).upper() if m else None
