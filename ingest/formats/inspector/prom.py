"""NCCL Inspector's Prometheus textfiles (NCCL_INSPECTOR_PROM_DUMP=1, inspector_prom.cc of
NVIDIA/nccl): one `metric{labels} value` sample per line, `#` comments, aggregated per
(communicator name, collective, message-size bucket, algo_proto) over the last dump interval."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pyarrow as pa

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.inspector import tables as T
from commwall.ingest.schema import TEXT_CUT

#: The metrics the plugin writes (README, inspector_prom.cc); other `nccl_` metrics are kept too.
METRICS = (
    "nccl_bus_bandwidth_gbs",
    "nccl_collective_exec_time_microseconds",
    "nccl_p2p_bus_bandwidth_gbs",
    "nccl_p2p_exec_time_microseconds",
    "nccl_collectives_total",
    "nccl_collectives_dropped_total",
    "nccl_p2p_total",
    "nccl_p2p_dropped_total",
)
_SAMPLE = re.compile(r"^(nccl_[a-zA-Z0-9_]+)\{(.*)\}\s+(\S+)(?:\s+\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_SIZE = re.compile(r"^(\d+)-(\d+)(B|KB|MB|GB|TB)$")
_UNITS = {"B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4}
#: Lines of one textfile at most (the plugin writes a few per communicator and bucket).
MAX_LINES = 1_000_000


def looks_like_prom(head_bytes: bytes) -> bool:
    """Whether a file's head is an Inspector Prometheus textfile: its first sample line is one
    of the plugin's metrics with labels."""
    for raw in head_bytes.split(b"\n")[:50]:
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        return any(line.startswith(m.encode() + b"{") for m in METRICS)
    return False


def size_lower_bound(label: str) -> int | None:
    """The lower bound in bytes of a message_size label ('4-5GB' -> 4 GiB; '0B' -> 0)."""
    if label == "0B":
        return 0
    m = _SIZE.match(label)
    if m is None:
        return None
    return int(m[1]) * 1024 ** _UNITS[m[3]]


def _labels(text: str) -> dict[str, str] | None:
    out, i = {}, 0
    while i < len(text):
        m = _LABEL.match(text, i)
        if m is None:
            return None
        out[m[1]] = m[2].replace('\\"', '"').replace("\\\\", "\\")[:TEXT_CUT]
        i = m.end()
    return out


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and v.isdigit() and len(v) < 10 else None


def parse_prom(path: Path, lines: list[tuple[int, bytes]], keep_going: bool) -> pa.Table:
    """The samples of a textfile as inspector_prom rows; a line that is no sample is an
    IngestError naming it (with `keep_going`: skipped)."""
    rows = []
    for lineno, raw in lines:
        line = raw.decode("utf-8", "replace").strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        lab = _labels(m[2]) if m else None
        try:
            value = float(m[3]) if m else math.nan
        except ValueError:
            lab = None
        if m is None or lab is None:
            if keep_going:
                continue
            raise IngestError(path, f"line {lineno}: not a Prometheus sample of an nccl_ metric")
        metric = m[1]
        op = lab.get("collective") or lab.get("p2p_operation")
        kind = "coll" if "collective" in lab else "p2p" if "p2p_operation" in lab else "device"
        size = lab.get("message_size")
        rows.append((metric, value, kind, lab.get("node"), lab.get("gpu"), lab.get("comm_name"),
                     _int(lab.get("n_nodes")), _int(lab.get("nranks")), op, size,
                     None if size is None else size_lower_bound(size), lab.get("algo_proto"),
                     lab.get("version"), lab.get("slurm_job_id")))  # fmt: skip
    return T.table_of(T.PROM, rows)
