"""NVTX extended payloads of NCCL ranges (`nsys export --include-blobs=true`).

A blob in `NVTX_EVENTS.binaryData` is a 32-byte header — domain id, schema id, payload size,
payload offset, each a little-endian u64 — then the payload: a C struct described by
`NVTX_PAYLOAD_SCHEMA_ENTRIES(domainId, schemaId, idx, type, name, offset)`. Only integer
fields are decoded (communicator id, message size, rank, number of ranks, CUDA device, peer,
root); names are lower-cased (`"no. of ranks"`, `"message size [bytes]"`).
"""

from __future__ import annotations

from dataclasses import dataclass

from commwall.ingest.formats.nsys.db import Export

HEADER_BYTES = 32
#: Offsets of payload fields lie within a struct of at most this many bytes.
MAX_OFFSET = 1 << 32
#: NVTX_PAYLOAD_ENTRY_TYPE_* → (size in bytes, signed); LP64 sizes for C long and size_t.
INT_TYPES = {
    1: (1, True), 2: (1, False), 3: (2, True), 4: (2, False), 5: (4, True), 6: (4, False),
    7: (8, True), 8: (8, False), 9: (8, True), 10: (8, False), 11: (1, True), 12: (1, False),
    13: (2, True), 14: (2, False), 15: (4, True), 16: (4, False), 17: (8, True), 18: (8, False),
    22: (8, False), 23: (8, False),
}  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """One integer field of a payload struct."""

    name: str
    offset: int
    size: int
    signed: bool


Schemas = dict[tuple[int, int], list[Entry]]


def read_schemas(ex: Export) -> Schemas:
    """Integer fields per (domain id, schema id); empty when the export has no schema tables.
    A field without an offset is placed at the next naturally aligned position; one whose
    offset is not an integer in 0 .. MAX_OFFSET is left out."""
    table = ex.table("NVTX_PAYLOAD_SCHEMA_ENTRIES")
    if table is None:
        return {}
    rows = ex.rows(
        f"SELECT {ex.pick(table, 'domainId', 'schemaId', 'idx', 'type', 'name', 'offset')} "
        f'FROM "{table}" ORDER BY 1, 2, 3'
    )
    out: Schemas = {}
    seen: set[tuple] = set()
    ends: dict[tuple[int, int], int] = {}
    for dom, sch, idx, typ, name, offset in rows:
        if (dom, sch, idx) in seen or typ not in INT_TYPES or name is None:
            continue
        if offset is not None and not (type(offset) is int and 0 <= offset < MAX_OFFSET):
            continue  # a malformed row (text, a real, out of range): its field is not decoded
        seen.add((dom, sch, idx))
        size, signed = INT_TYPES[typ]
        end = ends.get((dom, sch), 0)
        at = offset if offset is not None else -(-end // size) * size
        ends[(dom, sch)] = at + size
        out.setdefault((dom, sch), []).append(Entry(str(name).lower(), at, size, signed))
    return out


def decode(blob: bytes | str | None, schemas: Schemas) -> dict[str, int] | None:
    """The integer fields of one payload blob (hex text is accepted), or None when the blob is
    absent, malformed or of an unknown schema."""
    if blob is None:
        return None
    if isinstance(blob, str):
        try:
            blob = bytes.fromhex(blob)
        except ValueError:
            return None
    if len(blob) < HEADER_BYTES:
        return None
    dom, sch, size, offset = (int.from_bytes(blob[i : i + 8], "little") for i in (0, 8, 16, 24))
    entries = schemas.get((dom, sch))
    payload = blob[offset : offset + size]
    if not entries or offset < HEADER_BYTES or len(payload) != size:
        return None
    return {
        e.name: int.from_bytes(payload[e.offset : e.offset + e.size], "little", signed=e.signed)
        for e in entries
        if e.offset + e.size <= size
    }
