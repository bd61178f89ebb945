"""NCCL_DEBUG logs (NCCL 2.4 → 2.30, plus PyTorch ProcessGroupNCCL lines) → the nccl_* tables.

A pure function of the file, streamed: memory stays flat whatever the log's size. See
docs/nccl_logs.md for what is read, and ingest/schema_nccl.sql for the tables.
"""

from __future__ import annotations

import json
from pathlib import Path

from commwall.ingest.errors import IngestError, UnknownFormat
from commwall.ingest.formats.nccl_log.parser import LogParser
from commwall.ingest.formats.nccl_log.stream import chunks
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.sources import head

FORMAT = "nccl_log"


def sniff(path: Path, head_bytes: bytes) -> bool:
    """The format-registry sniffer: see looks_like_text."""
    return looks_like_text(head_bytes)


def looks_like_text(head_bytes: bytes) -> bool:
    """True for a text log: under 1% control characters (NUL included), not JSON.

    The sniffer deliberately claims every such file (it is the last format tried): a text
    log without any NCCL line then fails with "no NCCL log lines found", which tells the
    user what to do, rather than "unrecognised format"."""
    if not head_bytes.strip() or head_bytes.lstrip()[:1] == b"{" or json_array(head_bytes):
        return False
    controls = sum(head_bytes.count(bytes([c])) for c in (*range(0, 9), *range(14, 27)))
    return controls <= len(head_bytes) // 100


_VALUE = json.JSONDecoder()


def json_array(head_bytes: bytes) -> bool:
    """Whether the head of a file is a JSON array: `[`, then whole JSON values separated by
    commas, up to a `]` followed by nothing but white space, or up to a comma where the head
    ends inside a value. A log whose lines start with a launcher's tag (`[default0]:`, Open
    MPI's `[1,3]<stdout>:`, `[3] host:...`) is not one."""
    text = head_bytes.decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
    if text[:1] != "[":
        return False
    i, values = 1, 0
    while True:
        while text[i : i + 1].isspace():
            i += 1
        if text[i : i + 1] == "]" and values == 0:
            return not text[i + 1 :].strip()
        try:
            _, i = _VALUE.raw_decode(text, i)
        except ValueError:  # not JSON, or the head ends inside this value
            return values > 0
        except RecursionError:
            return True
        values += 1
        while text[i : i + 1].isspace():
            i += 1
        if text[i : i + 1] == "]":
            return not text[i + 1 :].strip()
        if text[i : i + 1] != ",":
            return False
        i += 1


def parse(path: str | Path, opts: ParseOptions | None = None) -> Parsed:
    """Parse one NCCL log (plain or gzip; `opts.max_bytes` caps its decompressed size).
    Raises IngestError for an empty or binary file and for a file with no NCCL line;
    damaged lines are counted, never fatal."""
    p = Path(path)
    max_bytes = (opts or ParseOptions()).max_bytes
    try:
        first = head(p)
    except OSError as e:
        raise IngestError(p, f"cannot read file ({e.strerror})") from e
    if not first.strip():
        raise IngestError(p, "file is empty")
    if not looks_like_text(first):
        raise UnknownFormat(p, "binary file, not a text log")
    parser = LogParser(p)
    try:
        for data in chunks(p, max_bytes):
            parser.feed(data)
        parser.finish()
    except BaseException:
        parser.discard()
        raise
    if parser.count["nccl"] == 0 and not parser.tests.rows:
        parser.discard()
        raise UnknownFormat(
            p,
            f"no NCCL log lines found in {parser.n:,} lines (run with NCCL_DEBUG=INFO, and "
            "NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV,COLL for the most detail)",
        )
    tables = parser.tables()
    files = tables["nccl_files"].to_pylist()[0]
    detail = {
        "lines": {k.removeprefix("lines_"): v for k, v in files.items() if k.startswith("lines_")},
        "processes": files["n_processes"],
        "versions": files["versions"],
        "shape_version": files["shape_version"],
    }
    return Parsed(FORMAT, tables, detail)
