"""Training steps of an nsys export: NVTX ranges whose names mark iterations.

By default `ProfilerStep#N` (PyTorch's profiler in NVTX mode, possibly followed by
`, op_id = ...`); `--step-range REGEX` replaces it (searched anywhere in the name). The step
number is the regex's first capture group, or, without one, the range's order on its rank.
The first range of each (rank, step) wins; NCCL-domain ranges never mark steps.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nsys.nvtx import NCCL
from commwall.ingest.schema import STEPS

DEFAULT_STEP_REGEX = r"^ProfilerStep#(\d+)(?:,|$)"


def compile_regex(path: Path, regex: str | None) -> re.Pattern[str]:
    """The step regex (default ProfilerStep#N); IngestError when it does not compile."""
    try:
        return re.compile(regex or DEFAULT_STEP_REGEX)
    except re.error as e:
        raise IngestError(path, f"bad --step-range regex {regex!r}: {e}") from e


def steps(ranges: pa.Table, pattern: re.Pattern[str], base: int) -> pa.Table:
    """Step windows from `ranges` (rank, start, end, name, domain; session ns), as absolute ns
    (`base` + offset)."""
    names = pc.unique(ranges["name"]).drop_null().to_pylist()
    hits = {n: m for n in names if (m := pattern.search(n))}
    not_nccl = pc.invert(pc.equal(ranges["domain"], NCCL).fill_null(False))
    r = ranges.filter(
        pc.and_(pc.is_in(ranges["name"], pa.array(list(hits), pa.string())), not_nccl)
    )
    r = r.sort_by([("rank", "ascending"), ("start", "ascending")])
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    order: dict[int, int] = {}
    cols = [r[c].to_pylist() for c in ("rank", "start", "end", "name")]
    for rank, start, end, name in zip(*cols, strict=True):
        m = hits[name]
        g = m.group(1) if pattern.groups else None
        if g and g.isascii() and g.isdigit() and len(g) <= 18:
            n = int(g)  # a longer number fits no int64: not a step, as in Kineto
        elif pattern.groups:
            continue
        else:
            n = order.get(rank, 0)
            order[rank] = n + 1
        seen.setdefault((rank, n), (start, end))
    keys = sorted(seen)
    return pa.table(
        {
            "rank": pa.array([k[0] for k in keys], pa.int32()),
            "step": pa.array([k[1] for k in keys], pa.int64()),
            "ts": pa.array([seen[k][0] + base for k in keys], pa.int64()),
            "dur": pa.array([max(seen[k][1] - seen[k][0], 0) for k in keys], pa.int64()),
        },
        schema=STEPS,
    )
