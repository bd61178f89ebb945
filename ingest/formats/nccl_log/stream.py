"""Streaming a text log, plain or gzip, in line-aligned chunks of bounded size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from commwall.ingest.errors import IngestError
from commwall.ingest.sources import inflate, is_gzip

#: Bytes read per step.
CHUNK = 1 << 21
#: A "line" longer than this without a newline (binary junk) is cut into pieces of this size.
MAX_LINE = 1 << 20


def _raw_chunks(path: Path, max_bytes: int) -> Iterator[bytes]:
    if is_gzip(path):  # inflate's limits: max_bytes, and a ratio to the compressed size
        # checked on a first pass that only inflates (about 1 GB/s): parsed while inflating,
        # a 31 MB bomb of one repeated NCCL line was parsed for minutes before the limit hit
        for _ in inflate(path, max_bytes):
            pass
        yield from inflate(path, max_bytes)
        return
    total = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            total += len(chunk)
            if total > max_bytes:
                raise IngestError(path, f"content is over the limit of {max_bytes:,} bytes")
            yield chunk


def chunks(path: str | Path, max_bytes: int) -> Iterator[bytes]:
    """The content in pieces of about CHUNK bytes that end at a line end (the last may not).
    Memory stays bounded by CHUNK + MAX_LINE whatever the file size: a line longer than
    MAX_LINE without a newline (binary junk) is cut. Raises IngestError for corrupt or
    truncated gzip, for content over `max_bytes` and for gzip inflating to over
    `ingest.sources.inflated_limit` (a gzip bomb)."""
    p = Path(path)
    carry = b""
    for chunk in _raw_chunks(p, max_bytes):
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) <= MAX_LINE:
            carry = data
            continue
        cut = cut or len(data)
        carry = data[cut:]
        yield data[:cut] if carry else data
    if carry:
        yield carry
