"""One sentence of at most 40 words for the diagnosis: what NCCL Inspector saw over the whole
run (the straggler period of the widest communicator and the largest bandwidth fall), or None
without Inspector findings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commwall.analysis.inspector.section import (
    MIN_BANDWIDTH_CHANGE,
    clock,
    op_text,
    size_class_text,
)

#: The most words the sentence may hold (the diagnosis's points are at most 40 words).
MAX_WORDS = 40


def _straggler(s: Mapping[str, Any], days: bool) -> str:
    who = f"rank {s['global_rank'] if s.get('global_rank') is not None else s['rank']}"
    if s.get("host"):
        who += f" on host {s['host']}"
    name = f"the {s['comm_name']} communicator's" if s.get("comm_name") else "its communicator's"
    out = f"{who} was last in {100 * s['share']:.0f} % of {name} collectives"
    if s.get("whole_run"):
        return out + " over the whole run"
    out += f" from {clock(s['start_ts'], days)}"
    if s.get("share_before") is not None:
        out += f", {100 * s['share_before']:.0f} % before"
    return out


def _fall(b: Mapping[str, Any], ch: Mapping[str, Any], days: bool) -> str:
    name = f"{b['comm_name']} " if b.get("comm_name") else ""
    return (
        f"{name}{op_text(b['op'])} {size_class_text(b['size_log2'])} fell from "
        f"{ch['before']:.0f} to {ch['after']:.0f} GB/s at {clock(ch['ts'], days)}"
    )


def inspector_sentence(report: Mapping[str, Any]) -> str | None:
    """'Over the whole run (Inspector): rank 3 on host h01 was last in 100 % of the DP
    communicator's collectives from 00:30 UTC, 9 % before; DP all-reduce 1–2 GiB fell from
    478 to 210 GB/s at 00:20 UTC.' — None when the report has no Inspector finding."""
    s = report.get("inspector")
    if not isinstance(s, Mapping) or not s.get("present"):
        return None
    days = (s.get("end_ts") or 0) - (s.get("start_ts") or 0) > 86400 * 10**9
    parts = []
    if s.get("stragglers"):
        # the widest communicator's straggler first: every member of it waits
        size = {c["comm_id"]: c.get("n_ranks") or 0 for c in s.get("communicators") or []}
        worst = max(s["stragglers"], key=lambda x: (size.get(x["comm_id"], 0), x["n_last"]))
        parts.append(_straggler(worst, days))
    falls = [
        (ch["relative"], b, ch)
        for b in s.get("bandwidth") or []
        for ch in b.get("changes") or []
        if ch["relative"] <= -MIN_BANDWIDTH_CHANGE
    ]
    if falls:
        _, b, ch = min(falls, key=lambda x: (x[0], x[2]["ts"]))
        parts.append(_fall(b, ch, days))
    if not parts:
        return None
    text = "Over the whole run (Inspector): " + "; ".join(parts) + "."
    if len(text.split()) > MAX_WORDS:
        text = "Over the whole run (Inspector): " + parts[0] + "."
    return text if len(text.split()) <= MAX_WORDS else None
