"""GPU facts of an nsys export (`TARGET_INFO_GPU`) → the `nsys_gpus` table."""

from __future__ import annotations

import pyarrow as pa

from commwall.ingest.formats.nsys.db import Export

NSYS_GPUS = pa.schema(
    [
        ("device", pa.int32()),
        ("name", pa.string()),
        ("uuid", pa.string()),
        ("bus_location", pa.string()),
        ("sm_count", pa.int32()),
        ("total_memory_bytes", pa.int64()),
        ("memory_bandwidth_bytes_per_s", pa.int64()),
        ("clock_rate_hz", pa.int64()),
        ("compute_capability", pa.string()),
    ]
)
_COLUMNS = (
    "id",
    "name",
    "uuid",
    "busLocation",
    "smCount",
    "totalMemory",
    "memoryBandwidth",
    "clockRate",
    "computeMajor",
    "computeMinor",
)
_TEXT = ("name", "uuid", "busLocation")


def read(ex: Export) -> pa.Table:
    """One row per GPU the export describes (empty when TARGET_INFO_GPU is absent, as in time
    slices). Devices are listed once (the first row of each id)."""
    table = ex.table("TARGET_INFO_GPU")
    rows: dict[str, list] = {f.name: [] for f in NSYS_GPUS}
    if table is None:
        return pa.table(rows, schema=NSYS_GPUS)
    seen: set[int] = set()
    for dev, name, uuid, bus, sms, mem, bw, clock, major, minor in ex.rows(
        f'SELECT {ex.pick(table, *_COLUMNS, text=_TEXT)} FROM "{table}" ORDER BY 1'
    ):
        if _fitting(dev, pa.int32()) is None or dev in seen:
            continue
        seen.add(dev)
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        values = (dev, name, uuid, bus, sms, mem, bw, clock, cc)
        for f, v in zip(NSYS_GPUS, values, strict=True):
            rows[f.name].append(_fitting(v, f.type))
    return pa.table(rows, schema=NSYS_GPUS)


def _fitting(v: object, t: pa.DataType) -> object:
    """`v` when it is of type `t` and in its range; else None (these are descriptive facts: a
    corrupt cell leaves a gap, not a refused file)."""
    if pa.types.is_string(t):
        return v if isinstance(v, str) else None
    bits = t.bit_width - 1
    return v if type(v) is int and -(1 << bits) <= v < (1 << bits) else None
