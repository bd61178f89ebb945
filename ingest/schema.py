"""The canonical store schema: DDL (schema.sql) and the Arrow shapes parsers return.

Parsers return tables without `run_id` and `file_id`; the loader adds them. Column order and
types of each Arrow schema match the DuckDB table of the same name.
"""

from __future__ import annotations

from importlib import resources  # not `files`: DuckDB would scan it for the table `files`

import pyarrow as pa

SCHEMA_VERSION = 1
#: Times the store accepts (ns since the Unix epoch): 1970-01-01 to 2200-01-01. Parsers drop or
#: refuse values outside (docs/robustness.md), so that no time is ever stored wrapped.
MAX_NS = 7_258_118_400_000_000_000
TIME_RANGE = "1970-2200"
#: Descriptive text (names, states, messages, unknown lines) of nsys exports, Flight Recorder
#: dumps and NCCL logs is cut to this many characters when read (docs/robustness.md); Kineto
#: strings, decoded by a schema, are refused over kineto.events.MAX_STRING instead.
TEXT_CUT = 4096
#: Why an event was clamped: parsers store a negative duration as 0 and count it in the file's
#: detail (`clamped_events`, `clamped_reason`), which the ingest summary reports.
NEGATIVE_DURATION = "negative duration, stored as 0"

I64 = pa.int64()
I32 = pa.int32()
STR = pa.string()

RANKS = pa.schema(
    [
        ("rank", I32),
        ("host", STR),
        ("pid", I64),
        ("device", I32),
        ("gpu_name", STR),
        ("world_size", I32),
        ("backend", STR),
        ("time_base", STR),
        ("nccl_version", STR),
        ("rank_source", STR),
    ]
)

PROCESS_GROUPS = pa.schema(
    [("rank", I32), ("pg_name", STR), ("pg_desc", STR), ("pg_size", I32), ("ranks", STR)]
)

ACTIVITIES = pa.schema(
    [
        ("rank", I32),
        ("ts", I64),
        ("dur", I64),
        ("kind", STR),
        ("cat", STR),
        ("name", STR),
        ("pid", I64),
        ("tid", I64),
        ("stream", I64),
        ("correlation", I64),
        ("external_id", I64),
        ("launch_ts", I64),
    ]
)

STEPS = pa.schema([("rank", I32), ("step", I64), ("ts", I64), ("dur", I64)])

COLLECTIVES = pa.schema(
    [
        ("rank", I32),
        ("ts", I64),
        ("dur", I64),
        ("launch_ts", I64),
        ("op", STR),
        ("name", STR),
        ("pg_name", STR),
        ("pg_desc", STR),
        ("group_size", I32),
        ("seq", I64),
        ("seq_source", STR),
        ("dtype", STR),
        ("in_nelems", I64),
        ("out_nelems", I64),
        ("in_bytes", I64),
        ("out_bytes", I64),
        ("algo", STR),
        ("stream", I64),
        ("peer", I32),
        ("pg_ranks", STR),
        ("in_splits", STR),
        ("out_splits", STR),
    ]
)

#: Tables a parser may return, with their Arrow schema (parsers of other formats add theirs).
TABLES: dict[str, pa.Schema] = {
    "ranks": RANKS,
    "process_groups": PROCESS_GROUPS,
    "activities": ACTIVITIES,
    "steps": STEPS,
    "collectives": COLLECTIVES,
}


def ddl() -> str:
    """All CREATE statements of the store: schema.sql, then each format's schema_<name>.sql."""
    root = resources.files("commwall.ingest")
    names = sorted(
        p.name for p in root.iterdir() if p.name.startswith("schema") and p.name.endswith(".sql")
    )
    return "\n".join(root.joinpath(n).read_text() for n in names)


def empty(schema: pa.Schema) -> pa.Table:
    """An empty table of `schema`."""
    return schema.empty_table()
