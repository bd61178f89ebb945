"""Arrow shapes of the nccl_* store tables (ingest/schema_nccl.sql documents every column),
and a spool that keeps big tables out of memory while a log streams by."""

from __future__ import annotations

import os
import tempfile

import pyarrow as pa

I64, I32, STR, F64, BOOL = pa.int64(), pa.int32(), pa.string(), pa.float64(), pa.bool_()
I32_LIST, STR_LIST = pa.list_(I32), pa.list_(STR)

SCHEMAS: dict[str, pa.Schema] = {
    "nccl_files": pa.schema(
        [
            ("lines_total", I64), ("lines_nccl", I64), ("lines_recognised", I64),
            ("lines_unknown", I64), ("lines_damaged", I64), ("lines_torch", I64),
            ("n_processes", I32), ("versions", STR_LIST), ("shape_version", STR),
        ]
    ),
    "nccl_processes": pa.schema(
        [
            ("proc", I32), ("host", STR), ("pid", I64), ("launcher_tag", STR), ("tag_rank", I32),
            ("devices", I32_LIST), ("nccl_version", STR), ("version_suffix", STR),
            ("cuda_version", STR), ("cuda_driver", I32), ("git_version", STR),
            ("first_line", I64), ("n_lines", I64),
        ]
    ),
    "nccl_communicators": pa.schema(
        [
            ("proc", I32), ("comm", STR), ("line_no", I64), ("comm_id", STR), ("rank", I32),
            ("nranks", I32), ("cuda_dev", I32), ("nvml_dev", I32), ("bus_id", STR), ("api", STR),
            ("parent", STR), ("status", STR), ("n_nodes", I32), ("local_ranks", I32),
            ("local_rank", I32), ("mnnvl", BOOL), ("init_seconds", F64), ("nvls_support", BOOL),
            ("nvls_heads", I32), ("coll_channels", I32), ("collnet_channels", I32),
            ("nvls_channels", I32), ("p2p_channels", I32), ("connected", STR_LIST),
            ("ring_pxn", I32), ("ring_gdr", I32),
        ]
    ),
    "nccl_channels": pa.schema(
        [
            ("proc", I32), ("comm", STR), ("line_no", I64), ("kind", STR), ("channel", I32),
            ("n_channels", I32), ("ring", I32_LIST), ("truncated", BOOL), ("tree_rank", I32),
            ("tree_up", I32), ("tree_down", I32_LIST),
        ]
    ),
    "nccl_connections": pa.schema(
        [
            ("proc", I32), ("comm", STR), ("line_no", I64), ("channel", I32), ("conn", I32),
            ("src", I32), ("dst", I32), ("src_dev", STR), ("dst_dev", STR), ("direction", STR),
            ("peer", I32), ("via", STR), ("transport", STR), ("net", STR), ("net_dev", I32),
            ("proxy_rank", I32), ("gdr", BOOL), ("shared", BOOL),
        ]
    ),
    "nccl_network": pa.schema(
        [
            ("proc", I32), ("line_no", I64), ("kind", STR), ("idx", I32), ("device", STR),
            ("port", I32), ("link", STR), ("address", STR), ("enabled", BOOL), ("detail", STR),
        ]
    ),
    "nccl_tuning": pa.schema(
        [
            ("proc", I32), ("comm", STR), ("line_no", I64), ("kind", STR), ("func", STR),
            ("bytes", I64), ("algo", STR), ("proto", STR), ("time_us", F64),
            ("channel_lo", I32), ("channel_hi", I32), ("latency_us", F64), ("bw_gbps", F64),
            ("max_threads", I32),
        ]
    ),
    "nccl_env": pa.schema([("proc", I32), ("line_no", I64), ("name", STR), ("value", STR)]),
    "nccl_colls": pa.schema(
        [
            ("proc", I32), ("line_no", I64), ("dev", I32), ("comm", STR), ("op_count", I64),
            ("op", STR), ("nccl_op", STR), ("count", I64), ("datatype", I32), ("dtype", STR),
            ("bytes", I64), ("redop", I32), ("root", I32), ("nranks", I32), ("stream", STR),
        ]
    ),
    "nccl_warnings": pa.schema(
        [
            ("proc", I32), ("line_no", I64), ("ts", I64), ("level", STR), ("kind", STR),
            ("src_file", STR), ("src_line", I32), ("code", I32), ("thread", STR),
            ("chain", I64), ("tid", I64), ("message", STR),
        ]
    ),
    "nccl_timeouts": pa.schema(
        [
            ("line_no", I64), ("kind", STR), ("rank", I32), ("rank_source", STR), ("pg", STR),
            ("pg_desc", STR), ("pg_rank", I32), ("seq", I64), ("op_type", STR),
            ("numel_in", I64), ("numel_out", I64), ("timeout_ms", I64), ("ran_ms", I64),
            ("last_enqueued", I64), ("last_completed", I64), ("time_text", STR),
            ("message", STR),
        ]
    ),
    "nccl_unknown": pa.schema([("proc", I32), ("line_no", I64), ("kind", STR), ("text", STR)]),
    "nccl_test_results": pa.schema(
        [
            ("table_no", I32), ("line_no", I64), ("test", STR), ("n_ranks", I32), ("gpu", STR),
            ("size_bytes", I64), ("count", I64), ("dtype", STR), ("redop", STR), ("root", I32),
            ("check_kind", STR), ("oop_time_us", F64), ("oop_algbw_gbs", F64),
            ("oop_busbw_gbs", F64), ("oop_wrong", F64), ("ip_time_us", F64), ("ip_algbw_gbs", F64),
            ("ip_busbw_gbs", F64), ("ip_wrong", F64), ("wrong_values", I64), ("avg_busbw", F64),
            ("n_nodes", I32),
        ]
    ),
}  # fmt: skip


def column(values: list | tuple, type_: pa.DataType) -> pa.Array:
    """An Arrow array of `values`; a value that does not fit the type (a 30-digit "pid" in a
    damaged line) becomes null instead of failing the file."""
    try:
        return pa.array(values, type_)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_fitting(v, type_) for v in values], type_)


def _fitting(value: object, type_: pa.DataType) -> object:
    try:
        pa.array([value], type_)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return value


def rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """A table of `schema` from dict rows (missing keys are null), via `column`."""
    return pa.Table.from_arrays(
        [column([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema
    )


#: Rows buffered per table before they become an Arrow batch.
BATCH_ROWS = 1 << 16
#: Arrow bytes a table keeps in memory before it moves to a temporary file.
SPILL_BYTES = 32 << 20


class Spool:
    """Rows of one table. Rows become Arrow batches every BATCH_ROWS; past SPILL_BYTES the
    batches go to an Arrow IPC file in the temp directory, which `table()` memory-maps (and
    unlinks: the mapping outlives the name), so memory stays flat however long the log."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows: list[tuple] = []
        self.batches: list[pa.RecordBatch] = []
        self.held = 0
        self.path: str | None = None
        self.writer: pa.ipc.RecordBatchFileWriter | None = None

    def add(self, row: tuple) -> None:
        """Append one row (a tuple in schema order)."""
        self.rows.append(row)
        if len(self.rows) >= BATCH_ROWS:
            self._flush_rows()

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Append a ready batch of this schema."""
        if self.writer is not None:
            self.writer.write_batch(batch)
            return
        self.batches.append(batch)
        self.held += batch.nbytes
        if self.held > SPILL_BYTES:
            fd, self.path = tempfile.mkstemp(prefix="commwall-nccl-", suffix=".arrow")
            os.close(fd)
            self.writer = pa.ipc.new_file(self.path, self.schema)
            for b in self.batches:
                self.writer.write_batch(b)
            self.batches, self.held = [], 0

    def _flush_rows(self) -> None:
        cols = list(zip(*self.rows, strict=True)) if self.rows else [()] * len(self.schema)
        arrays = [column(c, f.type) for c, f in zip(cols, self.schema, strict=True)]
        self.rows = []
        self.add_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))

    def table(self) -> pa.Table:
        """Everything added, as one table (memory-mapped when spilled)."""
        if self.rows:
            self._flush_rows()
        if self.writer is None:
            return pa.Table.from_batches(self.batches, schema=self.schema)
        self.writer.close()
        assert self.path is not None  # a writer always has its spill file
        source = pa.memory_map(self.path)
        os.unlink(self.path)
        return pa.ipc.open_file(source).read_all()

    def discard(self) -> None:
        """Drop everything (the parse failed); removes a spill file."""
        if self.writer is not None and self.path is not None:
            self.writer.close()
            os.unlink(self.path)
        self.rows, self.batches, self.writer = [], [], None
