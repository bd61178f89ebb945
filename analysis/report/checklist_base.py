"""What every checklist item is made of: the statuses, an item, and the readers of the
report's NCCL section that several items share."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

ATTENTION, OK, NOT_OBSERVABLE = "attention", "ok", "not_observable"
#: An item that cannot apply to the run at all (NCCL and GPU items on a CPU run over gloo,
#: network items when every rank is on one host), shown apart from the unobservable.
NOT_APPLICABLE = "not_applicable"
#: Measured bus bandwidth below this fraction of the link's peak deserves attention.
BUSBW_FRACTION_LIMIT = 0.5
#: The largest IB/RoCE path MTU (verbs IBV_MTU_4096).
IB_MTU_BYTES = 4096
NCCL_LOG_HINT = "Upload the run's NCCL_DEBUG=INFO logs (one per process) with the traces."
HANG_ACTION = "Read the Hang page: the culprit rank's own logs and stack come next."

Item = dict[str, Any]


def _item(key: str, title: str, page: str, status: str, evidence: str, action: str = "") -> Item:
    return {
        "key": key,
        "title": title,
        "status": status,
        "evidence": evidence,
        "page": page,
        "action": action,
    }


def _nccl(report: Mapping[str, Any]) -> dict | None:
    """The nccl section when the run has NCCL logs, else None."""
    n = report.get("nccl")
    return n if isinstance(n, dict) and n.get("present") else None


def _where(ev: dict | None) -> str:
    """' (file:line: text)' for an evidence dict of the nccl section."""
    if not ev or not ev.get("text"):
        return ""
    place = f"{Path(ev['file']).name}:{ev.get('line')}: " if ev.get("file") else ""
    return f" ({place}{ev['text']})"
