"""The Inspector joined with the rest of the run: its processes to the traced ranks, its
communicators to the process groups of the traces or Flight Recorder dumps and to the NCCL
logs' communicators, and whether the traced window was typical of the whole run
(docs/inspector.md, "Joined with the rest of the run")."""

from __future__ import annotations

from typing import Any


def percentile(value: float, values: list[float]) -> float | None:
    """Where `value` sits among `values`, 0-100: the share below it, ties counted half."""
    if not values:
        return None
    below = sum(v < value for v in values)
    equal = sum(v == value for v in values)
    return 100.0 * (below + 0.5 * equal) / len(values)


def join_summary(
    processes: list[dict[str, Any]],
    communicators: list[dict[str, Any]],
    groups: list[dict[str, Any]],
    nccl: list[dict[str, Any]],
) -> dict[str, Any]:
    """How far the Inspector's processes and communicators were found in the run's traces,
    dumps and logs: `processes`, `traced_processes` (same host and pid as a traced rank),
    `groups` (communicator → process group, by member ranks), `nccl_log_comms` (communicator
    ids the NCCL logs name), and a sentence (None when nothing else is in the run)."""
    traced = sum(p["traced_rank"] is not None for p in processes)
    names = {c["comm_id"]: c for c in communicators}
    out: dict[str, Any] = {
        "processes": len(processes),
        "traced_processes": traced,
        "groups": [
            {"comm_id": g["comm_id"], "process_group": g["pg_name"], "source": g["source"]}
            for g in groups
        ],
        "nccl_log_comms": [n["comm_id"] for n in nccl],
        "sentence": None,
    }
    parts = []
    if traced:
        parts.append(f"{traced} of its {len(processes)} processes are traced ranks (same host "
                     "and process id)")  # fmt: skip
    if groups:
        pairs = ", ".join(
            f"{names.get(g['comm_id'], {}).get('comm_name') or g['comm_id']} = process group "
            f"{g['pg_name']}"
            for g in groups[:4]
        )
        parts.append(f"{len(groups)} communicators are process groups of the traces ({pairs})")
    if nccl:
        parts.append(f"{len(nccl)} communicators are named by the NCCL logs (same commId)")
    if parts:
        out["sentence"] = "Joined with the run: " + "; ".join(parts) + "."
    return out


def baseline_rows(rows: list[dict[str, Any]], series: list[dict[str, Any]]) -> list[dict]:
    """Per Inspector series with an nccl-tests result of the same collective, ranks and size
    (inspector_baseline): its median bus bandwidth over the run, the last minute's, and their
    share of the baseline's."""
    test = {(r["comm_id"], r["op"], r["size_log2"]): r for r in rows}
    out = []
    for s in series:
        t = test.get((s["comm_id"], s["op"], s["size_log2"]))
        if t is None or not t["test_busbw_gbs"] or s["busbw_median"] is None:
            continue
        last = s["minutes"][-1]["busbw_gbs"] if s["minutes"] else None
        out.append({
            "comm_id": s["comm_id"], "comm_name": s["comm_name"], "op": s["op"],
            "size_log2": s["size_log2"], "size_class": s["size_class"],
            "test_size_bytes": int(t["test_size_bytes"]),
            "test_busbw_gbs": float(t["test_busbw_gbs"]),
            "busbw_median": s["busbw_median"],
            "of_baseline": s["busbw_median"] / float(t["test_busbw_gbs"]),
            "last_of_baseline": None if last is None else last / float(t["test_busbw_gbs"]),
        })  # fmt: skip
    return out
