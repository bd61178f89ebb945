"""All ranks of a run on one aligned timeline, as a Chrome-trace / Perfetto JSON object.

One process per rank (named `rank N (host)`, stragglers say so), its CPU threads and GPU
streams as tracks with every activity as it was ingested (Kineto categories and names kept,
so each process is itself a valid Kineto trace), and one `collectives` track per rank where
every matched collective call is split into the wait for the last arrival and the transfer
after it. Flow events link each instance's last arrival to the other ranks' calls. Times are
the aligned clock (analysis/sql/timeline_export.sql) relative to the run's first activity,
in µs with ns precision; `baseTimeNanoseconds` holds that origin. docs/postmortem.md
describes the layout.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from commwall.analysis.collectives.stragglers import straggler_ranks
from commwall.analysis.db import run_id
from commwall.analysis.report.session import run_session
from commwall.analysis.safe_text import visible, visible_column

#: Track ids of a rank's process beyond its CPU threads: GPU stream s is GPU_TID + s.
GPU_TID = 1_000_000_000
COLLECTIVES_TID = 2_000_000_000
CAT_WAIT, CAT_TRANSFER, CAT_FLOW = "commwall_wait", "commwall_transfer", "commwall_flow"


def _us(ns: int) -> float:
    return ns / 1000


def _meta(pid: int, name: str, args: dict, tid: int | None = None) -> dict:
    ev: dict[str, Any] = {"ph": "M", "pid": pid, "name": name, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _present(v: Any) -> bool:
    return v is not None and not pd.isna(v)


def _activity_events(acts: pd.DataFrame, t0: int) -> list[dict]:
    out = []
    for r in acts.itertuples(index=False):
        gpu = _present(r.stream)
        args: dict[str, Any] = {"kind": r.kind}
        if gpu:
            args["stream"] = int(r.stream)
        if _present(r.correlation):
            args["correlation"] = int(r.correlation)
        if _present(r.external_id):
            args["External id"] = int(r.external_id)
        out.append(
            {
                "ph": "X",
                "cat": r.cat or r.kind,
                "name": r.name or "",
                "pid": int(r.rank),
                "tid": GPU_TID + int(r.stream) if gpu else int(r.tid if _present(r.tid) else 0),
                "ts": _us(int(r.ts) - t0),
                "dur": _us(int(r.dur)),
                "args": args,
            }
        )
    return out


def _track_names(acts: pd.DataFrame) -> list[dict]:
    out = []
    tracks = acts[["rank", "tid", "stream"]].drop_duplicates()
    seen = set()
    for r in tracks.itertuples(index=False):
        if _present(r.stream):
            tid, name, order = GPU_TID + int(r.stream), f"GPU stream {int(r.stream)}", 2
        else:
            tid = int(r.tid) if _present(r.tid) else 0
            name, order = f"CPU thread {tid}", 1
        if (r.rank, tid) in seen:
            continue
        seen.add((r.rank, tid))
        out.append(_meta(int(r.rank), "thread_name", {"name": name}, tid))
        out.append(_meta(int(r.rank), "thread_sort_index", {"sort_index": order}, tid))
    return out


def _lanes(waits: pd.DataFrame) -> list[int]:
    """A lane per row so that no two calls of one rank overlap on a lane (trace viewers need
    the slices of a track nested): each call takes the first lane free at its arrival."""
    lane = [0] * len(waits)
    ends: dict[int, list[int]] = {}
    order = waits.assign(i=range(len(waits))).sort_values(["rank", "ts", "i"])
    for r in order.itertuples(index=False):
        free = ends.setdefault(int(r.rank), [])
        end = max(int(r.te), int(r.last_ts))
        k = next((k for k, e in enumerate(free) if e <= int(r.ts)), len(free))
        free[k : k + 1] = [end]
        lane[r.i] = k
    return lane


def _collective_events(waits: pd.DataFrame, t0: int) -> list[dict]:
    out = []
    for r in waits.itertuples(index=False):
        label = f"{r.op} #{int(r.instance)}" + (f" (pg {r.pg_name})" if _present(r.pg_name) else "")
        base = {"pid": int(r.rank), "tid": COLLECTIVES_TID + int(r.lane)}
        common = {"instance": int(r.instance), "op": r.op, "pg": r.pg_name}
        if _present(r.last_rank):
            common["last_rank"] = int(r.last_rank)
        if r.wait_ns > 0:
            out.append(
                base
                | {
                    "ph": "X",
                    "cat": CAT_WAIT,
                    "name": f"wait for rank {int(r.last_rank)}: {label}",
                    "ts": _us(int(r.ts) - t0),
                    "dur": _us(int(r.wait_ns)),
                    "args": common | {"wait_ns": int(r.wait_ns)},
                }
            )
        transfer = max(int(r.te) - int(r.last_ts), 0)
        out.append(
            base
            | {
                "ph": "X",
                "cat": CAT_TRANSFER,
                "name": f"transfer: {label}",
                "ts": _us(int(r.last_ts) - t0),
                "dur": _us(transfer),
                "args": common | {"transfer_ns": transfer, "is_last": bool(r.is_last)},
            }
        )
    return out


def _flow_events(waits: pd.DataFrame, t0: int) -> list[dict]:
    """Per instance, one flow from the last arrival's transfer to every other rank's."""
    out = []
    fid = 0
    for _, g in waits.groupby("ik", sort=True):
        last = g[g["is_last"]]
        if last.empty:
            continue
        src = last.iloc[0]
        ts = _us(int(src["last_ts"]) - t0)
        name = f"{src['op']} #{int(src['instance'])}"
        for r in g[~g["is_last"]].itertuples(index=False):
            fid += 1
            common = {"cat": CAT_FLOW, "name": name, "id": fid, "ts": ts}
            src_track = {"pid": int(src["rank"]), "tid": COLLECTIVES_TID + int(src["lane"])}
            out.append(common | src_track | {"ph": "s"})
            out.append(common | {"ph": "f", "bp": "e", "pid": int(r.rank)}
                       | {"tid": COLLECTIVES_TID + int(r.lane)})  # fmt: skip
    return out


def _processes(clock: pd.DataFrame, flagged: dict[int, str | None], t_first: float) -> list[dict]:
    out = []
    for r in clock.itertuples(index=False):
        rank = int(r.rank)
        host = r.host if _present(r.host) else "unknown host"
        name = f"rank {rank} ({host})"
        if rank in flagged:
            kind = flagged[rank]
            name += f" — straggler ({kind})" if kind else " — straggler"
            out.append(_meta(rank, "process_labels", {"labels": "straggler"}))
            out.append(
                {
                    "ph": "i",
                    "s": "p",
                    "pid": rank,
                    "tid": COLLECTIVES_TID,
                    "ts": t_first,
                    "cat": "commwall_straggler",
                    "name": f"straggler: rank {rank}" + (f" ({kind})" if kind else ""),
                }
            )
        out.append(_meta(rank, "process_name", {"name": name}))
        out.append(_meta(rank, "process_sort_index", {"sort_index": rank}))
        out.append(_meta(rank, "thread_name", {"name": "collectives (aligned)"}, COLLECTIVES_TID))
        out.append(_meta(rank, "thread_sort_index", {"sort_index": 0}, COLLECTIVES_TID))
    return out


def merged_trace(con: duckdb.DuckDBPyConnection, run: str) -> dict:
    """The merged timeline of run `run` as a Chrome-trace JSON object (`traceEvents`, ...),
    read inside the run's analysis session (the matching and clock fit computed once)."""
    rid = run_id(con, run)
    with run_session(con, rid):
        return _merged_trace(con, run, rid)


def _merged_trace(con: duckdb.DuckDBPyConnection, run: str, rid: int) -> dict:
    acts = con.execute("SELECT * FROM aligned_activities(?)", [rid]).df()
    clock = con.execute(
        "SELECT k.rank, any_value(k.host) AS host, coalesce(any_value(c.offset_ns), 0) AS offset_ns"
        " FROM ranks k LEFT JOIN rank_clock(?) c ON c.rank = k.rank WHERE k.run_id = ?"
        " GROUP BY k.rank ORDER BY k.rank",
        [rid, rid],
    ).df()
    waits = con.execute("SELECT * FROM collective_waits(?)", [rid]).df()
    if acts.empty:
        raise ValueError(f"run {run!r} has no activities to put on a timeline")
    for frame, col in ((acts, "name"), (clock, "host"), (waits, "op")):
        if col in frame.columns:
            frame[col] = visible_column(frame[col])
    t0 = int(acts["ts"].min())
    try:
        s = straggler_ranks(con, rid)
        flagged = {int(r.rank): r.kind for r in s[s["flagged"].fillna(False)].itertuples()}
    except (duckdb.Error, KeyError):
        flagged = {}
    waits["lane"] = _lanes(waits)
    events = _processes(clock, flagged, 0.0) + _track_names(acts)
    for rank, lane in waits[waits["lane"] > 0][["rank", "lane"]].drop_duplicates().values:
        name = {"name": f"collectives (aligned) {int(lane) + 1}"}
        events.append(_meta(int(rank), "thread_name", name, COLLECTIVES_TID + int(lane)))
        events.append(
            _meta(int(rank), "thread_sort_index", {"sort_index": 0}, COLLECTIVES_TID + int(lane))
        )
    events += _activity_events(acts, t0)
    events += _collective_events(waits, t0) + _flow_events(waits, t0)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": t0,
        "otherData": {
            "producer": "commwall",
            "run": visible(run),
            "clock": "aligned: each host's offset from the matched collectives' end times; "
            "ts relative to baseTimeNanoseconds",
            "offsets_ns": {str(int(r.rank)): int(r.offset_ns) for r in clock.itertuples()},
            "stragglers": sorted(flagged),
        },
    }
