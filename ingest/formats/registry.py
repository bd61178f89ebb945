"""Which parser reads a file: recognised by content, never by name alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from commwall.ingest.errors import IngestError, UnknownFormat
from commwall.ingest.formats import flight_recorder, inspector, kineto, nccl_log, nsys
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.sources import head


@dataclass(frozen=True)
class Format:
    """A file format: `sniff(path, head_bytes)` says whether it is one; `parse` reads it."""

    name: str
    sniff: Callable[[Path, bytes], bool]
    parse: Callable[[Path, ParseOptions], Parsed]


#: The formats in the order they are tried; each module has the same contract: `FORMAT` (its
#: name), `sniff(path, head_bytes) -> bool` and `parse(path, opts) -> Parsed`. The NCCL log
#: sniffer claims any text file, so it comes last.
FORMATS: list[Format] = [
    Format(m.FORMAT, m.sniff, m.parse) for m in (nsys, flight_recorder, inspector, kineto, nccl_log)
]


def detect(path: str | Path) -> Format:
    """The format of a file, or IngestError saying what it is not."""
    p = Path(path)
    if not p.is_file():
        raise IngestError(p, "no such file")
    h = head(p)
    if not h.strip():
        raise IngestError(p, "file is empty")
    for fmt in FORMATS:
        if fmt.sniff(p, h):
            return fmt
    kinds = ", ".join(f.name for f in FORMATS)
    if h.lstrip()[:1] in (b"{", b"["):
        raise UnknownFormat(p, f"JSON but not a recognised trace (expected one of: {kinds})")
    raise UnknownFormat(p, f"unrecognised format (expected one of: {kinds})")


def parse(path: str | Path, opts: ParseOptions | None = None) -> Parsed:
    """Detect the format of `path` and parse it."""
    p = Path(path)
    return detect(p).parse(p, opts or ParseOptions())
