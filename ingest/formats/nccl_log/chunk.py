"""A chunk of the log as Arrow arrays: its lines, and the COLL lines split at ` opCount `, so
that the many COLL lines never become Python objects."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.formats.nccl_log.torch_lines import INTERRUPT_MARKS, OOM_MARK

COLL_MARK = " opCount "


def line_array(data: bytes) -> tuple[pa.Array, np.ndarray]:
    """The lines of `data` (which ends with a newline) as a large_binary array, each value
    with its newline, and the offsets (n + 1) delimiting them in `data`."""
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10) + 1
    offsets = np.concatenate(([0], ends)).astype(np.int64)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.large_binary(), len(ends), buffers), offsets


#: NCCL <= 2.3 printed warnings without the word NCCL: `host:pid:tid [0] file.cc:12 WARN ...`.
OLD_WARN = r":[0-9]+:[0-9]+ \[[0-9]+\] (?:[^ ]+:[0-9]+ )?WARN "


#: The exception a rank died of, under PyTorch's rank prefix (torch_lines.PY_EXCEPTION): no
#: NCCL in it, but it names the rank that did not reach a collective the others timed out on.
PY_EXCEPTION = r"\[rank[0-9]+\]: [A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Interrupt): "


#: The line before NCCL's last error in PyTorch's exception text (torch_lines.LAST_ERROR).
LAST_ERROR = "Last error:"
#: That line, one that says `out of memory`, or a launcher's interrupt (torch_lines
#: INTERRUPT_MARKS: literal parts too).
QUOTED_OR_OOM = f"{LAST_ERROR}|{OOM_MARK}|{INTERRUPT_MARKS}"


def classify_lines(lines: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers of the COLL candidates (NCCL lines with ` opCount `) and of the other
    lines mentioning NCCL (or shaped like an old NCCL warning, a rank's fatal Python
    exception, the line before NCCL's last error, saying `out of memory`, or a launcher's
    interrupt)."""
    nccl = np.asarray(pc.match_substring(lines, "NCCL"))
    if not nccl.all():
        nccl |= np.asarray(pc.match_substring_regex(lines, OLD_WARN))
        # NCCL's last error, and a rank's death of running out of GPU memory (torch_lines.OOM:
        # `7: torch.OutOfMemoryError: CUDA out of memory. ...` names neither NCCL nor
        # `[rankN]:`), in one pass: about the time of one substring search
        nccl |= np.asarray(pc.match_substring_regex(lines, QUOTED_OR_OOM))
        ranked = np.flatnonzero(~nccl & np.asarray(pc.match_substring(lines, "[rank")))
        if ranked.size:
            hit = pc.match_substring_regex(lines.take(pa.array(ranked)), PY_EXCEPTION)
            nccl[ranked[np.asarray(hit)]] = True
    coll = nccl & np.asarray(pc.match_substring(lines, COLL_MARK))
    return np.flatnonzero(coll), np.flatnonzero(nccl & ~coll)


def split_colls(
    lines: pa.Array, rows: np.ndarray
) -> tuple[list[bytes], np.ndarray, np.ndarray, pa.Array]:
    """For the COLL candidate `rows`: their distinct heads (text before ` opCount `), the head
    index of each row, the row of each head's first use, and the tails (text after it)."""
    parts = pc.split_pattern(lines.take(pa.array(rows)), COLL_MARK, max_splits=1)
    heads = pc.list_element(parts, 0).dictionary_encode()
    index = np.asarray(heads.indices)
    _, first = np.unique(index, return_index=True)
    return heads.dictionary.to_pylist(), index, rows[first], pc.list_element(parts, 1)
