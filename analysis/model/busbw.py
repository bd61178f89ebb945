"""nccl-tests bandwidth conventions (docs/model.md): algbw = S / t, busbw = algbw × factor.

S is the per-rank buffer for all-reduce, broadcast and reduce, and the total bytes for
reduce-scatter, all-gather and all-to-all. GB/s are decimal.
"""

from __future__ import annotations


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor of `op` on `n` ranks: all-reduce 2(n−1)/n; reduce-scatter,
    all-gather, all-to-all (n−1)/n; broadcast, reduce and point-to-point 1."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("reduce_scatter", "allgather", "alltoall"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "send", "recv", "sendrecv"):
        return 1.0
    raise ValueError(f"no bus-bandwidth factor for {op!r}")


def ring_steps(op: str, n: int) -> int:
    """Latency-bearing steps of `op` on a ring of `n` ranks: all-reduce 2(n−1); reduce-scatter,
    all-gather, all-to-all, and broadcast and reduce (a pipelined chain whose first chunk
    crosses every hop) n−1; point-to-point 1."""
    busbw_factor(op, n)  # validates op
    if op == "allreduce":
        return 2 * (n - 1)
    return 1 if op in ("send", "recv", "sendrecv") else n - 1
