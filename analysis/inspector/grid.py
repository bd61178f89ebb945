"""Who was last, ranks × time: per communicator, the share of each time bucket's collective
instances each rank was last in (the dashboard's heatmap), bounded whatever the job's size."""

from __future__ import annotations

from typing import Any

from commwall.analysis.units import NS_PER_S

#: Communicators drawn: those with a straggler first, then the others; the largest first.
MAX_COMMS = 4
#: Ranks drawn per communicator: those last most often.
MAX_RANKS = 64
#: Time buckets per communicator: minutes are merged into buckets of whole minutes so that at
#: most this many remain.
MAX_BUCKETS = 120
_MINUTE = 60 * int(NS_PER_S)


def last_grid(
    last: list[dict[str, Any]],
    comms: dict[str, dict[str, Any]],
    members: dict[tuple[str, int], dict[str, Any]],
    stragglers: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Rows (comm_id, rank, global_rank, host, start_ts, minutes, n_instances, n_last, share)
    from inspector_last_minutes rows `last`: per drawn communicator and rank, per bucket of
    `minutes` minutes starting at start_ts, how many of the bucket's named instances the rank
    was last in."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in last:
        by.setdefault(r["comm_id"], []).append(r)

    def size(c: str) -> tuple[int, str]:
        return -(comms.get(c, {}).get("n_ranks") or 0), c

    flagged = sorted({s["comm_id"] for s in stragglers if s["comm_id"] in by}, key=size)
    rest = sorted((c for c in by if c not in flagged), key=size)
    out = []
    for cid in (flagged + rest)[:MAX_COMMS]:
        rows = by[cid]
        t0 = min(r["minute_ts"] for r in rows)
        t1 = max(r["minute_ts"] for r in rows)
        span = (t1 - t0) // _MINUTE + 1
        width = -(-span // MAX_BUCKETS) * _MINUTE  # ceil: whole minutes per bucket
        totals: dict[int, int] = {}
        for r in rows:
            totals[r["rank"]] = totals.get(r["rank"], 0) + int(r["n_last"])
        ranks = set(sorted(totals, key=lambda k: (-totals[k], k))[:MAX_RANKS])
        cells: dict[tuple[int, int], list[int]] = {}
        for r in rows:
            if r["rank"] not in ranks:
                continue
            b = t0 + (r["minute_ts"] - t0) // width * width
            c = cells.setdefault((r["rank"], b), [0, 0])
            c[0] += int(r["n_instances"])
            c[1] += int(r["n_last"])
        for (rank, b), (n, k) in sorted(cells.items()):
            m = members.get((cid, rank), {})
            out.append({
                "comm_id": cid, "rank": rank, "global_rank": m.get("global_rank"),
                "host": m.get("hostname"), "start_ts": b, "minutes": width // _MINUTE,
                "n_instances": n, "n_last": k, "share": k / n if n else 0.0,
            })  # fmt: skip
    return out
