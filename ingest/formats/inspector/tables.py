"""Where the Inspector reader puts what it reads: per-instance rows in Arrow batches of bounded
size, and per-minute aggregates keyed in dicts (bounded by communicators × minutes, not by
records)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

I32, I64, F64, STR, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()
NS_PER_MINUTE = 60_000_000_000

COMMS = pa.schema(
    [("comm_id", STR), ("comm_name", STR), ("rank", I32), ("n_ranks", I32), ("nnodes", I32),
     ("hostname", STR), ("pid", I64), ("version", STR), ("first_ts", I64), ("last_ts", I64),
     ("n_coll", I64), ("n_p2p", I64), ("n_proxy", I64), ("traced", BOOL)]
)  # fmt: skip
COLLS = pa.schema(
    [("comm_id", STR), ("rank", I32), ("pid", I64), ("coll_sn", I64), ("op", STR),
     ("coll", STR), ("algo", STR), ("proto", STR), ("msg_bytes", I64), ("size_log2", I32),
     ("exec_ns", I64), ("algobw_gbs", F64), ("busbw_gbs", F64), ("timing_source", STR),
     ("ts", I64), ("kernel_start_ts", I64), ("coll_start_ts", I64)]
)  # fmt: skip
P2P = pa.schema(
    [("comm_id", STR), ("rank", I32), ("pid", I64), ("p2p_sn", I64), ("op", STR), ("p2p", STR),
     ("peer", I32), ("msg_bytes", I64), ("exec_ns", I64), ("busbw_gbs", F64), ("ts", I64),
     ("kernel_start_ts", I64)]
)  # fmt: skip
MINUTES = pa.schema(
    [("comm_id", STR), ("rank", I32), ("pid", I64), ("kind", STR), ("op", STR),
     ("size_log2", I32), ("algo", STR), ("proto", STR), ("minute_ts", I64), ("n", I64),
     ("bytes", I64), ("exec_ns_sum", I64), ("exec_ns_min", I64), ("exec_ns_max", I64),
     ("busbw_sum", F64), ("busbw_max", F64)]
)  # fmt: skip
DUMPS = pa.schema(
    [("comm_id", STR), ("rank", I32), ("pid", I64), ("minute_ts", I64), ("n_dumps", I64),
     ("coll_records", I64), ("p2p_records", I64), ("proxy_records", I64),
     ("coll_dropped", I64), ("p2p_dropped", I64), ("proxy_dropped", I64),
     ("proxy_ops_dropped", I64), ("coll_dropped_total", I64), ("p2p_dropped_total", I64),
     ("proxy_dropped_total", I64)]
)  # fmt: skip
PROXY = pa.schema(
    [("comm_id", STR), ("rank", I32), ("record_type", STR), ("peer", I32), ("direction", STR),
     ("minute_ts", I64), ("n", I64), ("trans_bytes", I64), ("dur_ns", I64)]
)  # fmt: skip
PROM = pa.schema(
    [("metric", STR), ("value", F64), ("kind", STR), ("node", STR), ("gpu", STR),
     ("comm_name", STR), ("n_nodes", I32), ("nranks", I32), ("op", STR),
     ("message_size", STR), ("size_lo_bytes", I64), ("algo_proto", STR), ("version", STR),
     ("slurm_job_id", STR)]
)  # fmt: skip
SKIPPED = pa.schema(
    [("line", I64), ("bad_line", I64), ("lines", I64), ("problem", STR)]
)  # fmt: skip

#: Every table the format fills, with its Arrow schema (ingest/schema_inspector.sql).
TABLES: dict[str, pa.Schema] = {
    "inspector_comms": COMMS,
    "inspector_colls": COLLS,
    "inspector_p2p": P2P,
    "inspector_minutes": MINUTES,
    "inspector_dumps": DUMPS,
    "inspector_proxy": PROXY,
    "inspector_prom": PROM,
    "inspector_skipped": SKIPPED,
}

#: Rows held as Python lists before they become one Arrow record batch.
BATCH_ROWS = 1 << 13


class Rows:
    """Rows of one table, appended as tuples and kept as Arrow record batches of at most
    BATCH_ROWS rows (memory: the Arrow columns plus one batch of Python values)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.pending: list[tuple] = []
        self.batches: list[pa.RecordBatch] = []

    def add(self, row: tuple) -> None:
        """Append one row (values in the schema's column order)."""
        self.pending.append(row)
        if len(self.pending) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        """Turn the pending rows into one Arrow record batch."""
        if not self.pending:
            return
        cols = list(zip(*self.pending, strict=True))
        arrays = [pa.array(c, type=f.type) for c, f in zip(cols, self.schema, strict=True)]
        # repeated strings (communicator ids, op names) held once per batch, not once per row
        arrays = [a.dictionary_encode() if a.type == STR else a for a in arrays]
        self.batches.append(pa.RecordBatch.from_arrays(arrays, names=self.schema.names))
        self.pending = []

    def table(self) -> pa.Table:
        """All rows as one Arrow table."""
        self.flush()
        if not self.batches:
            return self.schema.empty_table()
        return pa.Table.from_batches(self.batches)


def table_of(schema: pa.Schema, rows: list[tuple]) -> pa.Table:
    """An Arrow table of `schema` from a list of row tuples."""
    r = Rows(schema)
    for row in rows:
        r.add(row)
    return r.table()


def keyed_rows(groups: dict[tuple, list[Any]]) -> list[tuple]:
    """Rows of an aggregate dict: its key's values, then its accumulated values."""
    return [(*k, *v) for k, v in groups.items()]
