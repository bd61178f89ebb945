"""PyTorch Flight Recorder dumps (one per rank, JSON or pickle) → the fr_* tables.

A dump is what `torch._C._distributed_c10d._dump_fr_trace_json()` / `_dump_fr_trace()` return,
or what the watchdog writes to `TORCH_FR_DUMP_TEMP_FILE<rank>` on a timeout: a dict with
`version`, `pg_config`, `pg_status` and `entries` (the ring buffer of the rank's last
collectives). Pickle dumps are untrusted input and are read by ingest/safe_pickle.py, which
builds plain values only. The dump does not say its rank: it comes from `--rank`, else from the
digits that end the file name (`rank3.json.gz`, `nccl_trace_rank_3`), the rule PyTorch's own
analyser uses. See docs/hangs.md; tables in ingest/schema_fr.sql.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from commwall.ingest import safe_pickle
from commwall.ingest.collective_names import normalize_op
from commwall.ingest.errors import IngestError
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.schema import TEXT_CUT
from commwall.ingest.sources import read_bytes

FORMAT = "flight_recorder"
PICKLE_PROTO = b"\x80"
_SUFFIXES = (".gz", ".json", ".pkl", ".pickle", ".bin", ".txt")
_TRAILING_DIGITS = re.compile(r"(\d+)$")

I32, I64, STR, BOOL = pa.int32(), pa.int64(), pa.string(), pa.bool_()
SIZES = pa.list_(pa.list_(I64))
NAMES = pa.list_(STR)

SCHEMAS: dict[str, pa.Schema] = {
    "fr_dumps": pa.schema(
        [("rank", I32), ("rank_source", STR), ("form", STR), ("version", STR),
         ("comm_lib_version", STR), ("n_entries", I64)]
    ),
    "fr_groups": pa.schema(
        [("rank", I32), ("pg_name", STR), ("pg_desc", STR), ("ranks", pa.list_(I32))]
    ),
    "fr_pg_status": pa.schema(
        [("rank", I32), ("pg_id", STR), ("last_enqueued", I64), ("last_started", I64),
         ("last_completed", I64)]
    ),
    "fr_entries": pa.schema(
        [("rank", I32), ("record_id", I64), ("pg_id", I64), ("pg_name", STR), ("pg_desc", STR),
         ("collective_seq_id", I64), ("p2p_seq_id", I64), ("op_id", I64), ("is_p2p", BOOL),
         ("profiling_name", STR), ("op", STR), ("input_sizes", SIZES), ("output_sizes", SIZES),
         ("in_nelems", I64), ("out_nelems", I64), ("input_dtypes", NAMES),
         ("output_dtypes", NAMES), ("state", STR), ("time_created_ns", I64),
         ("time_started_ns", I64), ("time_completed_ns", I64), ("timeout_ms", I64),
         ("retired", BOOL), ("thread_name", STR)]
    ),
}  # fmt: skip

_REQUIRED = ("record_id", "process_group", "collective_seq_id", "profiling_name", "state")


#: Keys of a Kineto trace's top level (its `traceEvents` can come after the sniffed head when
#: its distributedInfo lists many process groups).
_KINETO_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"distributedInfo"', b'"deviceProperties"')


def sniff(path: Path, head_bytes: bytes) -> bool:
    """A Flight Recorder dump: a pickle (protocol 2+) whose first keys name `entries` or
    `pg_config`, or a JSON object with an `entries` list of collective records."""
    h = head_bytes.lstrip()
    if h[:1] == PICKLE_PROTO:
        return b"pg_config" in h[:4096] or b"entries" in h[:4096]
    if h[:1] != b"{" or any(k in h for k in _KINETO_KEYS):
        return False  # a Kineto trace names pg_config too, inside its distributedInfo
    return b'"pg_config"' in h or (b'"entries"' in h and b'"collective_seq_id"' in h)


def rank_of(path: Path, given: int | None) -> tuple[int, str]:
    """(rank, where it came from): `--rank`, else the digits that end the file name once
    known suffixes are taken off."""
    if given is not None:
        return given, "option"
    return _named_rank(path), "file_name"


def _named_rank(path: Path) -> int:
    name = path.name
    while name.lower().endswith(_SUFFIXES):
        name = name[: name.rfind(".")]
    m = _TRAILING_DIGITS.search(name)
    if m is None:
        raise IngestError(
            path,
            "Flight Recorder dumps do not record their rank: name the file so that it ends "
            "with the rank (e.g. rank3.json, as PyTorch writes nccl_trace_rank_3) or pass --rank",
        )
    digits = m.group(1)
    rank = int(digits) if len(digits) <= 10 else RANK_MAX + 1
    if rank > RANK_MAX:
        raise IngestError(path, f"the file name gives rank {rank}, over {RANK_MAX}")
    return rank


def load(path: Path, max_bytes: int) -> tuple[dict, str]:
    """(the dump as plain values, 'json' | 'pickle'). Pickle is never run: see safe_pickle."""
    data = read_bytes(path, max_bytes)
    first = bytes(data[:64]).lstrip()[:1]
    if first not in (b"{", b"["):  # pickle (any protocol): never run, see safe_pickle
        try:
            dump = safe_pickle.loads(bytes(data))
        except safe_pickle.UnsafePickle as e:
            raise IngestError(
                path,
                f"refused pickle: {e}. Only plain Flight Recorder dumps are read; dump JSON "
                "instead with torch._C._distributed_c10d._dump_fr_trace_json()",
            ) from e
        form = "pickle"
    else:
        try:
            dump = json.loads(bytes(data))
        except (ValueError, RecursionError) as e:
            raise IngestError(path, f"not valid JSON ({type(e).__name__}: {e})") from e
        form = "json"
    if not isinstance(dump, dict) or not isinstance(dump.get("entries", []), list):
        raise IngestError(path, "not a Flight Recorder dump (expected a dict with 'entries')")
    if "version" not in dump:
        raise IngestError(path, "not a Flight Recorder dump (no 'version')")
    return dump, form


INT64_MAX = (1 << 63) - 1
RANK_MAX = (1 << 31) - 1
MAX_TENSORS, MAX_DIMS = 4096, 64
#: Text fields (names, states, versions) are cut to this many characters.
MAX_TEXT = TEXT_CUT


def _int(v: Any) -> int | None:
    """An integer field (strings of digits too, as pg_status writes them); None for anything
    else or outside int64."""
    if isinstance(v, bool):
        v = int(v)
    elif isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 21:
        v = int(v)
    if isinstance(v, int) and -INT64_MAX <= v <= INT64_MAX:
        return v
    return None


def _str(v: Any) -> str | None:
    """A text field: strings (cut to MAX_TEXT characters) and numbers as text; None for
    anything else (never the text of a container, which a crafted dump could make enormous,
    nor of an integer beyond int64, which a pickle can hold with any number of digits)."""
    if isinstance(v, str):
        return v[:MAX_TEXT]
    if isinstance(v, float) or (not isinstance(v, bool) and _int(v) is not None):
        return str(v)
    return None


def _time(v: Any) -> int | None:
    """A discovered-time field: None (pickle) and 0 (JSON) both mean 'not seen'."""
    t = _int(v)
    return t if t else None


def _sizes(v: Any) -> list[list[int]] | None:
    """Tensor shapes: a list of lists of ints (at most MAX_TENSORS of MAX_DIMS); else None."""
    if not isinstance(v, list | tuple) or len(v) > MAX_TENSORS:
        return None
    out = []
    for s in v:
        if not isinstance(s, list | tuple) or len(s) > MAX_DIMS:
            return None
        dims = [d for d in map(_int, s) if d is not None]
        if len(dims) != len(s):
            return None
        out.append(dims)
    return out


def _nelems(sizes: list[list[int]] | None) -> int | None:
    if sizes is None:
        return None
    total = 0
    for s in sizes:
        n = 1
        for d in s:
            n *= d
        total += n
    return _int(total)


def _names(v: Any) -> list[str] | None:
    if not isinstance(v, list | tuple) or len(v) > MAX_TENSORS:
        return None
    names = [n for n in map(_str, v) if n is not None]
    return names if len(names) == len(v) else None


def _entry(path: Path, rank: int, i: int, e: Any) -> dict:
    if not isinstance(e, dict):
        raise IngestError(path, f"entry {i} is not a record")
    missing = [k for k in _REQUIRED if k not in e]
    if missing:
        raise IngestError(path, f"entry {i} has no {', '.join(missing)}")
    pg = e["process_group"]
    if not isinstance(pg, list | tuple) or len(pg) != 2 or None in map(_str, pg):
        raise IngestError(path, f"entry {i}: process_group is not a (name, description) pair")
    name, state = _str(e["profiling_name"]), _str(e["state"])
    if name is None or state is None:
        raise IngestError(path, f"entry {i}: profiling_name or state is not text")
    seq = _int(e["collective_seq_id"])
    if seq is None:
        raise IngestError(path, f"entry {i}: collective_seq_id is not an integer")
    ins, outs = _sizes(e.get("input_sizes")), _sizes(e.get("output_sizes"))
    return {
        "rank": rank,
        "record_id": _int(e["record_id"]),
        "pg_id": _int(e.get("pg_id")),
        "pg_name": _str(pg[0]),
        "pg_desc": _str(pg[1]),
        "collective_seq_id": seq,
        "p2p_seq_id": _int(e.get("p2p_seq_id")),
        "op_id": _int(e.get("op_id")),
        "is_p2p": bool(e.get("is_p2p", False)),
        "profiling_name": name,
        "op": normalize_op(name),
        "input_sizes": ins,
        "output_sizes": outs,
        "in_nelems": _nelems(ins),
        "out_nelems": _nelems(outs),
        "input_dtypes": _names(e.get("input_dtypes")),
        "output_dtypes": _names(e.get("output_dtypes")),
        "state": state,
        "time_created_ns": _time(e.get("time_created_ns")),
        "time_started_ns": _time(e.get("time_discovered_started_ns")),
        "time_completed_ns": _time(e.get("time_discovered_completed_ns")),
        "timeout_ms": _int(e.get("timeout_ms")),
        "retired": e.get("retired") if isinstance(e.get("retired"), bool) else None,
        "thread_name": _str(e.get("thread_name")),
    }


def _group_ranks(path: Path, key: str, ranks: Any) -> list[int]:
    """The members of a pg_config entry: PyTorch writes them as the text '[0, 1, 2]'."""
    try:
        value = json.loads(ranks) if isinstance(ranks, str) else ranks
        out = [int(r) for r in value]
    except (ValueError, TypeError, OverflowError, RecursionError) as e:  # 1e400, [[[[...]]]]
        what = (_str(ranks) or type(ranks).__name__)[:40]
        raise IngestError(path, f"pg_config[{key!r}]: ranks {what!r}: not a list of ranks") from e
    if not all(0 <= r <= RANK_MAX for r in out):
        raise IngestError(path, f"pg_config[{key!r}]: a rank outside 0..{RANK_MAX}")
    return out


def _groups(path: Path, rank: int, config: Any) -> list[dict]:
    if not isinstance(config, dict):
        raise IngestError(path, "pg_config is not a dict")
    rows = []
    for key, g in config.items():
        g = g if isinstance(g, dict) else {}
        rows.append(
            {
                "rank": rank,
                "pg_name": _str(key),
                "pg_desc": _str(g.get("desc")),
                "ranks": _group_ranks(path, str(_str(key)), g.get("ranks", [])),
            }
        )
    return rows


def _status(rank: int, status: Any) -> list[dict]:
    if not isinstance(status, dict):
        return []
    return [
        {
            "rank": rank,
            "pg_id": _str(pg),
            "last_enqueued": _int(s.get("last_enqueued_collective")),
            "last_started": _int(s.get("last_started_collective")),
            "last_completed": _int(s.get("last_completed_collective")),
        }
        for pg, s in status.items()
        if isinstance(s, dict)
    ]


def parse(path: str | Path, opts: ParseOptions | None = None) -> Parsed:
    """Parse one rank's Flight Recorder dump (JSON or pickle, plain or gzip)."""
    p = Path(path)
    opts = opts or ParseOptions()
    rank, source = rank_of(p, opts.rank)
    dump, form = load(p, opts.max_bytes)
    entries = [_entry(p, rank, i, e) for i, e in enumerate(dump.get("entries", []))]
    dumps = [
        {
            "rank": rank,
            "rank_source": source,
            "form": form,
            "version": _str(dump["version"]),
            "comm_lib_version": _str(dump.get("comm_lib_version")) or None,
            "n_entries": len(entries),
        }
    ]
    rows = {
        "fr_dumps": dumps,
        "fr_groups": _groups(p, rank, dump.get("pg_config", {})),
        "fr_pg_status": _status(rank, dump.get("pg_status")),
        "fr_entries": entries,
    }
    tables = {k: pa.Table.from_pylist(v, schema=SCHEMAS[k]) for k, v in rows.items()}
    detail = {"rank": rank, "rank_source": source, "form": form, "entries": len(entries),
              "version": dumps[0]["version"]}  # fmt: skip
    return Parsed(FORMAT, tables, detail)
