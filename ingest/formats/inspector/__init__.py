"""NCCL Inspector output (the NCCL profiler plugin of NVIDIA/nccl
`plugins/profiler/inspector/`) → the inspector_* tables.

Reads the plugin's newline-delimited JSON (format versions v4.0-v4.3, verbose or not, proxy
records kept as counts) and its Prometheus textfiles, streamed: memory stays bounded by one dump
batch and the per-minute aggregates, plus the per-instance rows when they are kept. See
docs/inspector.md for what is read and ingest/schema_inspector.sql for the tables.

Options read from ParseOptions: `keep_going` (skip a bad batch, count it and
go on; default off: a bad batch stops the ingest) and `inspector_instances` (keep one row per
operation and rank; default on: per-minute aggregates are always kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.inspector import prom
from commwall.ingest.formats.inspector.reader import Reader
from commwall.ingest.formats.nccl_log.stream import chunks
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.sources import head

FORMAT = "nccl_inspector"
_JSON_KEYS = (b'{"coll_perf"', b'{"p2p_perf"', b'{"proxy_trace"', b'{"dump_stats"')


def sniff(path: Path, head_bytes: bytes) -> bool:
    """Inspector JSON (its first record names `inspector_output_format_version`, or is a bare
    v4.3 payload line) or an Inspector Prometheus textfile."""
    h = head_bytes.lstrip(b"\xef\xbb\xbf \t\r\n")
    if h[:1] == b"{":
        first = h.split(b"\n", 1)[0]
        return b'"inspector_output_format_version"' in first or first.startswith(_JSON_KEYS)
    return prom.looks_like_prom(h)


def lines(path: Path, max_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a plain or gzip file, streamed (ingest/formats/nccl_log/stream.py
    bounds memory and the decompressed size)."""
    n = 0
    for data in chunks(path, max_bytes):
        pieces = data.split(b"\n")
        if data.endswith(b"\n"):
            pieces.pop()  # the empty piece after the chunk's last newline is not a line
        for raw in pieces:
            n += 1
            yield n, raw


def parse(path: str | Path, opts: ParseOptions | None = None) -> Parsed:
    """Parse one Inspector file (plain or gzip). Raises IngestError naming the file and the
    line for a damaged line, a truncated, interleaved or over-long dump and a payload without
    context (with `keep_going`, such batches are skipped and counted in the detail)."""
    p = Path(path)
    o = opts or ParseOptions()
    keep_going, instances = o.keep_going, o.inspector_instances
    try:
        first = head(p)
    except OSError as e:
        raise IngestError(p, f"cannot read file ({e.strerror})") from e
    if not first.strip():
        raise IngestError(p, "file is empty")
    if first.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] != b"{":
        got = []
        for n, raw in lines(p, o.max_bytes):
            if n > prom.MAX_LINES:
                raise IngestError(p, f"over {prom.MAX_LINES:,} lines: no Inspector textfile")
            got.append((n, raw))
        table = prom.parse_prom(p, got, keep_going)
        if table.num_rows == 0:
            raise IngestError(p, "no Prometheus sample of an nccl_ metric")
        detail = {"prometheus": True, "samples": table.num_rows}
        return Parsed(FORMAT, {"inspector_prom": table}, detail)
    reader = Reader(p, keep_going=keep_going, instances=instances)
    for n, raw in lines(p, o.max_bytes):
        reader.feed(n, raw)
    reader.finish()
    tables = reader.tables()
    if sum(reader.n_records.values()) == 0 and tables["inspector_dumps"].num_rows == 0:
        raise IngestError(p, "no Inspector record (no coll_perf, p2p_perf, proxy_trace or dump)")
    return Parsed(FORMAT, tables, reader.detail())
