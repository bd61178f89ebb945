"""The words of the diagnosis (analysis/report/diagnosis.py): the classes a cause names, and the
sentences it is made of (the wall, an outlying step, a stalled device, the what-ifs, the model's
prediction, what the logs say) and the few-word verdict of a comparison's tile."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commwall.analysis import policy
from commwall.analysis.inspector.sentence import inspector_sentence
from commwall.analysis.report.culprits import fmt_ms as _f
from commwall.analysis.report.culprits import fmt_pct as _pct
from commwall.analysis.steps.verdict import BOUNDS, not_the_network

#: Non-compute parts that can be a cause, with the class each one names.
CAUSES: dict[str, tuple[str, str]] = {
    "exposed_transfer_ms": ("bandwidth", "bandwidth-bound: data transfer is exposed"),
    "exposed_wait_ms": ("synchronisation", "synchronisation-bound: waiting for late ranks"),
    "idle_ms": ("host", "host-, input- or launch-bound: the timeline sits idle"),
    "memory_only_ms": ("memory", "memory-bound: memory copies alone"),
}
COMPUTE = ("compute", "compute-bound: communication is hidden or small")
#: Idle time that is the device's own stall (the host had issued the work already), not the
#: host's delay (sql/idle.sql; threshold policy.IDLE_QUEUED_SHARE).
DEVICE_STALL = ("device", "device-stalled: the GPU sits idle with work already issued")
#: Memory-only time that is mostly host <-> device copies (sql/memory.sql; threshold
#: policy.HOST_COPY_SHARE): the same class, named for what it is.
HOST_COPIES = "memory-bound: host-device copies alone (input, offload or checkpoint over PCIe)"
#: A step the replay says a late rank sets (analysis.steps.verdict.not_the_network), whatever share
#: of
#: it the decomposition gives transfer.
STRAGGLER_SET = (
    "synchronisation",
    "straggler-bound: the late rank's own pace sets the step (the replay), its delay showing "
    "as exposed communication on the other ranks' timelines",
)
#: The label of a job that stopped (analysis/hangs/stopped.py).
HUNG_LABEL = "hung: a collective never completed"
#: Findings of the NCCL logs quoted by the paragraph of a run without a step time.
LOG_FINDINGS = 2
DIED_LABEL = "died: ranks stopped on an error of their own"

#: What each replay fix that changes no transfer (analysis.steps.verdict.NOT_COMM_FIXES) says sets
#: the step when it beats hiding all communication.
NOT_COMM_SUBJECTS = {
    "straggler_fixed": "the late rank's own pace",
    "idle_removed": "the idle host time",
}
#: … the idle time's subject, and the idle what-if's words, when the device, not the host,
#: sits idle (DEVICE_STALL): the replay's label names host delays.
STALLED_IDLE = "the device's idle time"
STALLED_IDLE_LABEL = "idle gaps removed (the GPU's stalls with work issued)"


def limit_pct(x: float, limit: float) -> str:
    """A share beside the limit it is judged by (above it: a wall), printed on the side of the
    limit it is on: as many decimals as that takes (9.8% is no wall at 10%, but "10%" reads as
    one; 10.04% is one, but "10.0%" reads as none), and the limit itself said as such."""
    if x == limit:
        return f"{100 * x:g}%, at the line, not above it"
    for digits in range(4):
        text = f"{100 * x:.{digits}f}"
        if (float(text) > 100 * limit) == (x > limit) and float(text) != 100 * limit:
            return f"{text}%"
    return f"{100 * x:.4f}%"


def part_subject(report: Mapping[str, Any], key: str) -> str:
    """What sets the step when replay fix `key` beats hiding all communication."""
    if key == "idle_removed" and device_stalled(report.get("summary") or {}):
        return STALLED_IDLE
    return NOT_COMM_SUBJECTS[key]


def wall_words(wall: bool, marginal: bool, waiting: bool | None, set_by: str | None = None) -> str:
    """How the headline opens: a wall (and whether waiting for late ranks or data transfer makes
    most of it, so that the first words already say whether bandwidth would help; `waiting` None
    when no collective is matched across ranks and the two cannot be told apart; `set_by` what
    sets the step instead of the network when the replay says so, analysis.steps.verdict
    .not_the_network), a wall only by transfer and waiting together, or none."""
    if not wall:
        return "No communication wall"
    if marginal:
        return "At the communication wall's edge"
    if set_by:  # no communication wall: the step is named for what sets it
        return f"{set_by[:1].upper()}{set_by[1:]}, not the network, sets the step"
    if waiting is None:
        return "Communication wall (transfer and waiting not told apart)"
    return "Communication wall, " + (
        "mostly waiting for late ranks" if waiting else "mostly data transfer"
    )


def outlier_step_sentence(report: Mapping[str, Any]) -> str | None:
    """When one step window pulls the mean step (the figures above) well above the median, name
    it: the median is the typical step. On GPU traces the last profiled step often does: its
    window lasts until the GPU has finished the work queued for it, however far the GPU lags the
    host (said only of GPU traces: on CPU traces nothing is queued, the step itself was slow)."""
    s = report.get("summary") or {}
    mean, med = s.get("step_ms"), s.get("step_ms_median")
    rows = (report.get("decomposition") or {}).get("steps") or []
    per: dict[int, list[float]] = {}
    for r in rows:
        per.setdefault(r["step"], []).append(r["step_ms"])
    if len(per) < 3 or not mean or not med or mean <= (1 + policy.MEAN_ABOVE_MEDIAN) * med:
        return None
    steps = {k: sum(v) / len(v) for k, v in per.items()}
    worst = max(steps, key=lambda k: steps[k])
    on_gpu = (report.get("run_info") or {}).get("device_kind") == "gpu"
    last = (
        " (the last profiled step, whose window lasts until the GPU has finished the work "
        "queued for it)"
        if worst == max(steps) and on_gpu  # CPU traces queue nothing: the step itself is slow
        else ""
    )
    return (
        f"The mean step ({_f(mean)}) is {_pct(mean / med - 1)} above the median ({_f(med)}): "
        f"step {worst} takes {_f(steps[worst])}{last}; the median is the typical step, and the "
        "parts above are means that include it."
    )


def mostly_host_copies(s: Mapping[str, Any]) -> bool:
    """Whether most of the memory copy time is host <-> device transfers."""
    share = s.get("memory_host_device_share")
    return share is not None and share >= policy.HOST_COPY_SHARE


def device_stalled(s: Mapping[str, Any]) -> bool:
    """Whether most of the idle time had its work issued already: a device stall."""
    share = s.get("idle_queued_share")
    return share is not None and share >= policy.IDLE_QUEUED_SHARE


def stall_sentence(s: Mapping[str, Any]) -> str:
    """Why the idle time is not the host's: the evidence and where to look instead."""
    return (
        f"The host is not what the GPU waits for: in {_pct(s['idle_queued_share'])} of the idle "
        f"time the work that ends the gap had been issued already (the host issues work a "
        f"median {_f(s.get('launch_lead_ms'))} ahead of the GPU), so faster input or launches "
        "would not shorten it. The GPU waits on something the trace does not show: a CUDA "
        "graph's internal order, an event or stream waiting on other work, another process on "
        "the GPU, the driver loading kernels at their first launch, or work the profiler did "
        "not record; look at what runs around the longest gaps (graph launches, stream waits)."
    )


def beyond_comm(report: Mapping[str, Any], fix: Mapping[str, Any]) -> str:
    """When the largest fix is not a communication fix and saves more than hiding all exposed
    communication would (the replay's bound), the step is set by that fix's subject, not by the
    network: say so (empty otherwise)."""
    beyond = not_the_network(report)
    if beyond is None or beyond["key"] != fix["key"]:
        return ""
    return (
        f", more than hiding all exposed communication would save "
        f"({_f(beyond['comm_hidden_saving_ms'])}): {part_subject(report, fix['key'])}, not the "
        "network, sets the step"
    )


def fix_words(report: Mapping[str, Any], w: Mapping[str, Any]) -> str:
    """A what-if's words in the paragraph (the idle one's say what the idle time was)."""
    if w["key"] == "idle_removed" and device_stalled(report.get("summary") or {}):
        return STALLED_IDLE_LABEL
    return str(w["label"])


def whatif_sentence(report: Mapping[str, Any]) -> str | None:
    rep = report.get("replay") or {}
    if not rep.get("available"):
        return None
    ws = [w for w in rep.get("whatifs") or [] if w["key"] not in BOUNDS][:3]
    if not ws:
        return None
    items = "; ".join(
        f"{fix_words(report, w)}: {_f(w['step_ms'])} ({w['saving_pct']:+.0f}%)".replace("(+", "(−")
        if (w["saving_pct"] or 0) > 0  # None when the replayed step takes no time
        else f"{fix_words(report, w)}: {_f(w['step_ms'])} (no gain)"
        for w in ws
    )
    bounds = {w["key"]: w for w in rep.get("whatifs") or [] if w["key"] in BOUNDS}
    tail = ""
    if bounds:
        tail = (
            " Bounds: "
            + "; ".join(f"{w['label']}: {_f(w['step_ms'])}" for w in bounds.values())
            + "."
        )
    return (
        f"Replaying the measured run (slowest rank per step, median "
        f"{_f(rep['measured_step_ms'])}, reproduced within "
        f"{abs(100 * (rep['replay_error'] or 0)):.1f}%), the step would take: {items}.{tail}"
        + cpu_straggler_caveat(report, ws)
    )


def cpu_straggler_caveat(report: Mapping[str, Any], shown: list[Mapping[str, Any]]) -> str:
    """On CPU traces the replay's late-rank fix is optimistic: it keeps the other ranks' compute
    as measured while the late rank was held up, when they had the host's cores and memory to
    themselves; with the late rank on time they compute beside it, slower (docs/diagnosis.md:
    pairs made with and without a straggler, the others 4-17 % faster in the straggler run)."""
    if (report.get("run_info") or {}).get("device_kind") != "cpu":
        return ""
    if not any(w["key"] == "straggler_fixed" for w in shown):
        return ""
    return (
        " On CPU traces the late-rank fix is an upper estimate: while the late rank was held up, "
        "the others had the host's cores and memory to themselves and computed faster."
    )


def prediction_sentence(report: Mapping[str, Any], wall: bool) -> str | None:
    pred = ((report.get("model") or {}).get("predicted") or {}).get("verdict")
    if pred is None:
        return None
    says_wall = pred == "communication wall"
    if says_wall == wall:
        return None
    if says_wall:
        return (
            "The α-β model predicts a communication wall for this job, but the measured step "
            "hides or avoids it: trust the measurement for this run, the model for other settings."
        )
    return (
        "The α-β model, which knows only data volumes and link speed, predicts no wall: the "
        "measured exposed communication comes from what it does not model (waiting for late "
        "ranks, unmodelled collectives or a slower link than fitted)."
    )


def short_verdict(d: Mapping[str, Any]) -> str:
    """A diagnosis in a few words (a comparison's tile): its label, after "Communication wall
    — " or "No wall — " unless the label says itself what the step is (a job that hung or
    died, a step at the wall's edge); "no step measured" when the diagnosis is not available."""
    if not d.get("available"):
        return "no step measured"
    label = str(d.get("label") or d.get("cause") or "")
    if d.get("cause") in ("hang", "crash") or label.startswith("at the wall's edge"):
        return label[:1].upper() + label[1:]
    return ("Communication wall — " if d.get("wall") else "No wall — ") + label


def logs_say(report: Mapping[str, Any]) -> str:
    """For a run without a step time: what its NCCL Inspector records and its NCCL logs found
    (their first findings), so that a run of logs alone still reads as more than "not
    available"; empty without any."""
    whole = inspector_sentence(report)
    out = f" {whole}" if whole else ""
    found = ((report.get("nccl") or {}).get("findings") or [])[:LOG_FINDINGS]
    if not found:
        return out
    return (
        out + " What the NCCL logs say: " + "; ".join(found) + " (the NCCL section has the rest)."
    )
