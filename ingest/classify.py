"""Classification of trace events into compute, comm, memory and other.

Rules (documented in README "How activities are classified"):

* A trace is a **GPU trace** when it holds device events (categories `kernel`, `gpu_memcpy`,
  `gpu_memset`, or legacy `Kernel`, `Memcpy`, `Memset`). Its timeline is the device:
  - a kernel whose name matches the communication regex (default `nccl|rccl`, case-insensitive,
    plus user extras) is **comm**; every other kernel is **compute** (HTA's rule);
  - `gpu_memcpy` and `gpu_memset` are **memory** (HTA counts them apart; TraceLens counts memset
    as compute);
  - everything else (CPU ops, runtime calls, annotations, sync markers) is **other**.
* A trace without device events is a **CPU trace** (e.g. DDP on gloo). Its timeline is the host:
  - host collectives (`gloo:*`, `mpi:*`, `ucc:*` events on any thread) are **comm**;
  - `cpu_op` events on the main thread(s) — the threads that carry `ProfilerStep#N`, else the
    thread whose tid equals the pid — are **compute**, except enqueue and bookkeeping ops
    (`c10d::*`, `record_param_comms`), which are **other**;
  - a blocking wait for a collective on a main thread (`_c10d_functional::wait_tensor`, the
    wait of functional collectives that tensor parallelism and DTensor use) is **comm**: the
    program waits for communication there, it does not compute. An op that encloses such a wait
    on the same thread (DTensor's dispatch wrappers: `PythonSubclass`, the `aten::` op that
    triggered the redistribution) is **other**, so that the wait is not counted as compute; the
    ops it calls keep their own kind. Waits are no collectives of their own (the all-reduce
    they wait for is the `gloo:*` event);
  - a blocking point-to-point call on a main thread (`c10d::send`, `c10d::recv_`, which
    `dist.send` / `dist.recv` issue on gloo) is **comm**, lasting from its start until the
    transfer it issued begins (the next `gloo:send` / `gloo:recv` of the same process starting
    before the thread's next call of that direction; that event is comm itself): the thread is
    blocked there waiting for its peer, and gloo records the transfer only once it starts, so
    that time would otherwise read as idle. Like a wait, it is no collective of its own;
  - everything else is **other**.

Only compute, comm and memory enter the interval metrics.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

COMPUTE, COMM, MEMORY, OTHER = "compute", "comm", "memory", "other"
TIMELINE_KINDS = (COMPUTE, COMM, MEMORY)

DEFAULT_COMM_REGEX = r"nccl|rccl"
HOST_COMM = re.compile(r"^(gloo|mpi|ucc):")
HOST_ENQUEUE = re.compile(r"^(c10d::|record_param_comms$)")
#: A main thread's blocking wait for a collective issued before (functional collectives).
HOST_WAIT = re.compile(r"^_?c10d_functional::wait_tensor$")
#: A main thread's blocking point-to-point call (`dist.send` / `dist.recv` on gloo) and the
#: transfer event the backend records for it, by direction.
HOST_P2P = {"send": re.compile(r"^c10d::send$"), "recv": re.compile(r"^c10d::recv_(any_source_)?$")}
HOST_P2P_TRANSFER = {"send": re.compile(r"^gloo:send$"), "recv": re.compile(r"^gloo:recv$")}

#: Legacy (PyTorch <= 1.9) categories mapped to modern names.
LEGACY_CATS = {
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "Operator": "cpu_op",
    "Runtime": "cuda_runtime",
    "User": "user_annotation",
}
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
MEMORY_CATS = frozenset({"gpu_memcpy", "gpu_memset"})
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})


def comm_regex(extra: Iterable[str] = ()) -> re.Pattern[str]:
    """The communication-kernel regex: the default alternatives plus user `extra` patterns."""
    parts = [DEFAULT_COMM_REGEX, *extra]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


def classify_gpu(cat: str, name: str, comm: re.Pattern[str]) -> str:
    """Kind of an event in a GPU trace."""
    if cat == "kernel":
        return COMM if comm.search(name) else COMPUTE
    if cat in MEMORY_CATS:
        return MEMORY
    return OTHER


def classify_cpu(cat: str, name: str, on_main_thread: bool) -> str:
    """Kind of an event in a CPU trace (an op enclosing a wait aside: see the module)."""
    if HOST_COMM.match(name) or (cat == "cpu_op" and on_main_thread and HOST_WAIT.match(name)):
        return COMM
    if cat == "cpu_op" and on_main_thread and not HOST_ENQUEUE.match(name):
        return COMPUTE
    return OTHER
