"""NVTX ranges of an nsys export: push/pop and start/end ranges with names, domains, payloads.

Names are `text`, else `StringIds[textId]`. Domain ids are per process; a domain is named by
its `NvtxDomainCreate` row. A time slice may lack those rows: an unnamed non-default domain
whose ranges are all NCCL API calls (`^nccl[A-Z]`) is then taken to be NCCL's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.formats.nsys import payload as nsys_payload
from commwall.ingest.formats.nsys.db import Export

I64, STR = pa.int64(), pa.string()
RANGE_TYPES = ("NvtxPushPopRange", "NvtxStartEndRange", "NvtxtPushPopRange", "NvtxtStartEndRange")
DOMAIN_CREATE = "NvtxDomainCreate"
#: ENUM_NSYS_EVENT_TYPE ids in every export examined (used when the ENUM table is absent).
DEFAULT_TYPE_IDS = {
    "NvtxPushPopRange": 59,
    "NvtxStartEndRange": 60,
    "NvtxtPushPopRange": 70,
    "NvtxtStartEndRange": 71,
    "NvtxDomainCreate": 75,
}
NCCL = "NCCL"
NCCL_API = re.compile(r"^nccl[A-Z]")
TID_MASK = 0xFFFFFF

RANGES = pa.schema(
    [
        ("proc", I64),
        ("tid", I64),
        ("start", I64),
        ("end", I64),
        ("domain_id", I64),
        ("text", STR),
        ("text_id", I64),
    ]
)


@dataclass
class Nvtx:
    """Closed NVTX ranges (`proc`, `tid`, `start`, `end`, `name`, `domain`; domain is null for
    the default domain) and what was found about them."""

    ranges: pa.Table
    unclosed: int = 0
    nccl_domain: str = "absent"
    payloads: dict[tuple[int, int, int], dict[str, int]] = field(default_factory=dict)


def type_ids(ex: Export, names: tuple[str, ...]) -> list[int]:
    """ENUM_NSYS_EVENT_TYPE ids of event type `names` (built-in ids when the table is absent)."""
    found: dict[str, int] = {}
    if ex.table("ENUM_NSYS_EVENT_TYPE"):
        marks = ", ".join("?" * len(names))
        q = f"SELECT name, id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ({marks})"
        found = dict(ex.rows(q, names))
    return [found.get(n, DEFAULT_TYPE_IDS[n]) for n in names]


def read(ex: Export) -> Nvtx:
    """The export's NVTX ranges; an empty table when it has none."""
    table = ex.table("NVTX_EVENTS")
    if table is None:
        return Nvtx(_named(RANGES.empty_table(), pa.array([], STR)))
    ids = type_ids(ex, RANGE_TYPES)
    marks = ", ".join("?" * len(ids))
    cols = ex.pick(table, "end", "domainId", "text", "textId", text=("text",))
    raw = ex.read(
        f'SELECT "globalTid" >> 24, "globalTid" & {TID_MASK}, "start", {cols} '
        f'FROM "{table}" WHERE "eventType" IN ({marks}) AND "globalTid" IS NOT NULL',
        RANGES,
        tuple(ids),
    )
    closed = pc.is_valid(raw["end"])
    unclosed = raw.num_rows - pc.sum(closed).as_py() if raw.num_rows else 0
    raw = raw.filter(closed)
    names = pc.coalesce(raw["text"], ex.strings(raw["text_id"].combine_chunks()))
    domains, how = _domains(ex, table, raw, names)
    out = Nvtx(_named(raw, names, domains), unclosed=unclosed, nccl_domain=how)
    schemas = nsys_payload.read_schemas(ex)
    if schemas and "binaryData" in ex.columns(table):
        out.payloads = _payloads(ex, table, ids, schemas)
    return out


def _named(raw: pa.Table, names: pa.Array, domains: pa.Array | None = None) -> pa.Table:
    return pa.table(
        {
            "proc": raw["proc"],
            "tid": raw["tid"],
            "start": raw["start"],
            "end": raw["end"],
            "name": names,
            "domain": domains if domains is not None else pa.nulls(raw.num_rows, STR),
        }
    )


def _domains(ex: Export, table: str, raw: pa.Table, names: pa.Array) -> tuple[pa.Array, str]:
    """Domain name per range and how the NCCL domain was found (named | inferred from range
    names | absent)."""
    (create,) = type_ids(ex, (DOMAIN_CREATE,))
    known: dict[tuple[int, int], str] = {}
    rows = ex.rows(
        f'SELECT "globalTid" >> 24, {ex.pick(table, "domainId", "text", text=("text",))} '
        f'FROM "{table}" WHERE "eventType" = ?',
        (create,),
    )
    for proc, dom, text in rows:
        if dom is not None and text:
            known[(proc, dom)] = text
    procs = raw["proc"].to_pylist()
    doms = raw["domain_id"].to_pylist()
    nccl_like = pc.match_substring_regex(names, NCCL_API.pattern).fill_null(False).to_pylist()
    votes: dict[tuple[int, int], list[int]] = {}
    for p, d, ok in zip(procs, doms, nccl_like, strict=True):
        if d and (p, d) not in known:
            v = votes.setdefault((p, d), [0, 0])
            v[0] += 1
            v[1] += ok
    inferred = {k for k, (n, ok) in votes.items() if n == ok}
    labels = {**known, **dict.fromkeys(inferred, NCCL)}
    for k in votes.keys() - inferred:
        labels[k] = f"domain {k[1]}"
    out = [labels.get((p, d)) if d else None for p, d in zip(procs, doms, strict=True)]
    if NCCL in known.values():
        how = "named"
    elif inferred:
        how = "inferred from range names"
    else:
        how = "absent"
    return pa.array(out, STR), how


def _payloads(
    ex: Export, table: str, ids: list[int], schemas: nsys_payload.Schemas
) -> dict[tuple[int, int, int], dict[str, int]]:
    """Decoded payload fields keyed by (proc, tid, start) of their range."""
    marks = ", ".join("?" * len(ids))
    rows = ex.rows(
        f'SELECT "globalTid" >> 24, "globalTid" & {TID_MASK}, "start", "binaryData" '
        f'FROM "{table}" WHERE "binaryData" IS NOT NULL AND "eventType" IN ({marks})',
        tuple(ids),
    )
    out: dict[tuple[int, int, int], dict[str, int]] = {}
    # identical blobs (same communicator and size) are decoded once
    seen: dict[bytes, dict[str, int] | None] = {}
    for proc, tid, start, blob in rows:
        if proc is None or tid is None or start is None:
            continue  # not a range anything can be matched to (a corrupt row)
        if blob not in seen:
            seen[blob] = nsys_payload.decode(blob, schemas)
        if fields := seen[blob]:
            out[(proc, tid, start)] = fields
    return out
