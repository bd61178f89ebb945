"""Reading a file's bytes: plain or gzip, with size limits and plain-words errors; its digest."""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

try:  # ISA-L inflate is 3-5x faster than zlib's; same API
    from isal import isal_zlib as zlib
except ImportError:  # pragma: no cover
    import zlib  # type: ignore[no-redef]  # the same API under the name isal's took

from commwall.ingest.errors import IngestError

#: What inflating corrupt data raises (isal's stub declares it an instance, not a class).
ZLIB_ERROR: type[Exception] = zlib.error  # type: ignore[assignment]

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 22
#: Default cap on the decompressed size of one file (guards against gzip bombs).
DEFAULT_MAX_BYTES = 8 << 30
#: A gzip file may inflate to at most MAX_RATIO × its own size plus RATIO_SLACK bytes: traces
#: and logs compress 5-30×, a gzip bomb ~1000×; this stops one after reading little of it.
MAX_RATIO = 100
RATIO_SLACK = 64 << 20
#: Gzip content inflating to more than this goes to a temporary file rather than memory
#: (benchmarks/ingest.py: a 537 MB trace's .json.gz peaked at 975 MB inflated in memory, 572 MB
#: this way, in the time of the plain file).
SPILL = 64 << 20


def inflated_limit(compressed: int, max_bytes: int) -> int:
    """The most bytes a gzip file of `compressed` bytes may inflate to."""
    return min(max_bytes, MAX_RATIO * compressed + RATIO_SLACK)


def is_gzip(path: str | Path) -> bool:
    """True when the file starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def inflate(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[bytes]:
    """The decompressed content of a gzip file (concatenated members too), piece by piece.
    Raises IngestError when the data is corrupt or truncated, or exceeds `max_bytes` or
    `inflated_limit` (memory stays at one piece: nothing is allocated from the trailer's claim)."""
    n = 0
    d = zlib.decompressobj(wbits=47)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        limit = inflated_limit(size, max_bytes)
        while chunk := f.read(CHUNK):
            while chunk:
                try:
                    piece = d.decompress(chunk, CHUNK)
                except ZLIB_ERROR as e:
                    raise IngestError(path, f"corrupt gzip data ({e})") from e
                chunk = d.unconsumed_tail
                n += len(piece)
                if n > limit:
                    raise IngestError(path, _over(limit, max_bytes, size))
                yield piece
                if d.eof and d.unused_data:  # concatenated gzip members
                    chunk = d.unused_data
                    d = zlib.decompressobj(wbits=47)
    if not d.eof:
        raise IngestError(path, "truncated gzip file (the compressed stream ends early)")


def _over(limit: int, max_bytes: int, size: int) -> str:
    if limit == max_bytes:
        return f"decompresses to over the limit of {max_bytes:,} bytes"
    return (
        f"decompresses to over {limit:,} bytes, {MAX_RATIO}x its {size:,} bytes plus "
        f"{RATIO_SLACK >> 20} MB (a gzip bomb, or data far more repetitive than any trace)"
    )


def read_bytes(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytearray | mmap.mmap:
    """The file's content, gunzipped when it is gzip. Raises IngestError when the file is empty,
    the gzip stream is truncated or corrupt, or the content exceeds `max_bytes`.

    A plain file is memory-mapped read-only rather than copied (as with any mapped file, another
    process truncating it while it is read kills this one with SIGBUS). Gzip content is
    inflated into one buffer that grows with the data actually inflated (a large buffer grows
    in place, so memory peaks near the uncompressed size, not twice it); past SPILL bytes, into
    an anonymous temporary file memory-mapped the same way, unless none can be written. The
    size a gzip trailer claims is never used, since a crafted or truncated file's trailer says
    anything."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise IngestError(p, f"cannot read file ({e.strerror})") from e
    if size == 0:
        raise IngestError(p, "file is empty")
    refuse_by_size(p, size, max_bytes)
    if not is_gzip(p):
        with open(p, "rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _inflated(p, max_bytes, SPILL)
    except OSError:  # no room for the temporary file: all of it in memory
        return _inflated(p, max_bytes, None)


def refuse_by_size(path: Path, size: int, max_bytes: int) -> None:
    """IngestError when a file of `size` bytes on disk is over the limit (plain or gzip: a
    gzip file larger than the limit holds more than the limit, or is no honest trace)."""
    if size > max_bytes:
        raise IngestError(path, f"file is {size:,} bytes, over the limit of {max_bytes:,}")


def _inflated(p: Path, max_bytes: int, spill: int | None) -> bytearray | mmap.mmap:
    """Gzip content inflated into memory; past `spill` bytes (None: never) into an anonymous
    temporary file instead (gone when the map is closed, or when the process ends however it
    ends), memory-mapped like a plain file, so that its pages can be dropped as they are
    decoded where a buffer would hold all of it to the end. OSError when the file cannot be
    written (no space)."""
    out, f = bytearray(), None
    try:
        for piece in inflate(p, max_bytes):
            if f is not None:
                f.write(piece)
                continue
            out += piece
            if spill is not None and len(out) > spill:
                f = tempfile.TemporaryFile(prefix="commwall-inflated-")
                f.write(out)
                out = bytearray()
        if f is None:
            if not out:
                raise IngestError(p, "file is empty after decompression")
            return out
        f.flush()
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    finally:
        if f is not None:
            f.close()  # the map keeps the file


def head(path: str | Path, n: int = 65536) -> bytes:
    """Up to `n` leading bytes of the (decompressed) content, for format sniffing."""
    p = Path(path)
    with open(p, "rb") as f:
        raw = f.read(n if not is_gzip(p) else n * 4)
    if raw[:2] != GZIP_MAGIC:
        return raw
    d = zlib.decompressobj(wbits=47)
    try:
        out = d.decompress(raw, n)
    except ZLIB_ERROR as e:
        raise IngestError(p, f"corrupt gzip data ({e})") from e
    if not out and not d.eof:  # the gzip header and nothing after it: not an empty file
        raise IngestError(p, "truncated gzip (the file ends before any of its content)")
    return out


#: Bytes a file may hold beyond the size it reports when hashed (a log still being appended).
GROWTH_ALLOWED = 64 << 20


def sha256_of(path: Path, max_bytes: int | None = None) -> str:
    """Hex sha256 of the file's bytes as stored on disk. A FIFO, a device or anything but a
    regular file is refused before it is opened (opening a FIFO waits for a writer; /dev/zero
    never ends), and so is a file that yields far more than the size it reports (/proc files
    report 0 bytes), or one whose size is over `max_bytes` (by its size, before a byte is
    read): IngestError, in bounded time."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise IngestError(p, f"cannot read file ({e.strerror})") from e
    if not stat.S_ISREG(st.st_mode):
        raise IngestError(p, "not a regular file (a FIFO, a device or a socket): nothing to read")
    if max_bytes is not None:
        refuse_by_size(p, st.st_size, max_bytes)
    limit = st.st_size + GROWTH_ALLOWED
    h, n = hashlib.sha256(), 0
    with open(p, "rb") as f:
        while chunk := f.read(1 << 22):
            n += len(chunk)
            if n > limit:
                raise IngestError(
                    p,
                    f"holds more than the {st.st_size:,} bytes it reports (a /proc or device "
                    "file, or one still being written): not read",
                )
            h.update(chunk)
    return h.hexdigest()
