"""What a Kineto trace's args say about each communication activity: the collectives table.

A communication kernel or host call is one row; its op, element counts, dtype, process group,
sequence number, peer (sends and receives) and split sizes (all-to-all) come from its own args,
or on GPU traces that predate them from the host op that launched it (`record_param_comms`,
`nccl:*`); on CPU traces, a `gloo:*` call's peer and split sizes come from the `c10d::*` op
that issued it. Also the loose integer readings of arg values shared with the reader.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import defaultdict
from math import prod

import msgspec
import numpy as np
import pyarrow as pa

from commwall.ingest.collective_names import kernel_algo, kernel_op, normalize_op
from commwall.ingest.dtypes import dtype_size
from commwall.ingest.formats.kineto.events import Args, Event, Id
from commwall.ingest.schema import (
    COLLECTIVES,
)

INT32_MAX, INT64_MAX = (1 << 31) - 1, (1 << 63) - 1
#: The c10d ops that issue a point-to-point call on a CPU trace (their `Concrete Inputs` hold
#: the peer's rank in the process group, third) and the op of the `gloo:*` call they issue.
P2P_OPS = {"c10d::send": "send", "c10d::recv_": "recv"}
#: The c10d op that issues a `gloo:all_to_all` on a CPU trace: its `Concrete Inputs` hold the
#: output and input split sizes (fourth and fifth), its `Input Dims` the output and input.
ALLTOALL_OP = "c10d::alltoall_base_"
MAX_LIST = 1 << 16  # entries of a rank list or split sizes read from an arg (more: not read)


def int_or_none(v: Id) -> int | None:
    """An integer, or a string of at most 18 ASCII digits as one; else None."""
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isascii() and v.lstrip("-").isdigit() and len(v.lstrip("-")) <= 18:
        return int(v)
    return None


def as_int(v: Id) -> int | None:
    return v if type(v) is int else int_or_none(v)


def _raw_list(raw: msgspec.Raw) -> list | None:
    try:
        v = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return v if isinstance(v, list) else None


def _first_tensor(dims: list | None, types: list | None) -> tuple[int | None, str | None]:
    """Elements and dtype of the first tensor input (Input Dims/Input type), if any."""
    if not dims or not isinstance(dims[0], list):
        return None, None
    d = dims[0]
    t = types[0] if types and isinstance(types[0], str) else None
    if not all(isinstance(x, int) and x >= 0 for x in d) or (not d and dtype_size(t) is None):
        return None, None
    n = prod(d)
    return (n, t) if n <= INT64_MAX else (None, None)  # a 0-d tensor (dims []) has one element


NO_ARGS = Args()


class _HostOps:
    """The host-side collective ops (`record_param_comms`, `nccl:*`) per thread, for finding
    the op that encloses a kernel's launch."""

    def __init__(
        self,
        kept: dict[int, Event],
        ts_ns: np.ndarray,
        dur_ns: np.ndarray,
        threads: tuple[np.ndarray, np.ndarray],
    ) -> None:
        rows = [
            i
            for i, e in kept.items()
            if (e.name == "record_param_comms" or (e.name or "").startswith("nccl:"))
            and e.cat != "gpu_user_annotation"
        ]
        idx = np.array(rows, dtype=np.int64)
        per: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
        for i, p, t, s, e in zip(
            rows,
            threads[0][idx].tolist(),
            threads[1][idx].tolist(),
            ts_ns[idx].tolist(),
            (ts_ns[idx] + dur_ns[idx]).tolist(),
            strict=True,
        ):
            per[p, t].append((s, e, i))
        self.per = {k: sorted(v) for k, v in per.items()}
        self.starts = {k: [s for s, _, _ in v] for k, v in self.per.items()}

    def enclosing(self, thread: tuple[int, int], t: int) -> list[int]:
        """Rows of the ops on `thread` that contain time `t`, innermost last."""
        ops = self.per.get(thread)
        if not ops:
            return []
        j = bisect_right(self.starts[thread], t)
        return [i for s, e, i in ops[max(0, j - 8) : j] if s <= t <= e]


def collectives_table(
    kept: dict[int, Event],
    comm_rows: np.ndarray,
    ts_ns: np.ndarray,
    dur_ns: np.ndarray,
    launch_ns: np.ndarray,
    launch_row: np.ndarray,
    threads: tuple[np.ndarray, np.ndarray],
    gpu: bool,
    rank: int,
    world: int | None,
) -> pa.Table:
    """One row per communication activity, with what its args (or, for old GPU traces, the
    host op that launched it) say about op, sizes, process group and sequence number."""
    rows: dict[str, list] = {f.name: [] for f in COLLECTIVES}
    host = _HostOps(kept, ts_ns, dur_ns, threads) if gpu else None
    issuers = None if gpu else _P2pIssuers(kept, ts_ns, threads)
    splits = None if gpu else _alltoall_splits(kept, comm_rows, ts_ns)
    lr = launch_row[comm_rows]
    launcher = np.where(lr >= 0, threads[0][lr], -1).tolist(), threads[1][lr].tolist()
    launched = launch_ns[comm_rows].tolist()
    for k, i in enumerate(comm_rows.tolist()):
        e = kept[i]
        a = e.args or NO_ARGS
        name = e.name or ""
        op = normalize_op(a.coll_name) if a.coll_name else "unknown"
        in_n, out_n, dtype = a.in_nelems, a.out_nelems, a.dtype
        pg_name = None if a.pg_name is None else str(a.pg_name)
        pg_desc, group, seq = a.pg_desc, a.group_size, a.seq
        seq_source = "Seq" if seq is not None else None
        peer = p2p_peer(a)
        pg_ranks, in_splits, out_splits = _ints(a.pg_ranks), _ints(a.in_split), _ints(a.out_split)
        if host is not None:
            thread = (launcher[0][k], launcher[1][k])
            for j in host.enclosing(thread, launched[k]) if thread[0] >= 0 else []:
                h = kept[j]
                ha = h.args or NO_ARGS
                if h.name == "record_param_comms":
                    if op == "unknown" and ha.coll_name:
                        op = normalize_op(ha.coll_name)
                    in_n = in_n if in_n is not None else ha.in_nelems
                    out_n = out_n if out_n is not None else ha.out_nelems
                    dtype = dtype or ha.dtype
                    peer = peer if peer is not None else p2p_peer(ha)
                    pg_ranks = pg_ranks or _ints(ha.pg_ranks)
                    in_splits = in_splits or _ints(ha.in_split)
                    out_splits = out_splits or _ints(ha.out_split)
                    pg_name = pg_name or (None if ha.pg_name is None else str(ha.pg_name))
                    pg_desc = pg_desc or ha.pg_desc
                    group = group or ha.group_size
                    if seq is None and ha.seq is not None:
                        seq, seq_source = ha.seq, "Seq"
                    if seq is None:
                        ci = _raw_list(ha.concrete)
                        ci_seq = int_or_none(ci[1]) if ci and len(ci) == 8 else None
                        if ci_seq is not None and 0 <= ci_seq <= INT64_MAX:
                            seq, seq_source = ci_seq, "concrete_inputs"
                else:  # nccl:<op>
                    if op == "unknown":
                        op = normalize_op(h.name)
                    if in_n is None:
                        n, t = _first_tensor(_raw_list(ha.input_dims), _raw_list(ha.input_type))
                        if n is not None:
                            in_n, dtype = n, dtype or t
            if op == "unknown":
                op = kernel_op(name)
            algo = kernel_algo(name)
        else:
            op = normalize_op(name)
            in_n, dtype = _first_tensor(_raw_list(a.input_dims), _raw_list(a.input_type))
            algo = None
            if issuers is not None and op in ("send", "recv"):
                peer = issuers.peer(op, (int(threads[0][i]), int(threads[1][i])), int(ts_ns[i]))
            if splits is not None and i in splits:
                in_splits, out_splits = splits[i]
        if out_n is None and in_n is not None and op in ("allreduce", "broadcast", "alltoall"):
            out_n = in_n
        group = group or world
        size = dtype_size(dtype)
        rows["op"].append(op)
        rows["name"].append(name)
        rows["pg_name"].append(pg_name)
        rows["pg_desc"].append(pg_desc)
        rows["group_size"].append(group)
        rows["seq"].append(seq)
        rows["seq_source"].append(seq_source)
        rows["dtype"].append(dtype)
        rows["in_nelems"].append(in_n)
        rows["out_nelems"].append(out_n)
        rows["in_bytes"].append(_bytes(in_n, size))
        rows["out_bytes"].append(_bytes(out_n, size))
        rows["algo"].append(algo)
        rows["stream"].append(a.stream)
        rows["peer"].append(peer if op in ("send", "recv") else None)
        rows["pg_ranks"].append(pg_ranks)
        rows["in_splits"].append(in_splits if op == "alltoall" else None)
        rows["out_splits"].append(out_splits if op == "alltoall" else None)
    columns: dict[str, list | np.ndarray] = {
        **rows,
        "rank": np.full(len(comm_rows), rank, np.int32),
        "ts": ts_ns[comm_rows],
        "dur": dur_ns[comm_rows],
        "launch_ts": launch_ns[comm_rows],
    }
    return pa.table(columns, schema=COLLECTIVES)


def p2p_peer(a: Args) -> int | None:
    """The peer of a send or receive from a host op's or kernel's args (`Dst Rank` for a send,
    `Src Rank` for a receive: only one of them is present); None when absent or no rank."""
    for v in (a.dst_rank, a.src_rank):
        n = as_int(v)
        if n is not None and 0 <= n <= INT32_MAX:
            return n
    return None


class _P2pIssuers:
    """The `c10d::send` / `c10d::recv_` ops of a CPU trace per thread: the op that issued a
    `gloo:send` / `gloo:recv` is the latest of its kind on the same thread that starts at or
    before it (the transfer starts inside the op, and may outlast it)."""

    def __init__(
        self, kept: dict[int, Event], ts_ns: np.ndarray, threads: tuple[np.ndarray, np.ndarray]
    ) -> None:
        per: dict[tuple[str, int, int], list[tuple[int, int]]] = defaultdict(list)
        for i, e in kept.items():
            op = P2P_OPS.get(e.name or "")
            if op is not None:
                per[op, int(threads[0][i]), int(threads[1][i])].append((int(ts_ns[i]), i))
        self.kept = kept
        self.per = {k: sorted(v) for k, v in per.items()}
        self.starts = {k: [t for t, _ in v] for k, v in self.per.items()}

    def peer(self, op: str, thread: tuple[int, int], t: int) -> int | None:
        """The peer named by the op issuing the `op` call of `thread` that starts at `t`."""
        key = (op, *thread)
        j = bisect_right(self.starts.get(key, []), t)
        if not j:
            return None
        ci = _raw_list((self.kept[self.per[key][j - 1][1]].args or NO_ARGS).concrete)
        n = int_or_none(ci[2]) if ci and len(ci) >= 3 else None
        return n if n is not None and 0 <= n <= INT32_MAX else None


def _ints(v: str | list[int] | None) -> str | None:
    """A list of non-negative integers (a JSON list, or its text as Kineto writes
    `Process Group Ranks` and split sizes: "[0, 1]") as JSON text; None when absent, empty
    ("[]": an even split), longer than MAX_LIST, or anything else."""
    if isinstance(v, str):
        if not v.startswith("[") or len(v) > 16 * MAX_LIST:
            return None
        try:
            v = msgspec.json.decode(v)
        except msgspec.DecodeError:
            return None
    if not isinstance(v, list) or not v or len(v) > MAX_LIST:
        return None
    if not all(type(x) is int and 0 <= x <= INT64_MAX for x in v):
        return None
    return json.dumps(v)


def _alltoall_splits(
    kept: dict[int, Event], comm_rows: np.ndarray, ts_ns: np.ndarray
) -> dict[int, tuple[str | None, str | None]] | None:
    """On a CPU trace, the split sizes (input, output) of each `gloo:all_to_all` row from the
    `c10d::alltoall_base_` that issued it: the k-th issuing op in time order issued the k-th
    call. Only when the counts agree and every pair's shapes do (the call's first tensor is the
    op's output or input); else None."""
    ops = sorted((int(ts_ns[i]), i) for i, e in kept.items() if e.name == ALLTOALL_OP)
    calls = sorted(
        (int(ts_ns[i]), i) for i in comm_rows.tolist() if kept[i].name == "gloo:all_to_all"
    )
    if not calls or len(ops) != len(calls):
        return None
    out = {}
    for (_, o), (_, c) in zip(ops, calls, strict=True):
        oa, ca = kept[o].args or NO_ARGS, kept[c].args or NO_ARGS
        dims, ci = _raw_list(oa.input_dims), _raw_list(oa.concrete)
        mine = _raw_list(ca.input_dims)
        if not dims or len(dims) < 2 or not mine or mine[0] not in dims[:2]:
            return None
        if not ci or len(ci) < 5:
            return None
        out[c] = (_ints(ci[4]), _ints(ci[3]))  # input_split_sizes, output_split_sizes
    return out


def _bytes(nelems: int | None, size: int | None) -> int | None:
    """Bytes of `nelems` elements of `size` bytes; None when unknown or beyond int64."""
    if nelems is None or size is None or not 0 <= nelems * size <= INT64_MAX:
        return None
    return nelems * size
