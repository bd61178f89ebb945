"""The `inspector` report section: the whole run as NCCL Inspector recorded it (thin Python over
analysis/sql/inspector_*.sql; the rules are in docs/inspector.md). Every key is present whether
or not the run has Inspector output; `present` False says why in `reason`."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from statistics import median
from typing import Any

import duckdb

from commwall.analysis import db
from commwall.analysis.inspector.changepoints import Change, change_points, segments
from commwall.analysis.inspector.grid import last_grid
from commwall.analysis.inspector.joined import baseline_rows, join_summary, percentile
from commwall.analysis.units import NS_PER_S

#: Executions (or kernel starts) within this of the best name no last rank (ns): the plugin
#: writes whole microseconds.
TIE_NS = 2000
#: A bandwidth change point needs both sides to hold this many minutes ...
MIN_SEGMENT_MINUTES = 3
#: ... and their medians to differ by this share of the larger.
MIN_BANDWIDTH_CHANGE = 0.2
#: A rank is a straggler of a period when it is last in at least this share of the period's
#: instances, and in at least STRAGGLER_FAIR_TIMES × its fair share 1/n ...
STRAGGLER_SHARE = 0.5
STRAGGLER_FAIR_TIMES = 2.0
#: ... over a period of at least this many minutes, the period found where its share of the
#: minute's instances moves by at least STRAGGLER_SHARE_CHANGE (change points as for bandwidth).
STRAGGLER_MIN_MINUTES = 3
STRAGGLER_SHARE_CHANGE = 0.25
#: ... and last in more instances than chance gives: the fair count n/r plus this many of its
#: binomial standard deviations (a period is chosen among many, and the rank among several:
#: with the bare share, a 4-rank communicator's jitter alone named a rank "last in 50 %").
STRAGGLER_SIGMAS = 3.0
#: Ranks of a communicator tested for a straggler period (those last most often).
STRAGGLER_CANDIDATES = 3
#: A series below this share of its nccl-tests baseline is named in the findings.
BASELINE_SHARE = 0.8
UPLOAD_HINT = (
    "no NCCL Inspector output in this run: run the job with NCCL_PROFILER_PLUGIN pointing at "
    "libnccl-profiler-inspector.so, NCCL_INSPECTOR_ENABLE=1 and "
    "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=10000000, then ingest the files of "
    "NCCL_INSPECTOR_DUMP_DIR"
)
_OPS = {
    "allreduce": "all-reduce",
    "allgather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "alltoall": "all-to-all",
    "send": "send",
    "recv": "receive",
    "sendrecv": "send/receive",
}
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def has_inspector_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the store has the inspector_* tables (stores made before them do not)."""
    return db.has_table(con, "inspector_comms") and db.has_macro(con, "inspector_instances")


def op_text(op: str | None) -> str:
    """'allreduce' -> 'all-reduce'."""
    return _OPS.get(op or "", op or "collective")


def size_class_text(log2: int | None) -> str:
    """The size class [2^k, 2^(k+1)) bytes in words: 30 -> '1–2 GiB'."""
    if log2 is None or log2 < 0:
        return "0 B"
    unit = min(log2 // 10, len(_UNITS) - 1)
    lo = 1 << (log2 - 10 * unit)
    return f"{lo}–{2 * lo} {_UNITS[unit]}"


def clock(ts: int | None, with_date: bool = False) -> str:
    """A time of day in UTC ('03:12 UTC'; with the date when the run spans days)."""
    if ts is None:
        return "unknown"
    t = datetime.fromtimestamp(ts / NS_PER_S, tz=timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M UTC" if with_date else "%H:%M UTC")


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _absent(reason: str) -> dict[str, Any]:
    return {
        "present": False,
        "reason": reason,
        "versions": [],
        "records": {},
        "communicators": [],
        "processes": [],
        "stragglers": [],
        "bandwidth": [],
        "slow_hosts": [],
        "losses": None,
        "prometheus": [],
        "traced_window": None,
        "last_grid": [],
        "join": None,
        "baseline": [],
        "findings": [],
    }


def inspector_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    """The Inspector findings of run `rid` (module docstring)."""
    if not has_inspector_tables(con):
        return _absent("not available: this store predates NCCL Inspector support")
    n_comms = db.scalar(con, "SELECT count(*) FROM inspector_comms WHERE run_id = ?", [rid])
    n_prom = db.scalar(con, "SELECT count(*) FROM inspector_prom WHERE run_id = ?", [rid])
    if not n_comms and not n_prom:
        return _absent(UPLOAD_HINT)
    out = _absent("")
    out["present"], out["reason"] = True, None
    out["prometheus"] = _rows(con, "SELECT * FROM inspector_prom_buckets(?)", [rid])
    if not n_comms:
        out["findings"] = _prom_findings(out["prometheus"])
        return out
    facts = db.row(
        con,
        "SELECT list(DISTINCT version ORDER BY version), sum(n_coll), sum(n_p2p), sum(n_proxy),"
        " bool_or(traced), min(first_ts), max(last_ts) FROM inspector_comms WHERE run_id = ?",
        [rid],
    )
    out["versions"] = facts[0]
    out["records"] = {"coll": int(facts[1] or 0), "p2p": int(facts[2] or 0),
                      "proxy": int(facts[3] or 0)}  # fmt: skip
    out["traced"] = bool(facts[4])
    out["start_ts"], out["end_ts"] = facts[5], facts[6]
    days = (facts[6] or 0) - (facts[5] or 0) > 86400 * NS_PER_S
    out["instances_kept"] = bool(
        db.scalar(con, "SELECT count(*) > 0 FROM inspector_colls WHERE run_id = ?", [rid])
    )
    out["processes"] = _rows(con, "SELECT * FROM inspector_processes(?)", [rid])
    members = _rows(con, "SELECT * FROM inspector_members(?)", [rid])
    group_rows = _rows(con, "SELECT * FROM inspector_groups(?)", [rid])
    groups = {g["comm_id"]: g for g in group_rows}
    nccl = _rows(con, "SELECT * FROM inspector_nccl_comms(?)", [rid])
    out["communicators"] = _communicators(members, groups, {n["comm_id"] for n in nccl})
    comms = {c["comm_id"]: c for c in out["communicators"]}
    host_of = {(m["comm_id"], m["rank"]): m for m in members}
    last = _rows(con, "SELECT * FROM inspector_last_minutes(?, ?)", [rid, TIE_NS])
    out["stragglers"] = _stragglers(last, comms, host_of, out["traced"], days)
    out["last_grid"] = last_grid(last, comms, host_of, out["stragglers"])
    bw = _rows(con, "SELECT * FROM inspector_bandwidth_minutes(?, ?)", [rid, TIE_NS])
    out["bandwidth"] = _bandwidth(bw, comms, days)
    out["slow_hosts"] = _slow_hosts(out["bandwidth"], comms)
    out["losses"] = _losses(_rows(con, "SELECT * FROM inspector_losses(?)", [rid]), comms, days)
    skipped = db.scalar(con, "SELECT count(*) FROM inspector_skipped WHERE run_id = ?", [rid])
    out["skipped_batches"] = int(skipped or 0)
    window = _rows(con, "SELECT * FROM inspector_traced_window(?)", [rid])[0]
    out["traced_window"] = _traced(window, bw, out["bandwidth"], days)
    out["join"] = join_summary(out["processes"], out["communicators"], group_rows, nccl)
    base = _rows(con, "SELECT * FROM inspector_baseline(?)", [rid])
    out["baseline"] = baseline_rows(base, out["bandwidth"])
    out["findings"] = _findings(out)
    return out


def _communicators(members: list[dict], groups: dict[str, dict],
                   nccl: set[str]) -> list[dict[str, Any]]:  # fmt: skip
    by: dict[str, list[dict]] = {}
    for m in members:
        by.setdefault(m["comm_id"], []).append(m)
    out = []
    for cid, ms in by.items():
        g = groups.get(cid)
        name = ms[0]["comm_name"]
        out.append({
            "comm_id": cid,
            "comm_name": None if name in (None, "unknown") else name,
            "n_ranks": ms[0]["n_ranks"],
            "nnodes": ms[0]["nnodes"],
            "n_seen": len(ms),
            "hosts": sorted({m["hostname"] for m in ms if m["hostname"]}),
            "global_ranks": sorted(m["global_rank"] for m in ms if m["global_rank"] is not None),
            "process_group": None if g is None else g["pg_name"],
            "process_group_desc": None if g is None else g["pg_desc"],
            "nccl_log": cid in nccl,
        })  # fmt: skip
    out.sort(key=lambda c: (-(c["n_ranks"] or 0), c["comm_name"] or "", c["comm_id"]))
    return out


def comm_text(c: dict[str, Any] | None) -> str:
    """'the DP communicator (0xf0…, 8 ranks)'."""
    if c is None:
        return "a communicator"
    name = f"the {c['comm_name']} communicator" if c.get("comm_name") else "communicator"
    return f"{name} ({c['comm_id']}, {c['n_ranks']} ranks)"


def _stragglers(last: list[dict], comms: dict[str, dict], host_of: dict, traced: bool,
                days: bool) -> list[dict[str, Any]]:  # fmt: skip
    """Per communicator, the rank last in most of its instances over a period (docstring of
    the module constants)."""
    by: dict[str, dict[int, dict[int, tuple[int, int]]]] = {}
    for r in last:
        by.setdefault(r["comm_id"], {}).setdefault(r["rank"], {})[r["minute_ts"]] = (
            r["n_instances"], r["n_last"])  # fmt: skip
    out = []
    for cid, ranks in by.items():
        minutes = sorted({m for series in ranks.values() for m in series})
        totals = {rk: sum(v[1] for v in s.values()) for rk, s in ranks.items()}
        n_ranks = len(ranks)
        fair = 1 / n_ranks if n_ranks else 1.0
        best: dict[str, Any] | None = None
        for rk in sorted(totals, key=lambda k: -totals[k])[:STRAGGLER_CANDIDATES]:
            s = ranks[rk]
            share = [s[m][1] / s[m][0] if s[m][0] else 0.0 for m in minutes]
            changes = change_points(share, STRAGGLER_MIN_MINUTES, min_abs=STRAGGLER_SHARE_CHANGE)
            for a, b in segments(len(minutes), changes):
                n = sum(s[m][0] for m in minutes[a:b])
                k = sum(s[m][1] for m in minutes[a:b])
                if not n:
                    continue
                sh = k / n
                chance = n * fair + STRAGGLER_SIGMAS * math.sqrt(n * fair * (1 - fair))
                qualifies = sh >= STRAGGLER_SHARE and sh >= STRAGGLER_FAIR_TIMES * fair
                qualifies = qualifies and k >= chance  # not one of chance's runs
                if qualifies and (best is None or (k, sh) > (best["n_last"], best["share"])):
                    before = [minutes[i] for i in range(a)]
                    after = [minutes[i] for i in range(b, len(minutes))]
                    best = {
                        "rank": rk, "share": sh, "n_last": k, "n_instances": n,
                        "start_ts": minutes[a], "end_ts": minutes[b - 1] + 60 * int(NS_PER_S),
                        "share_before": _share(s, before), "share_after": _share(s, after),
                        "share_run": totals[rk] / max(1, sum(s[m][0] for m in minutes)),
                        "whole_run": a == 0 and b == len(minutes),
                    }  # fmt: skip
        if best is None:
            continue
        m = host_of.get((cid, best["rank"]), {})
        best |= {
            "comm_id": cid,
            "comm_name": comms.get(cid, {}).get("comm_name"),
            "global_rank": m.get("global_rank"),
            "host": m.get("hostname"),
            "method": "arrival" if traced else "shortest_execution",
        }
        best["sentence"] = _straggler_sentence(best, comms.get(cid), days)
        out.append(best)
    out.sort(key=lambda x: -x["n_last"])
    return out


def _share(s: dict[int, tuple[int, int]], minutes: list[int]) -> float | None:
    n = sum(s[m][0] for m in minutes)
    return None if not n else sum(s[m][1] for m in minutes) / n


def _straggler_sentence(b: dict[str, Any], comm: dict | None, days: bool) -> str:
    who = f"rank {b['global_rank']}" if b["global_rank"] is not None else f"rank {b['rank']}"
    if b["global_rank"] is not None and b["global_rank"] != b["rank"]:
        who += f" (rank {b['rank']} in the communicator)"
    if b["host"]:
        who += f" on host {b['host']}"
    name = f"the {comm['comm_name']}" if comm and comm.get("comm_name") else "the"
    what = f"{name} communicator's collectives"
    if b["whole_run"]:
        when = "over the whole run"
    else:
        when = f"from {clock(b['start_ts'], days)} to {clock(b['end_ts'], days)}"
    s = f"{who[0].upper()}{who[1:]} was last in {_pct(b['share'])} of {what} {when}"
    parts = []
    if b["share_before"] is not None:
        parts.append(f"in {_pct(b['share_before'])} before")
    if b["share_after"] is not None:
        parts.append(f"in {_pct(b['share_after'])} after")
    if parts:
        s += ", and " + " and ".join(parts)
    how = ("its kernel started last" if b["method"] == "arrival"
           else "shortest GPU execution: the others waited for it inside the kernel")  # fmt: skip
    return f"{s} ({how})."


def _bandwidth(rows: list[dict], comms: dict[str, dict], days: bool) -> list[dict[str, Any]]:
    """Per series: the per-minute bandwidth, its change points and a sentence for each."""
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["comm_id"], r["op"], r["size_log2"], r["algo"], r["proto"])
        by.setdefault(key, []).append(r)
    out = []
    for (cid, op, log2, algo, proto), rs in by.items():
        rs.sort(key=lambda r: r["minute_ts"])
        y = [float(r["busbw_gbs"] or 0.0) for r in rs]
        changes = change_points(y, MIN_SEGMENT_MINUTES, MIN_BANDWIDTH_CHANGE)
        c = comms.get(cid)
        series = {
            "comm_id": cid,
            "comm_name": None if c is None else c["comm_name"],
            "op": op,
            "size_log2": log2,
            "size_class": size_class_text(log2),
            "algo": algo,
            "proto": proto,
            "source": rs[0]["source"],
            "n_minutes": len(rs),
            "n": int(sum(r["n"] for r in rs)),
            "busbw_median": median(y) if y else None,
            "minutes": [{"minute_ts": r["minute_ts"], "busbw_gbs": r["busbw_gbs"], "n": int(r["n"])}
                        for r in rs],
            "changes": [_change(ch, rs, c, op, log2, days) for ch in changes],
        }  # fmt: skip
        out.append(series)
    out.sort(key=lambda s: (min((ch["relative"] for ch in s["changes"]), default=0.0),
                            s["comm_id"], s["op"] or "", s["size_log2"] or 0))  # fmt: skip
    return out


def _change(ch: Change, rs: list[dict], comm: dict | None, op: str, log2: int,
            days: bool) -> dict[str, Any]:  # fmt: skip
    ts = rs[ch.at]["minute_ts"]
    verb = "fell" if ch.after < ch.before else "rose"
    where = f"on {comm_text(comm)}"
    sentence = (
        f"{op_text(op).capitalize()} of {size_class_text(log2)} {where} {verb} from "
        f"{ch.before:.0f} to {ch.after:.0f} GB/s at {clock(ts, days)}"
    )
    return {"ts": ts, "before": ch.before, "after": ch.after, "relative": ch.relative,
            "sentence": sentence}  # fmt: skip


def _slow_hosts(series: list[dict], comms: dict[str, dict]) -> list[dict[str, Any]]:
    """Hosts in every communicator whose bandwidth fell, and whose every multi-node
    communicator's bandwidth fell: the common factor of the slow instances."""
    fell: dict[str, dict] = {}
    for s in series:
        for ch in s["changes"]:
            if ch["relative"] <= -MIN_BANDWIDTH_CHANGE:
                prev = fell.get(s["comm_id"])
                if prev is None or ch["ts"] < prev["ts"]:
                    fell[s["comm_id"]] = ch
    multi = {cid: c for cid, c in comms.items() if (c["nnodes"] or 0) > 1}
    slow = [cid for cid in fell if cid in multi]
    if not slow:
        return []
    common = set.intersection(*(set(multi[cid]["hosts"]) for cid in slow))
    out = []
    for h in sorted(common):
        mine = [cid for cid, c in multi.items() if h in c["hosts"]]
        if not all(cid in fell for cid in mine):
            continue
        names = [multi[cid]["comm_name"] or cid for cid in mine]
        first = min(fell[cid]["ts"] for cid in mine)
        out.append({
            "host": h,
            "comms": mine,
            "n_comms": len(mine),
            "since_ts": first,
            "sentence": (
                f"Host {h} is in every communicator whose bandwidth fell ({', '.join(names)}), "
                f"and each of its {len(mine)} multi-node communicators fell: look at its NICs "
                "and links first."
            ),
        })  # fmt: skip
    # with one slow communicator every member host is "common": the finding says nothing
    if len(slow) == 1 and len(out) > 1:
        return []
    return out


def _losses(rows: list[dict], comms: dict[str, dict], days: bool) -> dict[str, Any]:
    keys = ("coll_dropped", "p2p_dropped", "proxy_dropped", "proxy_ops_dropped", "written")
    total = {k: int(sum(r[k] for r in rows)) for k in keys}
    lossy = [r for r in rows if r["coll_dropped"] or r["p2p_dropped"] or r["proxy_dropped"]]
    unknown = sorted({r["comm_id"] for r in rows if not r["has_markers"]})
    lost = total["coll_dropped"] + total["p2p_dropped"] + total["proxy_dropped"]
    if lost:
        worst = max(lossy, key=lambda r: r["coll_dropped"] + r["p2p_dropped"])
        c = comms.get(worst["comm_id"])
        sentence = (
            f"The plugin's ring buffers lost {lost:,} records ({total['coll_dropped']:,} "
            f"collectives, {total['p2p_dropped']:,} point-to-point, {total['proxy_dropped']:,} "
            f"proxy) on {len(lossy)} (communicator, rank) pairs, most on host "
            f"{worst['hostname']} in {comm_text(c)} from {clock(worst['first_loss_ts'], days)}: "
            "the figures of those minutes miss them (raise NCCL_INSPECTOR_DUMP_COLL_RING_SIZE or "
            "dump more often)."
        )
    elif unknown:
        sentence = "Records lost are unknown: v4.0 output writes no dump_stats markers."
    else:
        sentence = "No record was lost (every dump_stats marker reports 0 dropped)."
    return {**total, "by_rank": lossy, "unknown_comms": unknown, "sentence": sentence}


def _traced(window: dict, rows: list[dict], series: list[dict],
            days: bool) -> dict[str, Any] | None:  # fmt: skip
    """Whether the traced window was typical: each series' median bandwidth inside it against
    the run's."""
    lo, hi = window["start_ts"], window["end_ts"]
    if lo is None:
        return None
    inside = [r for r in rows if lo - 60 * NS_PER_S < r["minute_ts"] <= hi]
    out = []
    for s in series:
        mine = [float(r["busbw_gbs"]) for r in inside
                if (r["comm_id"], r["op"], r["size_log2"]) == (s["comm_id"], s["op"],
                                                                s["size_log2"])]  # fmt: skip
        if not mine or not s["busbw_median"]:
            continue
        rel = (median(mine) - s["busbw_median"]) / s["busbw_median"]
        run = [float(m["busbw_gbs"]) for m in s["minutes"] if m["busbw_gbs"] is not None]
        out.append({"comm_id": s["comm_id"], "op": s["op"], "size_log2": s["size_log2"],
                    "traced_busbw": median(mine), "run_busbw": s["busbw_median"],
                    "relative": rel, "typical": abs(rel) < MIN_BANDWIDTH_CHANGE,
                    "percentile": percentile(median(mine), run),
                    "n_minutes": len(run)})  # fmt: skip
    typical = all(o["typical"] for o in out) if out else None
    if typical is None:
        sentence = (f"The traced window ({clock(lo, days)} to {clock(hi, days)}) has no "
                    "Inspector record.")  # fmt: skip
    elif typical:
        sentence = (
            f"The traced window ({clock(lo, days)} to {clock(hi, days)}) is typical of "
            "the run: its bandwidth is within 20 % of the run's median in every series."
        )
    else:
        worst = max(out, key=lambda o: abs(o["relative"]))
        sentence = (
            f"The traced window ({clock(lo, days)} to {clock(hi, days)}) is not typical of the "
            f"run: {op_text(worst['op'])} of {size_class_text(worst['size_log2'])} ran at "
            f"{worst['traced_busbw']:.0f} GB/s there against {worst['run_busbw']:.0f} GB/s over "
            f"the run (percentile {worst['percentile']:.0f} of its {worst['n_minutes']} minutes)."
        )
    return {"start_ts": lo, "end_ts": hi, "source": window["source"], "typical": typical,
            "series": out, "sentence": sentence}  # fmt: skip


def _prom_findings(buckets: list[dict]) -> list[str]:
    out = []
    for b in buckets:
        if b["n_gpus"] > 1 and b["busbw_median"] and b["busbw_min"] < 0.8 * b["busbw_median"]:
            out.append(
                f"{b['op']} of {b['message_size']} on {b['comm_name']}: GPU {b['slowest_gpu']} "
                f"on {b['slowest_node']} at {b['busbw_min']:.0f} GB/s against a median of "
                f"{b['busbw_median']:.0f} GB/s over {b['n_gpus']} GPUs."
            )
    return out


def _findings(out: dict[str, Any]) -> list[str]:
    f = [s["sentence"] for s in out["stragglers"]]
    for s in out["bandwidth"]:
        f += [
            ch["sentence"] + "." for ch in s["changes"] if ch["relative"] <= -MIN_BANDWIDTH_CHANGE
        ]
    f += [h["sentence"] for h in out["slow_hosts"]]
    if out["losses"] and (out["losses"]["by_rank"] or out["losses"]["unknown_comms"]):
        f.append(out["losses"]["sentence"])
    if out.get("skipped_batches"):
        f.append(f"{out['skipped_batches']:,} damaged batches were skipped at ingest.")
    if out["traced_window"]:
        f.append(out["traced_window"]["sentence"])
    if out["join"] and out["join"]["sentence"]:
        f.append(out["join"]["sentence"])
    f += [_baseline_sentence(b) for b in out["baseline"] if b["of_baseline"] < BASELINE_SHARE]
    f += _prom_findings(out["prometheus"])
    return f


def _baseline_sentence(b: dict[str, Any]) -> str:
    name = f"the {b['comm_name']} communicator" if b.get("comm_name") else b["comm_id"]
    return (
        f"{op_text(b['op']).capitalize()} of {b['size_class']} on {name} ran at "
        f"{b['busbw_median']:.0f} GB/s over the run, {_pct(b['of_baseline'])} of the "
        f"nccl-tests baseline ({b['test_busbw_gbs']:.0f} GB/s at {b['test_size_bytes']:,} bytes)."
    )
