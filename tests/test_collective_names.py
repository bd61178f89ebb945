"""Collective op and algorithm from NCCL kernel names of every era, and op-name spellings."""

from __future__ import annotations

import pytest

from commwall.ingest.classify import comm_regex
from commwall.ingest.collective_names import kernel_algo, kernel_op, normalize_op

KERNELS = [
    # (name, op, algo) — one per NCCL naming era (stragglers.md §7)
    ("ncclAllReduceRingLLKernel_sum_f32", "allreduce", "RING"),
    ("ncclBroadcastTreeKernel_sum_i8", "broadcast", "TREE"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "allreduce", "RING"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "sendrecv", "RING"),
    ("ncclKernel_ReduceScatter_COLLNET_DIRECT_LL_Sum_half(ncclDevComm*, unsigned long, ncclWork*)", "reduce_scatter", "COLLNET_DIRECT"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce", "RING"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allgather", "RING"),
    ("ncclDevKernel_AllReduce_Sum_f32_TREE_LL", "allreduce", "TREE"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "sendrecv", None),
    ("ncclSymDevKernel_AllReduce_AGxLL_R_sum_bf16", "allreduce", None),
    ("ncclSymkDevKernel_AllGather_LLMC", "allgather", None),
]  # fmt: skip


@pytest.mark.parametrize("name,op,algo", KERNELS)
def test_kernel_names(name, op, algo):
    assert kernel_op(name) == op
    assert kernel_algo(name) == algo
    assert comm_regex().search(name)


SPELLINGS = [
    ("nccl:all_reduce", "allreduce"),
    ("nccl:_all_gather_base", "allgather"),
    ("_allgather_base", "allgather"),
    ("nccl:_reduce_scatter_base", "reduce_scatter"),
    ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
    ("all_to_allv", "alltoall"),
    ("nccl:all_to_all", "alltoall"),
    ("gloo:all_reduce", "allreduce"),
    ("allreduce_coalesced", "allreduce"),
    ("nccl:send", "send"),
    ("barrier", "barrier"),
    ("ReduceScatter", "reduce_scatter"),
    ("aten::mm", "unknown"),
    (None, "unknown"),
]


@pytest.mark.parametrize("name,op", SPELLINGS)
def test_op_spellings(name, op):
    assert normalize_op(name) == op


def test_comm_regex_extras_and_non_comm():
    assert not comm_regex().search("volta_sgemm_128x64_nn")
    extra = comm_regex(["cross_device_reduce", "deep_ep::"])
    assert extra.search("cross_device_reduce_1stage<bf16>") and extra.search("deep_ep::dispatch")
