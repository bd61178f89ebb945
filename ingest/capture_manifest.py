"""A run directory written by `commwall capture` (docs/capture.md): recognised by its
`manifest.json`, checked before analysis, and its findings stored with the run (table
`capture_runs`, ingest/schema_capture.sql).

The checks read the manifest, what the script helper recorded per rank (`ranks/rank<R>.json`),
the directory's listing and what the ingest just stored for the run (ranks, steps, Flight
Recorder dumps), and say in one summary what is missing or inconsistent: "traces from 6 of 8
ranks", "ranks profiled different steps", "no NCCL log for host h3", "Flight Recorder was off".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commwall import capture as layout
from commwall.ingest.errors import IngestError

if TYPE_CHECKING:
    import duckdb

#: The largest manifest or per-rank record read (they are a few kB).
MAX_BYTES = 1 << 20
#: Ranks named in one finding before "and N more".
SHOWN = 8


@dataclass
class Capture:
    """A capture directory: its manifest and the helper's record of each rank."""

    root: Path
    manifest: dict[str, Any]
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)

    def own_files(self) -> set[Path]:
        """The files capture itself wrote (not traces): left out of the ingest's parsing."""
        out = {(self.root / layout.MANIFEST).resolve()}
        out |= {p.resolve() for p in (self.root / layout.RANKS_DIR).glob("rank*.json")}
        return out


def find(args: Iterable[str]) -> Capture | None:
    """The capture directory among the ingest's PATH arguments (a directory holding a
    manifest.json that says it is one), or None; IngestError for a manifest that cannot be
    read, or for several capture directories in one run."""
    found = [Path(a) for a in args if (Path(a) / layout.MANIFEST).is_file()]
    captures = [c for c in (read(p) for p in found) if c is not None]
    if len(captures) > 1:
        names = ", ".join(str(c.root) for c in captures)
        raise IngestError(names, "several capture directories in one run; ingest each as a run")
    return captures[0] if captures else None


def _json(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise IngestError(path, f"{size:,} bytes, over the {MAX_BYTES:,} a capture file has")
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        raise IngestError(path, f"cannot read it as JSON ({e})") from e


def read(root: Path) -> Capture | None:
    """The capture in directory `root`; None when its manifest.json is not commwall's."""
    path = root / layout.MANIFEST
    data = _json(path)
    if not isinstance(data, dict) or layout.MARK not in data:
        return None
    if data[layout.MARK] != layout.VERSION:
        raise IngestError(path, f"capture manifest version {data[layout.MARK]!r}, this reads 1")
    for key, kind in (("command", list), ("start", dict), ("settings", dict)):
        if not isinstance(data.get(key), kind):
            raise IngestError(path, f"{key!r} missing or not a {kind.__name__}")
    ranks: dict[int, dict[str, Any]] = {}
    for p in sorted((root / layout.RANKS_DIR).glob("rank*.json")):
        info = _json(p)
        if not isinstance(info, dict) or not isinstance(info.get("rank"), int):
            raise IngestError(p, "not a capture record of one rank (no integer 'rank')")
        ranks[info["rank"]] = info
    return Capture(root, data, ranks)


def _ranges(steps: list[int]) -> str:
    """2, 3, 4, 7 -> '2-4, 7'."""
    out: list[str] = []
    for s in steps:
        if out and s == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{s}"
        else:
            out.append(str(s))
    return ", ".join(out)


def _names(ranks: Iterable[int]) -> str:
    r = sorted(ranks)
    more = f" and {len(r) - SHOWN} more" if len(r) > SHOWN else ""
    return ", ".join(map(str, r[:SHOWN])) + more


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def findings(con: duckdb.DuckDBPyConnection, rid: int, cap: Capture) -> list[str]:
    """What is missing or inconsistent in the capture, each in a few words; [] when nothing."""
    m, out = cap.manifest, []
    if m.get("end") is None:
        out.append("the capture did not finish (manifest.json has no end time)")
    status = _int(m.get("exit_status"))
    if status:
        sig = m.get("signal")
        out.append(f"the job exited with status {status}" + (f" ({sig})" if sig else ""))
    traced = [r for (r,) in con.execute(_TRACED, [rid]).fetchall()]
    sizes = [_int(i.get("world_size")) for i in cap.ranks.values()]
    stored = con.execute("SELECT max(world_size) FROM ranks WHERE run_id = ?", [rid]).fetchone()
    world = max([s for s in sizes if s] + [stored[0] if stored and stored[0] else 0]) or None
    if not traced:
        out.append("no profiler traces (the script did not use commwall.capture.profile, or "
                   "ended before its first profiled step)")  # fmt: skip
    elif world and len(traced) < world:
        missing = set(range(world)) - set(traced)
        out.append(f"traces from {len(traced)} of {world} ranks (none from rank "
                   f"{_names(missing)})")  # fmt: skip
    by_rank = {r: list(s) for r, s in con.execute(_STEPS, [rid]).fetchall()}
    if len({tuple(s) for s in by_rank.values()}) > 1:
        shown = "; ".join(f"rank {r}: {_ranges(s)}" for r, s in sorted(by_rank.items())[:SHOWN])
        out.append(f"ranks profiled different steps ({shown})")
    out += _flight_recorder(con, rid, cap, status)
    out += _nccl_logs(con, rid, cap)
    inspector = cap.root / layout.INSPECTOR_DIR
    if m["settings"].get("inspector") and not any(inspector.rglob("*")):
        out.append("NCCL Inspector was on but wrote nothing")
    return out


#: Ranks with a trace (Kineto or Nsight Systems) stored in the run.
_TRACED = (
    "SELECT DISTINCT r.rank FROM ranks r JOIN files f USING (file_id) "
    "WHERE r.run_id = ? AND f.format IN ('kineto', 'nsys') ORDER BY 1"
)
_STEPS = "SELECT rank, list(DISTINCT step ORDER BY step) FROM steps WHERE run_id = ? GROUP BY rank"


def _flight_recorder(
    con: duckdb.DuckDBPyConnection, rid: int, cap: Capture, status: int | None
) -> list[str]:
    off = [r for r, i in cap.ranks.items() if i.get("flight_recorder_buffer") == 0]
    if not cap.manifest["settings"].get("flight_recorder") or (off and len(off) == len(cap.ranks)):
        return ["Flight Recorder was off"]
    if off:
        return [f"Flight Recorder was off on rank {_names(off)}"]
    row = con.execute("SELECT count(*) FROM fr_dumps WHERE run_id = ?", [rid]).fetchone()
    if status and not (row and row[0]):
        return ["the job failed but left no Flight Recorder dump"]
    return []


def _nccl_logs(con: duckdb.DuckDBPyConnection, rid: int, cap: Capture) -> list[str]:
    """Hosts whose ranks used NCCL but left no NCCL log (files are named <host>.<pid>.log)."""
    level = cap.manifest["settings"].get("nccl_debug")
    if level is None:
        return []
    rows = con.execute(
        "SELECT DISTINCT host FROM ranks WHERE run_id = ? AND backend ILIKE '%nccl%' "
        "AND host IS NOT NULL",
        [rid],
    ).fetchall()
    hosts = {h for (h,) in rows} | {
        str(i["host"])
        for i in cap.ranks.values()
        if "nccl" in str(i.get("backend") or "") and i.get("host")
    }
    if not hosts:
        return []  # no rank used NCCL (gloo, or no record): no log is expected
    out = []
    if str(level).upper() not in ("INFO", "TRACE"):
        out.append(f"NCCL_DEBUG was {level}: the NCCL logs hold no INFO lines")
    logged = {
        p.name.rsplit(".", 2)[0]
        for p in (cap.root / layout.NCCL_DIR).glob("*.log")
        if p.is_file() and p.stat().st_size > 0
    }
    # NCCL prints the host cut at its first '.'
    missing = sorted(h for h in hosts if h.split(".")[0] not in logged and h not in logged)
    out += [f"no NCCL log for host {h}" for h in missing[:SHOWN]]
    if len(missing) > SHOWN:
        out.append(f"no NCCL log for {len(missing) - SHOWN} more hosts")
    return out


def summary(con: duckdb.DuckDBPyConnection, rid: int, found: list[str]) -> str:
    """The findings in one line, or what a complete capture holds."""
    if found:
        return "incomplete: " + "; ".join(found)
    n = con.execute(_TRACED.replace("DISTINCT r.rank", "count(DISTINCT r.rank)"), [rid])
    row = n.fetchone()
    steps = con.execute("SELECT list(DISTINCT step ORDER BY step) FROM steps WHERE run_id = ?",
                        [rid]).fetchone()  # fmt: skip
    ranks = row[0] if row else 0
    shown = f", steps {_ranges(list(steps[0]))}" if steps and steps[0] else ""
    return f"complete: traces from all {ranks} rank{'s' if ranks != 1 else ''}{shown}"


def record(con: duckdb.DuckDBPyConnection, rid: int, cap: Capture) -> str:
    """Check the capture against what run `rid` now holds and store the outcome (one row per
    run, replaced on a re-ingest), inside the ingest's transaction; the summary."""
    found = findings(con, rid, cap)
    line = summary(con, rid, found)
    m = cap.manifest
    start, end = m.get("start") or {}, m.get("end") or {}
    con.execute("DELETE FROM capture_runs WHERE run_id = ?", [rid])
    con.execute(
        "INSERT INTO capture_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            rid,
            json.dumps(m.get("command")),
            [str(h) for h in m.get("hosts") or []],
            _int(start.get("ns")),
            _int(end.get("ns")),
            _int(m.get("exit_status")),
            found,
            line,
            json.dumps(m),
        ],
    )
    return line
