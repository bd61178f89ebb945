"""Plain-text rendering of the `inspector` report section (formatting only;
analysis/inspector/section.py finds everything)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from commwall.analysis.inspector.section import clock, op_text

Table = Callable[[pd.DataFrame], str]


def _series_frame(section: dict) -> pd.DataFrame:
    rows = []
    for s in section.get("bandwidth") or []:
        worst = min(s["changes"], key=lambda c: c["relative"], default=None)
        rows.append({
            "communicator": s.get("comm_name") or s["comm_id"],
            "collective": s["op"],
            "size": s["size_class"],
            "algorithm": f"{s['algo']}/{s['proto']}",
            "minutes": s["n_minutes"],
            "median bus bandwidth (GB/s)": round(s["busbw_median"] or 0.0, 1),
            "change": "" if worst is None else f"{100 * worst['relative']:+.0f} %",
        })  # fmt: skip
    return pd.DataFrame(rows)


def render_inspector(section: dict, table: Table) -> str:
    """The section as text: findings, then the communicators and their bandwidth series."""
    if not section.get("present"):
        return f"not available: {section.get('reason')}"
    out = ["== NCCL Inspector"]
    if section.get("records"):
        out.append(summary_line(section))
    findings = section.get("findings") or []
    out += [f"- {f}" for f in findings] or ["- Nothing unusual found."]
    frame = _series_frame(section)
    if not frame.empty:
        out += ["", "Bandwidth per communicator, collective and size:", table(frame)]
    prom = section.get("prometheus") or []
    if prom:
        cols = ["comm_name", "op", "message_size", "algo_proto", "n_gpus", "busbw_median",
                "busbw_min", "slowest_node", "slowest_gpu"]  # fmt: skip
        out += ["", "Prometheus buckets:", table(pd.DataFrame(prom)[cols])]
    return "\n".join(out)


# -- frames of the dashboard page and the post-mortem (formatting only) -----------------------

_METHOD = {"arrival": "kernel started last", "shortest_execution": "shortest GPU execution"}


def summary_line(section: dict) -> str:
    """'11,428 collective, 2,857 point-to-point and 0 proxy records of 8 processes, …'."""
    rec = section.get("records") or {}
    if not rec:
        return "Prometheus textfiles only (the plugin's aggregated mode): no record per operation."
    return (
        f"{rec.get('coll', 0):,} collective, {rec.get('p2p', 0):,} point-to-point and "
        f"{rec.get('proxy', 0):,} proxy records of {len(section.get('processes') or [])} "
        f"processes, {len(section.get('communicators') or [])} communicators (format "
        f"{', '.join(section.get('versions') or [])})."
    )


def comm_label(c: dict) -> str:
    """'DP (0xf029…, 8 ranks)'."""
    name = c.get("comm_name") or "communicator"
    return f"{name} ({c['comm_id']}, {c['n_ranks']} ranks)"


def _utc(ts: int) -> pd.Timestamp:
    return pd.Timestamp(ts, unit="ns")


def series_label(s: dict) -> str:
    """'all-reduce 1–2 GiB, RING/SIMPLE'."""
    algo = "" if not s.get("algo") else f", {s['algo']}/{s.get('proto') or '?'}"
    return f"{op_text(s['op'])} {s['size_class']}{algo}"


def bandwidth_frames(section: dict, comm_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lines: series, time, busbw, instances; changes: time, change) of one communicator."""
    lines, changes = [], []
    for s in section.get("bandwidth") or []:
        if s["comm_id"] != comm_id:
            continue
        label = series_label(s)
        lines += [{"series": label, "time": _utc(m["minute_ts"]), "busbw": m["busbw_gbs"],
                   "instances": m["n"]} for m in s["minutes"]]  # fmt: skip
        changes += [{"time": _utc(c["ts"]), "change": c["sentence"]} for c in s["changes"]]
    return (pd.DataFrame(lines, columns=["series", "time", "busbw", "instances"]),
            pd.DataFrame(changes, columns=["time", "change"]))  # fmt: skip


def grid_frame(section: dict, comm_id: str) -> pd.DataFrame:
    """Who was last (who, order, time, share, last, instances) of one communicator."""
    rows = []
    for g in section.get("last_grid") or []:
        if g["comm_id"] != comm_id:
            continue
        who = f"rank {g['global_rank'] if g['global_rank'] is not None else g['rank']}"
        if g.get("host"):
            who += f" ({g['host']})"
        rows.append({"who": who, "order": g["rank"], "time": _utc(g["start_ts"]),
                     "share": g["share"], "last": g["n_last"],
                     "instances": g["n_instances"]})  # fmt: skip
    return pd.DataFrame(rows, columns=["who", "order", "time", "share", "last", "instances"])


def straggler_frame(section: dict) -> pd.DataFrame:
    """One row per communicator with a straggler period."""
    rows = []
    for s in section.get("stragglers") or []:
        rows.append({
            "communicator": s.get("comm_name") or s["comm_id"],
            "rank": s["global_rank"] if s["global_rank"] is not None else s["rank"],
            "host": s.get("host"),
            "last in": f"{100 * s['share']:.0f} %",
            "from (UTC)": clock(s["start_ts"]),
            "to (UTC)": clock(s["end_ts"]),
            "before": None if s["share_before"] is None else f"{100 * s['share_before']:.0f} %",
            "after": None if s["share_after"] is None else f"{100 * s['share_after']:.0f} %",
            "how": _METHOD.get(s["method"], s["method"]),
        })  # fmt: skip
    return pd.DataFrame(rows)


def slow_host_frame(section: dict) -> pd.DataFrame:
    names = {c["comm_id"]: c.get("comm_name") or c["comm_id"]
             for c in section.get("communicators") or []}  # fmt: skip
    return pd.DataFrame([
        {"host": h["host"], "communicators": ", ".join(names.get(c, c) for c in h["comms"]),
         "since (UTC)": clock(h["since_ts"])}
        for h in section.get("slow_hosts") or []
    ])  # fmt: skip


def loss_frame(section: dict) -> pd.DataFrame:
    names = {c["comm_id"]: c.get("comm_name") or c["comm_id"]
             for c in section.get("communicators") or []}  # fmt: skip
    return pd.DataFrame([
        {"communicator": names.get(r["comm_id"], r["comm_id"]), "rank in it": r["rank"],
         "host": r["hostname"], "collectives lost": r["coll_dropped"],
         "point-to-point lost": r["p2p_dropped"], "proxy lost": r["proxy_dropped"],
         "first loss (UTC)": clock(r["first_loss_ts"])}
        for r in (section.get("losses") or {}).get("by_rank") or []
    ])  # fmt: skip


def baseline_frame(section: dict) -> pd.DataFrame:
    return pd.DataFrame([
        {"communicator": b.get("comm_name") or b["comm_id"], "collective": op_text(b["op"]),
         "size": b["size_class"], "median bus bandwidth (GB/s)": round(b["busbw_median"], 1),
         "nccl-tests (GB/s)": round(b["test_busbw_gbs"], 1),
         "nccl-tests size (bytes)": b["test_size_bytes"],
         "of the baseline": f"{100 * b['of_baseline']:.0f} %"}
        for b in section.get("baseline") or []
    ])  # fmt: skip


def postmortem_rows(section: dict) -> list[dict]:
    """The post-mortem's table: one row per bandwidth series that changed, then the
    stragglers (formatting only)."""
    rows = []
    for s in section.get("bandwidth") or []:
        for c in s["changes"]:
            rows.append({"what": "bandwidth", "communicator": s.get("comm_name") or s["comm_id"],
                         "detail": series_label(s), "when (UTC)": clock(c["ts"]),
                         "before": f"{c['before']:.0f} GB/s",
                         "after": f"{c['after']:.0f} GB/s"})  # fmt: skip
    for r in straggler_frame(section).to_dict("records"):
        rows.append({"what": "last rank", "communicator": r["communicator"],
                     "detail": f"rank {r['rank']} on {r['host'] or 'its host'}",
                     "when (UTC)": f"{r['from (UTC)']} to {r['to (UTC)']}",
                     "before": r["before"] or "", "after": r["last in"]})  # fmt: skip
    return rows
