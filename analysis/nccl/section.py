"""The `nccl` report section: what a run's NCCL_DEBUG logs say (thin Python over the
analysis/sql/nccl_*.sql macros). Every key is present whether or not the run has a log."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from commwall.analysis.db import has_table, scalar
from commwall.analysis.nccl.crashes import _crashed, _later, crash_sentence, oom_quote
from commwall.analysis.nccl.rows import rows as _rows
from commwall.analysis.nccl.rows import where as _where
from commwall.analysis.nccl.tests_tables import _tests, test_sentence

UPLOAD_HINT = (
    "no NCCL log in this run: ingest the job's stdout/stderr (one file per process, or all "
    "interleaved) from a run with NCCL_DEBUG=INFO; NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV,COLL "
    "adds topology and per-collective sizes"
)
TCP_REASONS = {
    "rdma_devices": "IB/RoCE devices were listed, yet TCP sockets carried inter-node traffic",
    "ib_disabled": "NCCL_IB_DISABLE=1 forced TCP sockets between nodes",
    "net_forced": "NCCL_NET=Socket forced TCP sockets between nodes",
    "no_ib_device": "NCCL found no IB device (RDMA libraries or devices missing, e.g. in the "
    "container) and fell back to TCP sockets between nodes",
    "no_rdma_seen": "TCP sockets carried inter-node traffic; no RDMA network was seen",
}
INTER_NODE_KEYS = ("basis", "network", "network_basis")
#: Environment settings that change what NCCL does on the data path, and what each means
#: ({v}: the value); a finding names them, since a wall can be one of them.
NOTABLE_ENV = {
    "NCCL_P2P_DISABLE": "GPUs of a node exchange data through host memory, not NVLink/PCIe "
    "peer-to-peer",
    "NCCL_SHM_DISABLE": "no shared-memory transport between processes of a node",
    "NCCL_ALGO": "the collective algorithm is forced ({v}): NCCL's own choice per size is off",
    "NCCL_PROTO": "the protocol is forced ({v}): NCCL's own choice per size is off",
    "NCCL_MAX_NCHANNELS": "at most {v} channels per collective",
    "NCCL_MAX_CTAS": "at most {v} CTAs (channels) per collective",
    "NCCL_NET_GDR_LEVEL": "GPU Direct RDMA allowed only up to distance {v}",
}
#: … for these only when set to 1 (0 is the default).
ENV_WHEN_ONE = {"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"}
STATUSES = ("not_enqueued", "waiting", "completed", "crashed", "no_log")


def has_nccl_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the store has the nccl_* tables (stores made before they existed do not)."""
    return has_table(con, "nccl_files")


def _versions(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    detail = _rows(con, "nccl_versions", rid)
    by_rank = [
        {"rank": r["rank"], "nccl_version": r["nccl_version"], "cuda_version": r["cuda_version"]}
        for r in _rows(con, "nccl_proc_ranks", rid)
        if r["rank"] is not None
    ]
    shape = scalar(con, "SELECT min(shape_version) FROM nccl_files WHERE run_id = ?", [rid])
    return {
        "versions": [d["version"] for d in detail],
        "version_mismatch": len(detail) > 1,
        "versions_detail": detail,
        "version_by_rank": by_rank,
        "shape_version": shape,
    }


def _ranks(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    cover = _rows(con, "nccl_rank_coverage", rid)
    procs = _rows(con, "nccl_proc_ranks", rid)
    sources: dict[str, int] = {}
    for p in procs:
        if p["rank_source"]:
            sources[p["rank_source"]] = sources.get(p["rank_source"], 0) + 1
    world = scalar(con, "SELECT world_size FROM nccl_world(?)", [rid])
    unlisted = bool(scalar(con, "SELECT claim_unlisted FROM nccl_listed_world(?)", [rid]))
    return {
        "world_size": world,
        # a size too large to list (nccl_listed_world): its ranks without a log are not listed
        "world_size_unlisted": unlisted,
        "with_log": [c["rank"] for c in cover if c["has_log"]],
        "without_log": [c["rank"] for c in cover if not c["has_log"]],
        "processes": len(procs),
        "unmapped_processes": sum(p["rank"] is None for p in procs),
        "mapped_by": sources,
    }


def _gdr(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    rows = _rows(con, "nccl_gdr", rid)
    if not rows:
        return {"gdr": None, "gdr_evidence": None}
    r = rows[0]
    where = _where(con, r["file_id"], r["line_no"]) or {}
    return {"gdr": r["gdr"], "gdr_evidence": {"basis": r["basis"], **where, "text": r["evidence"]}}


def _tcp(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    r = _rows(con, "nccl_tcp_fallback", rid)[0]
    return {
        "detected": r["detected"],
        "reason": r["reason"],
        "explanation": TCP_REASONS.get(r["reason"]),
        "evidence": None
        if not r["detected"]
        else {**(_where(con, r["file_id"], r["line_no"]) or {}), "text": r["evidence"]},
    }


def _problems(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, dict]:
    out = {}
    for r in _rows(con, "nccl_problem_counts", rid):
        first = None
        if r["count"]:
            first = {
                **(_where(con, r["first_file_id"], r["first_line"]) or {}),
                "rank": r["first_rank"],
                "kind": r["first_kind"],
                "text": r["first_text"],
            }
        key = "handled_returns" if r["category"] == "handled" else r["category"] + "s"
        out[key] = {"count": r["count"], "first": first}
    return out


#: Interrupts listed in the section (the count is of all).
MAX_INTERRUPTS = 10


def _interrupts(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    rows = _rows(con, "nccl_interrupts", rid)
    return {
        "count": len(rows),
        "lines": [
            {**(_where(con, r["file_id"], r["line_no"]) or {}), "text": r["message"]}
            for r in rows[:MAX_INTERRUPTS]
        ],
    }


def _interrupt_finding(s: Mapping[str, Any]) -> str | None:
    """The launcher's stop lines in one sentence (None without any): where they are and what
    they can mean. After a failure (a timeout, a rank that died) they are as likely the launcher
    killing the other tasks as anyone stopping the job, and the finding comes after it."""
    n, lines = s["interrupted"]["count"], s["interrupted"]["lines"]
    if not n:
        return None
    files = {x.get("file") for x in lines}
    where = ", ".join(
        (f"{Path(x['file']).name}:" if len(files) > 1 and x.get("file") else "") + str(x["line"])
        for x in lines
    )
    more = f" and {n - len(lines)} more" if n > len(lines) else ""
    return (
        f"a launcher stopped the job from outside ({n} line(s): {where}{more}; first: "
        f"{lines[0]['text']}): a user's Ctrl-C, a signal, the scheduler's cancellation, or the "
        "launcher ending the other tasks after one failed; what was running then did not "
        "finish, and its last lines before the stop show what it was doing"
    )


def _collnet_fallback(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    rows = _rows(con, "nccl_collnet_fallbacks", rid)
    first = None
    if rows:
        r = rows[0]
        first = {**(_where(con, r["file_id"], r["line_no"]) or {}), "text": r["message"]}
    return {"processes": len({(r["file_id"], r["proc"]) for r in rows}), "first": first}


def _env(con: duckdb.DuckDBPyConnection, rid: int) -> list[dict[str, Any]]:
    return [
        {
            "name": r["name"],
            "value": r["value"],
            "n_processes": r["n_processes"],
            **(_where(con, r["file_id"], r["line_no"]) or {}),
        }
        for r in _rows(con, "nccl_env_settings", rid)
    ]


def notable_env(s: Mapping[str, Any]) -> list[str]:
    """One sentence per data-path setting of the section's `env` (NOTABLE_ENV)."""
    out = []
    for e in s.get("env") or []:
        what = NOTABLE_ENV.get(e["name"])
        if what is None or (e["name"] in ENV_WHEN_ONE and str(e["value"]).strip() != "1"):
            continue
        out.append(
            f"{e['name']}={e['value']} set by environment ({e['n_processes']} process(es)): "
            + what.format(v=e["value"])
        )
    return out


def _timeout_collectives(con: duckdb.DuckDBPyConnection, rid: int) -> list[dict]:
    groups: dict[tuple, dict] = {}
    for r in _rows(con, "nccl_timeout_ranks", rid):
        g = groups.setdefault(
            (r["pg"], r["seq"]),
            {"pg": r["pg"], "seq": r["seq"], "op_type": r["op_type"], **{s: [] for s in STATUSES}},
        )
        g[r["status"]].append(r["rank"])
        if r["crash"]:
            g.setdefault("crashes", {})[r["rank"]] = r["crash"]
            g.setdefault("crash_details", {})[r["rank"]] = {
                "kind": r["crash_kind"],
                **(_where(con, r["crash_file_id"], r["crash_line"]) or {}),
                "later_crash": r["later_crash"],
                "before_timeout": r["crash_before_timeout"],
            }
    for g in groups.values():
        # a rank that never issued the collective, or died while the others waited in it
        g["likely_culprits"] = sorted(g["not_enqueued"] + g["crashed"])
        g.setdefault("crashes", {})
        g.setdefault("crash_details", {})
    return list(groups.values())


def _crashed_before(rank: int, crash: str, detail: Mapping[str, Any]) -> str:
    """`rank 7 died: ...` for a timeout finding: its first fatal error, whether it came before
    the watchdog timed out, and its last one when it has several (the later ones followed)."""
    kind = detail.get("kind")
    what = f"it ran out of GPU memory ({oom_quote(crash)})" if kind == "oom" else crash
    when = " before the watchdog timed out" if detail.get("before_timeout") else ""
    return f"rank {rank} died: {what}{when}{_later(detail.get('later_crash'))}"


def _collectives(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    by_op = _rows(con, "nccl_coll_sizes", rid)
    steps = _rows(con, "nccl_coll_steps", rid)
    per_step: dict[int, dict] = {}
    for s in steps:
        d = per_step.setdefault(s["step"], {"step": s["step"], "ranks": 0, "calls": 0, "bytes": 0})
        d["ranks"] += 1
        d["calls"] += s["calls"]
        d["bytes"] += s["bytes"] or 0
    for d in per_step.values():
        d["bytes_per_rank"] = d["bytes"] / d["ranks"]
    return {
        "calls": sum(r["calls"] for r in by_op),
        "by_op": by_op,
        "per_step": [per_step[k] for k in sorted(per_step)],
        "aligned_ranks": sorted({s["rank"] for s in steps}),
    }


def gdr_off_matters(s: Mapping[str, Any]) -> bool:
    """Whether GPU Direct RDMA being off costs the job anything: some of its traffic goes over
    the network (it crosses nodes, or NET connections were seen). A one-host job whose only
    evidence is the NICs' capability lines sends nothing through them."""
    if s.get("gdr") is not False:
        return False
    crosses = (s.get("inter_node") or {}).get("value") is not False
    return crosses or (s.get("gdr_evidence") or {}).get("basis") == "connections"


def _findings(s: dict[str, Any]) -> list[str]:
    """One sentence per notable fact, most important first."""
    out = []
    stopped = _interrupt_finding(s)
    crashed = s["crashed"]
    failed = bool(s["timeouts"]["collectives"] or crashed["by_rank"] or crashed["unattributed"])
    if stopped and not failed:
        out.append(stopped)
    if s["tcp_fallback"]["detected"]:
        out.append(s["tcp_fallback"]["explanation"])
    for t in s["timeouts"]["collectives"]:
        culprits = t["likely_culprits"]
        if culprits:
            why = []
            if t["not_enqueued"]:
                why.append(f"rank(s) {t['not_enqueued']} never issued it")
            why += [
                _crashed_before(r, msg, t["crash_details"].get(r) or {})
                for r, msg in sorted(t["crashes"].items())
            ]
            out.append(
                f"watchdog timeout on {t['op_type']} SeqNum {t['seq']} (PG {t['pg']}): "
                f"{'; '.join(why)} — likely culprit(s); {len(t['waiting'])} rank(s) waited "
                "for them"
            )
    died = crash_sentence(s["crashed"]) if not s["timeouts"]["collectives"] else None
    if died:
        out.append(died)
    if stopped and failed:  # after the failure: a launcher kills the other tasks of a job too
        out.append(stopped)
    out += notable_env(s)
    if s["version_mismatch"]:
        out.append(f"NCCL versions differ across the job: {', '.join(s['versions'])}")
    if gdr_off_matters(s):
        out.append("GPU Direct RDMA is off: network traffic is staged through host memory")
    if s["collnet_fallback"]["processes"]:
        out.append(
            f"CollNet could not be initialised ({s['collnet_fallback']['processes']} process(es)): "
            "NCCL fell back to point-to-point, so SHARP / in-network reduction is off; errors "
            "logged just before come from that attempt"
        )
    for key in ("errors", "warnings"):
        if s[key]["count"]:
            out.append(f"NCCL {key}: {s[key]['count']}; first: {s[key]['first']['text']}")
    if s["aborts"]["count"]:
        out.append(
            f"{s['aborts']['count']} error return(s) unwound a communicator's abort (NCCL's "
            "`abort called`: teardown at exit, e.g. without destroy_process_group, or after a "
            "failure elsewhere); not counted as errors"
        )
    wrong = [t for t in s["tests"] if t["wrong_values"] or t["wrong_rows"]]
    out += [x for t in wrong if (x := test_sentence(t))]
    missing, world = s["ranks"]["without_log"], s["ranks"]["world_size"]
    if s["ranks"].get("world_size_unlisted"):
        out.append(
            f"a communicator claims {world:,} ranks, more than any job known to run: kept as "
            "claimed, but its ranks are not listed (only those some line names); check the log"
        )
    elif missing and s["ranks"]["with_log"]:
        out.append(f"no NCCL log for {len(missing)} of {world} ranks (first: rank {missing[0]})")
    if s["handled_returns"]["count"]:
        first = s["handled_returns"]["first"]
        out.append(
            f"{s['handled_returns']['count']} error return(s) that the thread went on from "
            "(no warning before, an ordinary line of its own after: a probe or an optional "
            f"feature whose failure NCCL handles; first: {first['text']}); not counted as errors"
        )
    return out


def empty_section() -> dict[str, Any]:
    """The section of a run without NCCL logs: every key, nothing found."""
    s: dict[str, Any] = {
        "present": False, "hint": UPLOAD_HINT, "findings": [], "files": 0,
        "lines": dict.fromkeys(("total", "nccl", "recognised", "unknown", "damaged", "torch"), 0)
        | {"share_recognised": None, "unknown_families": []},
        "versions": [], "version_mismatch": False, "versions_detail": [], "version_by_rank": [],
        "shape_version": None,
        "ranks": {"world_size": None, "world_size_unlisted": False, "with_log": [],
                  "without_log": [], "processes": 0,
                  "unmapped_processes": 0, "mapped_by": {}},
        "networks": [], "nics": [], "ib_mtu": [], "transports": [], "gdr": None,
        "gdr_evidence": None,
        "inter_node": {"value": None, "basis": None, "network": None, "network_basis": None},
        "tcp_fallback": {"detected": False, "reason": None, "explanation": None, "evidence": None},
        "communicators": [], "algorithm_choices": [], "tests": [],
        "collnet_fallback": {"processes": 0, "first": None}, "env": [],
        "warnings": {"count": 0, "first": None}, "errors": {"count": 0, "first": None},
        "aborts": {"count": 0, "first": None}, "handled_returns": {"count": 0, "first": None},
        "crashed": {"ranks": [], "by_rank": [], "unattributed": 0, "unattributed_first": None},
        "interrupted": {"count": 0, "lines": []},
        "timeouts": {"count": 0, "first": None, "collectives": [], "in_traces": None,
                     "traced": None},
        "collectives": {"calls": 0, "by_op": [], "per_step": [], "aligned_ranks": []},
    }  # fmt: skip
    return s


def nccl_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    """What the NCCL logs of run `rid` say (docs/nccl_logs.md describes every key)."""
    s = empty_section()
    if not has_nccl_tables(con):
        return s
    lines = _rows(con, "nccl_line_counts", rid)[0]
    files = lines.pop("files")
    if not files:
        return s
    lines["share_recognised"] = lines["recognised"] / lines["nccl"] if lines["nccl"] else None
    lines["unknown_families"] = [
        {k: r[k] for k in ("family", "kind", "count", "example")}
        | {"where": _where(con, r["first_file_id"], r["first_line"])}
        for r in _rows(con, "nccl_unknown_families", rid)
    ]
    s.update(present=True, hint=None, files=files, lines=lines)
    s.update(_versions(con, rid))
    s["ranks"] = _ranks(con, rid)
    s["networks"] = _rows(con, "nccl_networks", rid)
    s["nics"] = _rows(con, "nccl_nics", rid)
    s["ib_mtu"] = [
        {
            "mtu_bytes": r["mtu_bytes"],
            "n_processes": r["n_processes"],
            **(_where(con, r["file_id"], r["line_no"]) or {}),
            "text": r["evidence"],
        }
        for r in _rows(con, "nccl_ib_mtu", rid)
    ]
    s["transports"] = _rows(con, "nccl_transports", rid)
    r = _rows(con, "nccl_inter_node", rid)[0]
    s["inter_node"] = {"value": r["inter_node"], **{k: r[k] for k in INTER_NODE_KEYS}}
    s.update(_gdr(con, rid))
    s["tcp_fallback"] = _tcp(con, rid)
    s["communicators"] = _rows(con, "nccl_comm_shapes", rid)
    s["algorithm_choices"] = _rows(con, "nccl_algorithm_choices", rid)
    s["tests"] = _tests(con, rid)
    s["collnet_fallback"] = _collnet_fallback(con, rid)
    s["env"] = _env(con, rid)
    s.update(_problems(con, rid))
    s["timeouts"]["collectives"] = _timeout_collectives(con, rid)
    s["crashed"] = _crashed(con, rid)
    s["interrupted"] = _interrupts(con, rid)
    if s["timeouts"]["count"]:
        traced = _rows(con, "nccl_timeout_traced", rid)[0]
        s["timeouts"].update(in_traces=traced["in_traces"], traced=traced)
    s["collectives"] = _collectives(con, rid)
    s["findings"] = _findings(s)
    return s
