"""Nsight Systems SQLite exports: `reader` is the entry point; the other modules each read one
part of the export (kernels, NVTX, GPUs, ranks, steps, collectives, payloads). This module is the
format's entry in the registry."""

from __future__ import annotations

from commwall.ingest.formats.nsys.reader import parse
from commwall.ingest.formats.nsys.source import looks_like_nsys as sniff

FORMAT = "nsys"

__all__ = ["FORMAT", "parse", "sniff"]
