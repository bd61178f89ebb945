"""The shapes of NCCL Inspector JSON lines (plugins/profiler/inspector/inspector_json.cc of
NVIDIA/nccl), decoded by msgspec: unknown fields are ignored, missing optional ones default,
a field of the wrong type is an error naming it."""

from __future__ import annotations

import msgspec


class Header(msgspec.Struct):
    """`header`: the communicator as one rank sees it."""

    id: str
    rank: int
    n_ranks: int
    nnodes: int = 0
    comm_name: str | None = None


class Metadata(msgspec.Struct):
    """`metadata`: the writing process and the format version."""

    inspector_output_format_version: str
    dump_timestamp_us: int
    hostname: str | None = None
    pid: int | None = None


class DumpStats(msgspec.Struct):
    """`dump_stats` (v4.1 on): records written by one communicator dump and ring losses."""

    coll_records: int = 0
    coll_dropped_total: int = 0
    coll_dropped_since_last_dump: int = 0
    p2p_records: int = 0
    p2p_dropped_total: int = 0
    p2p_dropped_since_last_dump: int = 0
    proxy_records: int = 0
    proxy_dropped_total: int = 0
    proxy_dropped_since_last_dump: int = 0
    proxy_ops_dropped_total: int = 0
    proxy_ops_dropped_since_last_dump: int = 0


class KernelTs(msgspec.Struct):
    """One channel of `event_trace_ts.kernel_events` (µs)."""

    kernel_start_ts: int = 0
    kernel_stop_ts: int = 0


class CollTs(msgspec.Struct):
    """`coll_perf.event_trace_ts` (verbose output, µs)."""

    coll_start_ts: int = 0
    kernel_events: list[KernelTs] = []


class P2pTs(msgspec.Struct):
    """`p2p_perf.event_trace_ts` (verbose output, µs)."""

    p2p_start_ts: int = 0
    kernel_events: list[KernelTs] = []


class CollPerf(msgspec.Struct):
    """`coll_perf`: one completed collective on one rank."""

    coll: str
    coll_sn: int
    coll_msg_size_bytes: int
    coll_exec_time_us: int
    coll_algo: str = "unknown"
    coll_proto: str = "unknown"
    coll_timing_source: str | None = None
    coll_algobw_gbs: float = 0.0
    coll_busbw_gbs: float = 0.0
    event_trace_ts: CollTs | None = None


class P2pPerf(msgspec.Struct):
    """`p2p_perf`: one completed send or receive on one rank."""

    p2p: str
    p2p_sn: int
    p2p_msg_size_bytes: int
    p2p_exec_time_us: int
    p2p_peer: int = -1
    p2p_timing_source: str | None = None
    p2p_algobw_gbs: float = 0.0
    p2p_busbw_gbs: float = 0.0
    event_trace_ts: P2pTs | None = None


class ProxyTrace(msgspec.Struct):
    """`proxy_trace`: one completed ProxyOp or ProxyStep (CPU proxy-thread timing)."""

    record_type: str
    parent_sn: int = 0
    peer: int = -1
    direction: str | None = None
    trans_size_bytes: int = 0
    event_trace_ts: dict[str, int] | None = None


class Record(msgspec.Struct):
    """One line: a dump marker (`dump_stats`), or one payload (`coll_perf`, `p2p_perf`,
    `proxy_trace`) with its own `header`/`metadata` (v4.0-v4.2) or without (v4.3)."""

    header: Header | None = None
    metadata: Metadata | None = None
    dump_stats: DumpStats | None = None
    coll_perf: CollPerf | None = None
    p2p_perf: P2pPerf | None = None
    proxy_trace: ProxyTrace | None = None


DECODER = msgspec.json.Decoder(Record)
