"""Batched point-to-point calls on GPU traces: one `ncclDevKernel_SendRecv` kernel for a group of
sends and receives (`batch_isend_irecv`), expanded to one collectives row per send or receive.

PyTorch records every op of a coalesced group (`ProcessGroupNCCL` between startCoalescing and
endCoalescing) with its own `record_param_comms` (`Collective name` send / recv, `Dst Rank` /
`Src Rank`, group, sizes), but none of them launches a kernel: the group's single kernel is
launched by endCoalescing's `ncclGroupEnd`, after they have closed, and names no single peer.
So a SendRecv kernel whose launch no send / receive `record_param_comms` encloses carries the
send / receive ops of its launching thread that launched nothing themselves and were recorded
after the thread's previous communication-kernel launch, up to this one. Each becomes a row
with the kernel's times (every op of the group lasts as long as the kernel) and the op's own
op, peer, group, sizes and sequence number. Kernels with no such op are left as they are.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import defaultdict

import numpy as np
import pyarrow as pa

from commwall.ingest.collective_names import kernel_op, normalize_op
from commwall.ingest.dtypes import dtype_size
from commwall.ingest.formats.kineto.comm_args import INT64_MAX, p2p_peer
from commwall.ingest.formats.kineto.events import Args, Event


def _ranks(v: str | list[int] | None) -> str | None:
    if isinstance(v, str):
        try:
            v = json.loads(v) if v.startswith("[") and len(v) < 1 << 20 else None
        except ValueError:
            v = None
    if not isinstance(v, list) or not v or not all(type(x) is int and x >= 0 for x in v):
        return None
    return json.dumps(v)


def _row(base: dict, a: Args) -> dict:
    """The kernel's row `base` as the row of the p2p op with args `a`."""
    n = a.in_nelems if a.in_nelems is not None else a.out_nelems
    size = dtype_size(a.dtype)
    nbytes = n * size if n is not None and size is not None and n * size <= INT64_MAX else None
    return {
        **base,
        "op": normalize_op(a.coll_name),
        "pg_name": None if a.pg_name is None else str(a.pg_name),
        "pg_desc": a.pg_desc,
        "group_size": a.group_size or base["group_size"],
        "seq": a.seq,
        "seq_source": "Seq" if a.seq is not None else None,
        "dtype": a.dtype,
        "in_nelems": n,
        "out_nelems": n,
        "in_bytes": nbytes,
        "out_bytes": nbytes,
        "peer": p2p_peer(a),
        "pg_ranks": _ranks(a.pg_ranks),
    }


def expand(
    table: pa.Table,
    kept: dict[int, Event],
    comm_rows: np.ndarray,
    ts_ns: np.ndarray,
    dur_ns: np.ndarray,
    launch_row: np.ndarray,
    threads: tuple[np.ndarray, np.ndarray],
) -> pa.Table:
    """`table` (one collectives row per `comm_rows` entry, in order) with every batched
    SendRecv kernel replaced by one row per send or receive of its group (see module)."""
    ops: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
    for i, e in kept.items():
        a = e.args
        if e.name != "record_param_comms" or e.cat == "gpu_user_annotation" or a is None:
            continue
        if normalize_op(a.coll_name) in ("send", "recv"):
            t = int(ts_ns[i])
            ops[int(threads[0][i]), int(threads[1][i])].append((t, t + int(dur_ns[i]), i))
    if not ops:
        return table
    launches: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for j, lr in enumerate(launch_row[comm_rows].tolist()):
        if lr >= 0:
            launches[int(threads[0][lr]), int(threads[1][lr])].append((int(ts_ns[lr]), j))
    batches: dict[int, list[Args]] = {}
    for thread, mine in launches.items():
        mine.sort()
        times = [t for t, _ in mine]
        p2p = sorted(ops.get(thread, []))
        # ops that launched a kernel of their own, and launches inside such an op
        inside = {
            k for s, e, _ in p2p for k in range(bisect_left(times, s), bisect_right(times, e))
        }
        free = [(s, e, i) for s, e, i in p2p if bisect_left(times, s) == bisect_right(times, e)]
        starts = [s for s, _, _ in free]
        for k, (t, j) in enumerate(mine):
            if k in inside or kernel_op(kept[int(comm_rows[j])].name or "") != "sendrecv":
                continue
            lo = bisect_right(starts, times[k - 1]) if k else 0
            group = [kept[i].args for s, e, i in free[lo : bisect_right(starts, t)] if e <= t]
            if group:
                batches[j] = [a for a in group if a is not None]
    if not batches:
        return table
    rows = table.to_pylist()
    out = []
    for j, row in enumerate(rows):
        out += [_row(row, a) for a in batches[j]] if j in batches else [row]
    return pa.Table.from_pylist(out, schema=table.schema)
