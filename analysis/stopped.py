"""Whether the job stopped (a hang the Flight Recorder explains, or NCCL's watchdog timing out),
read from a report; and what that does to the figures.

The traces of a job that hung end inside the hung collective: its wait until the timeout
counts as communication, so the exposed communication, γ and the overlap describe the hang, not
the link or the overlap of a healthy step. This module is the one rule every output follows: the
diagnosis leads with the hang, the model section withholds its measured verdict, and the
checklist does not advise overlap or bandwidth from those figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The measured verdict of a run that stopped (the model section's `measured.verdict`).
HUNG = "hung"
HUNG_FIGURES = (
    "the traces end in the hung collective, whose wait until the timeout counts as "
    "communication: these figures measure the hang, not bandwidth or overlap; fix the hang first"
)


def stop_sentence(report: Mapping[str, Any]) -> str | None:
    """The job stopped, in one sentence: the Flight Recorder's cause, else NCCL's watchdog
    timeouts; None when neither says it stopped."""
    hang = report.get("hang") or {}
    if hang.get("present") and any(g.get("cause") for g in hang.get("groups") or []):
        return f"The job hung. {hang['verdict']}"
    nccl = report.get("nccl") or {}
    t = nccl.get("timeouts") or {}
    timeouts = t.get("count") or 0
    if timeouts:
        first = next((f for f in nccl.get("findings") or [] if "watchdog" in f), None)
        colls = t.get("collectives") or []
        what = (
            f"{len(colls)} collective(s) ({timeouts} reports)" if colls else f"{timeouts} time(s)"
        )
        return (
            f"The job stopped: NCCL's watchdog timed out on {what}"
            + (f"; {first}." if first else ". ")
            + (" " if first else "")
            + "Flight Recorder dumps of every rank name the rank that never entered it."
        )
    return None


def model_in_context(report: Mapping[str, Any]) -> Any:
    """The report's `model` section, its measured verdict withheld when the job stopped:
    `measured.verdict` is HUNG, `measured.reason` says why, and the verdict the figures alone
    give is kept under `measured.verdict_withheld`. The prediction (what a healthy step would
    take) is left as it is. Any other section value comes back unchanged."""
    model = report.get("model")
    if not isinstance(model, dict) or stop_sentence(report) is None:
        return model
    measured = model.get("measured")
    if not isinstance(measured, dict) or not measured.get("verdict"):
        return model
    withheld = {"verdict": measured["verdict"], "reason": measured.get("reason")}
    return {
        **model,
        "measured": {
            **measured,
            "verdict": HUNG,
            "reason": HUNG_FIGURES,
            "verdict_withheld": withheld,
        },
    }
