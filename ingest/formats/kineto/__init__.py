"""PyTorch profiler (Kineto) Chrome-trace JSON: `reader` decodes a file, `events` classifies
and tabulates its events. This module is the format's entry in the registry."""

from __future__ import annotations

from pathlib import Path

from commwall.ingest.formats.kineto import reader
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed

FORMAT = "kineto"


def sniff(path: Path, head_bytes: bytes) -> bool:
    """A JSON object with Kineto keys, or a bare JSON array of events."""
    return reader.looks_like_kineto(head_bytes)


def parse(path: str | Path, opts: ParseOptions | None = None) -> Parsed:
    """Parse one Kineto trace (plain or gzip) into the store's tables."""
    o = opts or ParseOptions()
    return reader.parse(path, o.rank, o.comm_patterns, o.max_bytes, o.jobs)
