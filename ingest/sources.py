"""Reading a file's bytes: plain or gzip, with size limits and plain-words errors."""

from __future__ import annotations

import zlib
from pathlib import Path

from ingest.errors import IngestError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 22
#: Default cap on the decompressed size of one file (guards against gzip bombs).
DEFAULT_MAX_BYTES = 8 << 30


def is_gzip(path: str | Path) -> bool:
    """True when the file starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def read_bytes(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The file's content, gunzipped when it is gzip. Raises IngestError when the file is empty,
    the gzip stream is truncated or corrupt, or the content exceeds `max_bytes`."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise IngestError(p, f"cannot read file ({e.strerror})") from e
    if size == 0:
        raise IngestError(p, "file is empty")
    if not is_gzip(p):
        if size > max_bytes:
            raise IngestError(p, f"file is {size:,} bytes, over the limit of {max_bytes:,}")
        return p.read_bytes()
    out = bytearray()
    d = zlib.decompressobj(wbits=47)
    with open(p, "rb") as f:
        while chunk := f.read(CHUNK):
            try:
                out += d.decompress(chunk, max_bytes + 1 - len(out))
            except zlib.error as e:
                raise IngestError(p, f"corrupt gzip data ({e})") from e
            if len(out) > max_bytes:
                raise IngestError(p, f"decompresses to over the limit of {max_bytes:,} bytes")
            while d.unconsumed_tail:
                out += d.decompress(d.unconsumed_tail, max_bytes + 1 - len(out))
                if len(out) > max_bytes:
                    raise IngestError(p, f"decompresses to over the limit of {max_bytes:,} bytes")
            if d.eof and d.unused_data:
                # concatenated gzip members
                rest = d.unused_data
                d = zlib.decompressobj(wbits=47)
                out += d.decompress(rest)
    if not d.eof:
        raise IngestError(p, "truncated gzip file (the compressed stream ends early)")
    if not out:
        raise IngestError(p, "file is empty after decompression")
    return bytes(out)


def head(path: str | Path, n: int = 65536) -> bytes:
    """Up to `n` leading bytes of the (decompressed) content, for format sniffing."""
    p = Path(path)
    with open(p, "rb") as f:
        raw = f.read(n if not is_gzip(p) else n * 4)
    if raw[:2] != GZIP_MAGIC:
        return raw
    d = zlib.decompressobj(wbits=47)
    try:
        return d.decompress(raw, n)
    except zlib.error as e:
        raise IngestError(p, f"corrupt gzip data ({e})") from e
