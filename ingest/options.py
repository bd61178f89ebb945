"""Options every parser receives (one object, so formats can add knobs without new plumbing)."""

from __future__ import annotations

from dataclasses import dataclass

from commwall.ingest.sources import DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class ParseOptions:
    """`rank`: rank for a file that does not say; `comm_patterns`: extra communication-kernel
    regexes; `max_bytes`: cap on a file's decompressed size; `rank_map`: process → rank
    overrides (`"pid=rank"`, `"host:pid=rank"` or `"device:id=rank"`; see
    ingest/formats/nsys/ranks.py);
    `step_regex`: NVTX range names that mark training steps (one capture group: the step
    number); `jobs`: processes that may decode one large file (0: automatic, 1: this one);
    `keep_going`: a format that reads in batches (NCCL Inspector) skips a bad batch, counts it
    in the file's detail and goes on, instead of refusing the file;
    `inspector_instances`: keep one NCCL Inspector row per operation and rank (off: only the
    per-minute aggregates, for the largest jobs).
    """

    rank: int | None = None
    comm_patterns: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    rank_map: tuple[str, ...] = ()
    step_regex: str | None = None
    jobs: int = 0
    keep_going: bool = False
    inspector_instances: bool = True
