"""Whether the job stopped (a hang the Flight Recorder explains, or NCCL's watchdog timing out),
read from a report; and what that does to the figures.

The traces of a job that hung end inside the hung collective: its wait until the timeout
counts as communication, so the exposed communication, γ and the overlap describe the hang, not
the link or the overlap of a healthy step. This module is the one rule every output follows: the
diagnosis leads with the hang, the model section withholds its measured verdict, and the
checklist does not advise overlap or bandwidth from those figures. When the stop's source shows
that the traces end before the hang (the profiler recorded an earlier window: Flight Recorder's
enqueue time after the traces' end, or no traced collective near the watchdog's timeout), the
figures are that window's and are diagnosed as usual, after the hang.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commwall.analysis.model.step import mostly_waiting
from commwall.analysis.nccl.crashes import crash_sentence
from commwall.analysis.steps.verdict import not_the_network, wait_fraction
from commwall.analysis.units import NS_PER_MS, NS_PER_S

#: The measured verdict of a run that stopped (the model section's `measured.verdict`).
HUNG = "hung"
HUNG_FIGURES = (
    "the traces of the ranks that entered the hung collective end in it, and its wait until the "
    "timeout counts as communication: these figures measure the hang, not bandwidth or overlap; "
    "fix the hang first"
)


def stop_sentence(report: Mapping[str, Any]) -> str | None:
    """The job stopped, in one sentence: the Flight Recorder's cause, else NCCL's watchdog
    timeouts, else the ranks that died of an error of their own (`crash_stop`); None when
    nothing says it stopped."""
    if _fr_stop(report):
        return f"The job hung. {(report.get('hang') or {}).get('verdict')}"
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
    return crash_stop(report)


def crash_stop(report: Mapping[str, Any]) -> str | None:
    """The job died, in one sentence, when its NCCL logs show ranks dying of an error of their
    own (a `what():`, a fatal exception or running out of GPU memory: each rank's first, with
    NCCL's last error where PyTorch quotes it) and no watchdog timeout or hang explains the
    stop; None otherwise. The traces' figures are not withheld for it: a job that died ends its
    traces at the error, not inside a collective that waited until a timeout."""
    nccl = report.get("nccl") or {}
    if _fr_stop(report) or (nccl.get("timeouts") or {}).get("count"):
        return None
    died = crash_sentence(nccl.get("crashed") or {})
    return f"The job died: {died}." if died else None


def _stopped(report: Mapping[str, Any]) -> bool:
    """Whether the Flight Recorder or NCCL's watchdog says the job stopped."""
    return _fr_stop(report) or bool(((report.get("nccl") or {}).get("timeouts") or {}).get("count"))


def _fr_stop(report: Mapping[str, Any]) -> bool:
    """Whether the stop sentence is the Flight Recorder's (else NCCL's watchdog's)."""
    hang = report.get("hang") or {}
    return bool(hang.get("present")) and any(g.get("cause") for g in hang.get("groups") or [])


def _in_traces(report: Mapping[str, Any]) -> bool | None:
    """Whether the traces reach the hang, by the source that says the job stopped: the
    Flight Recorder's enqueue time against the traces' end (analysis/sql/hang_traced.sql), or
    the longest traced collective against the watchdog's timeout (nccl_timeout_traced)."""
    if _fr_stop(report):
        return (report.get("hang") or {}).get("in_traces")
    return ((report.get("nccl") or {}).get("timeouts") or {}).get("in_traces")


def figures_hold_the_hang(report: Mapping[str, Any]) -> bool:
    """Whether the job stopped and its traces' figures hold the hung collective: unless the
    stop's source shows that the traces end before the hang (a profiled window earlier in the
    job), a job that stopped is taken to have been traced into its hang."""
    return _stopped(report) and _in_traces(report) is not False


def before_the_hang(report: Mapping[str, Any]) -> str | None:
    """When the traces are known to end before the hang: a sentence saying how that is known,
    and that the figures are the profiled steps'; else None."""
    if not _stopped(report) or _in_traces(report) is not False:
        return None
    rest = (
        "the profiler recorded an earlier window of the job, so the figures that follow are "
        "those steps', not the hang's."
    )
    if _fr_stop(report):
        gaps = [
            r["created_ns"] - r["traces_end_ns"]
            for r in (report.get("hang") or {}).get("traced") or []
            if r.get("created_ns") is not None and r.get("traces_end_ns") is not None
        ]
        when = f" {_duration(min(gaps))}" if gaps else ""
        return f"The traces end{when} before the hung call was made: {rest}"
    t = ((report.get("nccl") or {}).get("timeouts") or {}).get("traced") or {}
    return (
        f"No traced collective lasts anywhere near the watchdog's timeout of "
        f"{_duration(t['timeout_ms'] * NS_PER_MS)} (the longest: "
        f"{_duration(t['longest_comm_ns'])}): {rest}"
    )


def _duration(ns: float) -> str:
    """A positive duration in words: milliseconds, seconds, minutes or hours."""
    s = ns / NS_PER_S
    if s < 1:
        return f"{ns / NS_PER_MS:.1f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


#: How the prediction's reason of a job that hung begins: it is for a step that does not hang.
PREDICTED_IF_HEALTHY = "once the hang is fixed (the model predicts a step that does not hang)"

STRAGGLERS_CAVEAT = (
    "The job hung, and these figures include the wait for the hung collective: they do not "
    "tell who is slow. The hang section names the rank that did not arrive."
)
#: The caveat when every hung collective was entered by all its ranks with a dtype or size that
#: differs (Flight Recorder): the matching leaves such a call out of the straggler figures (a
#: size mismatch is no instance to wait in), so they are the earlier calls'. When a rank called
#: another op instead, the others' call is an instance without it, and its wait is in them.
MISMATCH_CAVEAT = (
    "The job hung in a collective that its ranks entered with different arguments (the hang "
    "section says which rank and what differs); that call is left out of these figures, which "
    "come from the calls before it: they do not tell why the job hung."
)


OP_CAVEAT = (
    "The job hung, and these figures include the wait for the hung collective: they do not "
    "tell who is slow. The hang section names the rank that called another collective."
)


def stragglers_caveat(report: Mapping[str, Any]) -> str:
    """What the straggler figures of a job that hung hold: MISMATCH_CAVEAT when the Flight
    Recorder's every hung group is a dtype or size mismatch, OP_CAVEAT when every one is a
    rank calling another op, else STRAGGLERS_CAVEAT."""
    groups = (report.get("hang") or {}).get("groups") or []
    kinds = {(g.get("cause") or {}).get("kind") for g in groups if isinstance(g, dict)}
    if kinds and kinds <= {"dtype", "size"}:
        return MISMATCH_CAVEAT
    if kinds == {"op"}:
        return OP_CAVEAT
    return STRAGGLERS_CAVEAT


def stragglers_in_context(report: Mapping[str, Any]) -> Any:
    """The report's `stragglers` section with a `caveat` (`stragglers_caveat`) when the job
    stopped and the traces hold the hang; any other section value comes back unchanged."""
    s = report.get("stragglers")
    if not isinstance(s, dict) or not s.get("ranks") or not figures_hold_the_hang(report):
        return s
    return {**s, "caveat": stragglers_caveat(report)}


def _replay_in_context(report: Mapping[str, Any], model: dict) -> dict:
    """The model section with its measured wall's reason following the replay when a late
    rank's pace or idle time, not the network, sets the step (analysis.steps.verdict
    .not_the_network): the figures' reason ("more bandwidth ...") is kept under
    `measured.reason_from_figures`."""
    measured = model.get("measured")
    beyond = not_the_network(report)
    if not isinstance(measured, dict) or beyond is None:
        return model
    if measured.get("verdict") != "communication wall":
        return model
    summary = report.get("summary") or {}
    if mostly_waiting(wait_fraction(summary)):
        return model  # its reason already says the exposed communication is waiting
    share = summary.get("exposed_comm_share")
    subject = "a late rank's pace" if beyond["key"] == "straggler_fixed" else "idle time"
    reason = (
        (f"exposed communication is {100 * share:.1f}% of the step, but " if share else "")
        + f"the replay shows {subject}, not the network, sets the step: fixing it saves "
        f"{beyond['saving_ms']:.1f} ms per step, hiding all exposed communication "
        f"{beyond['comm_hidden_saving_ms']:.1f} ms (see the diagnosis)"
    )
    return {
        **model,
        "measured": {**measured, "reason": reason, "reason_from_figures": measured.get("reason")},
    }


def model_in_context(report: Mapping[str, Any]) -> Any:
    """The report's `model` section read in context: its measured verdict withheld when the job
    stopped and the traces hold the hang (`figures_hold_the_hang`):
    `measured.verdict` is HUNG, `measured.reason` says why, and the verdict the figures alone
    give is kept under `measured.verdict_withheld`; otherwise, a measured wall's reason follows
    the replay when the network does not set the step (`_replay_in_context`). The prediction
    (what a healthy step would take) is left as it is. Any other section value comes back
    unchanged."""
    model = report.get("model")
    if not isinstance(model, dict):
        return model
    if not figures_hold_the_hang(report):
        return _replay_in_context(report, model)
    measured = model.get("measured")
    if not isinstance(measured, dict) or not measured.get("verdict"):
        return model
    withheld = {"verdict": measured["verdict"], "reason": measured.get("reason")}
    out = {
        **model,
        "measured": {
            **measured,
            "verdict": HUNG,
            "reason": HUNG_FIGURES,
            "verdict_withheld": withheld,
        },
    }
    predicted = model.get("predicted")
    if isinstance(predicted, dict) and predicted.get("reason"):
        # what a step that does not hang would take: its advice comes after the hang's fix
        out["predicted"] = {
            **predicted,
            "reason": f"{PREDICTED_IF_HEALTHY}: {predicted['reason']}",
            "reason_from_figures": predicted["reason"],
        }
    return out
