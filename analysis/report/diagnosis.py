"""The answer to "why": one paragraph, with numbers, derived from the other report sections.

Rules (docs/diagnosis.md; thresholds in analysis/policy.py):

* **Wall or not**: exposed communication (transfer + waiting not hidden by compute) above
  ``WALL_EXPOSED_SHARE`` of the step is a communication wall.
* **What dominates** the step: the largest of exposed transfer (bandwidth-bound), exposed wait
  (synchronisation / straggler-bound), idle (host-, input- or launch-bound; device-stalled
  when most of it had its work issued already, ``IDLE_QUEUED_SHARE``) and memory-only
  (memory-bound), when it takes at least ``CAUSE_MIN_SHARE`` of the step; otherwise compute
  (healthy, compute-bound). Every other part above the line is named as well.
* **Who**: the ranks that cause the waiting, by their share of it (stragglers.sql), flagged ones
  marked persistent, each with why it was late (more operator work than the median rank, or late
  without it: host, input or launch delay) and its idle time against the median rank's.
* **How much faster**: the replay's what-ifs (analysis/replay/engine.py), ranked; the first one
  that is
  a fix (not the "everything hidden" bound) names the fix.
* The predicted verdict (model section) is reconciled in words when it disagrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commwall.analysis import policy
from commwall.analysis.fabric.baseline import fabric_sentence
from commwall.analysis.hangs.stopped import before_the_hang, crash_stop, stop_sentence
from commwall.analysis.inspector.sentence import inspector_sentence
from commwall.analysis.report.answer import answer
from commwall.analysis.report.bandwidth_words import bandwidth_sentence
from commwall.analysis.report.brief import brief_points, ranked_fixes
from commwall.analysis.report.culprits import close_behind, culprit_sentence
from commwall.analysis.report.culprits import culprits as find_culprits
from commwall.analysis.report.culprits import fmt_ms as _f
from commwall.analysis.report.culprits import fmt_pct as _pct
from commwall.analysis.steps.dimension import dimension_sentence
from commwall.analysis.steps.summary import PART_LABELS
from commwall.analysis.steps.verdict import BOUNDS, best_fix, not_the_network, traced_part

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


def _limit_pct(x: float, limit: float) -> str:
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


def _subject(report: Mapping[str, Any], key: str) -> str:
    """What sets the step when replay fix `key` beats hiding all communication."""
    if key == "idle_removed" and _stalled(report.get("summary") or {}):
        return STALLED_IDLE
    return NOT_COMM_SUBJECTS[key]


def _wall_words(wall: bool, marginal: bool, waiting: bool | None, set_by: str | None = None) -> str:
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


def _outlier_step_sentence(report: Mapping[str, Any]) -> str | None:
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


def _host_copies(s: Mapping[str, Any]) -> bool:
    """Whether most of the memory copy time is host <-> device transfers."""
    share = s.get("memory_host_device_share")
    return share is not None and share >= policy.HOST_COPY_SHARE


def _stalled(s: Mapping[str, Any]) -> bool:
    """Whether most of the idle time had its work issued already: a device stall."""
    share = s.get("idle_queued_share")
    return share is not None and share >= policy.IDLE_QUEUED_SHARE


def _stall_sentence(s: Mapping[str, Any]) -> str:
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


def _beyond_comm(report: Mapping[str, Any], fix: Mapping[str, Any]) -> str:
    """When the largest fix is not a communication fix and saves more than hiding all exposed
    communication would (the replay's bound), the step is set by that fix's subject, not by the
    network: say so (empty otherwise)."""
    beyond = not_the_network(report)
    if beyond is None or beyond["key"] != fix["key"]:
        return ""
    return (
        f", more than hiding all exposed communication would save "
        f"({_f(beyond['comm_hidden_saving_ms'])}): {_subject(report, fix['key'])}, not the "
        "network, sets the step"
    )


def _label(report: Mapping[str, Any], w: Mapping[str, Any]) -> str:
    """A what-if's words in the paragraph (the idle one's say what the idle time was)."""
    if w["key"] == "idle_removed" and _stalled(report.get("summary") or {}):
        return STALLED_IDLE_LABEL
    return str(w["label"])


def _whatif_sentence(report: Mapping[str, Any]) -> str | None:
    rep = report.get("replay") or {}
    if not rep.get("available"):
        return None
    ws = [w for w in rep.get("whatifs") or [] if w["key"] not in BOUNDS][:3]
    if not ws:
        return None
    items = "; ".join(
        f"{_label(report, w)}: {_f(w['step_ms'])} ({w['saving_pct']:+.0f}%)".replace("(+", "(−")
        if (w["saving_pct"] or 0) > 0  # None when the replayed step takes no time
        else f"{_label(report, w)}: {_f(w['step_ms'])} (no gain)"
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
        + _cpu_straggler_caveat(report, ws)
    )


def _cpu_straggler_caveat(report: Mapping[str, Any], shown: list[Mapping[str, Any]]) -> str:
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


def _prediction_sentence(report: Mapping[str, Any], wall: bool) -> str | None:
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


def _logs_say(report: Mapping[str, Any]) -> str:
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


def diagnose(report: Mapping[str, Any]) -> dict:
    """The report's `diagnosis`: cause, parts as shares of the step, culprits, the fix; the
    answer at a glance (`headline`, the same as `answer`: at most 25 words), at most five
    short `brief` points and the ranked `fixes` (analysis.report.brief); and the long
    paragraph behind them. `opening` is the paragraph's first sentence. `points` holds the
    paragraph's sentences by topic, in order: "hang" (the job hung or died), "what" (the parts
    and what dominates), "bandwidth" (busbw, or why transfer and waiting cannot be told
    apart), "who" (the ranks causing the waiting and why), "whatif" (the replay), "fix" (the
    largest single fix), "model" (when the α-β model disagrees)."""
    d = _diagnose(report)
    if d.get("available"):
        d["headline"] = d["answer"]
        d["brief"] = brief_points(report, d)
        d["fixes"] = ranked_fixes(report)
    return d


def _diagnose(report: Mapping[str, Any]) -> dict:
    s = report.get("summary") or {}
    step = s.get("step_ms")
    stop = stop_sentence(report)
    died = crash_stop(report)  # the job died of an error: the traces end there, not in a hang
    if not step:
        if stop:
            return {
                "available": True,
                "wall": True,
                "cause": "crash" if died else "hang",
                "label": DIED_LABEL if died else HUNG_LABEL,
                "causes": ["crash" if died else "hang"],
                "shares": {},
                "culprits": [],
                "fix": None,
                "opening": stop,
                "answer": answer(report, "hang", {}, [], None, stop=stop),
                "paragraph": stop + " No step time could be measured from these files.",
                "points": [
                    {"topic": "hang", "text": stop},
                    {"topic": "what", "text": "No step time could be measured from these files."},
                ],
            }
        return {
            "available": False,
            "reason": "no step time measured (no timeline activity in the traces)",
            "paragraph": "Not available: no step time could be measured from these files."
            + _logs_say(report),
        }
    shares = {k: (s.get(k) or 0) / step for k in PART_LABELS}
    exposed = s.get("exposed_comm_share") or 0.0
    wall = exposed > policy.WALL_EXPOSED_SHARE
    ranked = sorted(CAUSES, key=lambda k: -shares[k])
    big = [k for k in ranked if shares[k] >= policy.CAUSE_MIN_SHARE]
    comm_parts = ("exposed_transfer_ms", "exposed_wait_ms")
    marginal = wall and not any(k in big for k in comm_parts)
    if marginal:
        # a wall made of both together: name the larger of the two first
        big.insert(0, max(comm_parts, key=lambda k: shares[k]))
    cause, label = CAUSES[big[0]] if big else COMPUTE
    stalled = "idle_ms" in big and _stalled(s)
    if stalled and big[0] == "idle_ms":
        cause, label = DEVICE_STALL
    host_copies = "memory_only_ms" in big and _host_copies(s)
    if host_copies and big[0] == "memory_only_ms":
        label = HOST_COPIES
    # the replay says a late rank's pace (or idle time), not the network, sets the step
    pipeline = report.get("pipeline") or {}
    # instances of >= 2 ranks, or sends matched with their receives
    matched = bool((report.get("stragglers") or {}).get("ranks")) or bool(pipeline.get("available"))
    partial = traced_part(report) if matched else None
    beyond = not_the_network(report) if wall and not marginal else None
    set_by = _subject(report, beyond["key"]) if beyond else None
    if beyond and cause in ("bandwidth", "synchronisation"):
        if beyond["key"] == "straggler_fixed":
            cause, label = STRAGGLER_SET
        else:
            cause, label = DEVICE_STALL if _stalled(s) else CAUSES["idle_ms"]
    if cause == "bandwidth" and not matched:
        label = "communication-bound: exposed communication, transfer and waiting not told apart"
    if cause == "bandwidth" and partial:
        label = (
            "communication-bound: exposed communication, transfer and waiting for the ranks "
            "not traced not told apart"
        )
    if marginal:
        label = (
            "at the wall's edge: transfer and waiting together pass the line, neither alone "
            "does, and compute dominates the step"
        )
    compute_share = shares["compute_only_ms"] + shares["compute_overlapped_ms"]
    mostly_compute = (
        bool(big)
        and not wall
        and label == CAUSES[big[0]][1]
        and compute_share >= policy.COMPUTE_MAJORITY
        and shares[big[0]] < policy.OVERHEAD_BOUND_SHARE
    )
    if mostly_compute:
        # the cause stays the overhead to remove, but the step is not "bound" by 13% of it
        label = (
            f"mostly compute ({_pct(compute_share)} of it); its largest overhead is "
            f"{PART_LABELS[big[0]]}, {_f(s.get(big[0]))} ({_pct(shares[big[0]])})"
        )
    culprits = find_culprits(report)
    n_steps = (report.get("run_info") or {}).get("n_steps")
    scope = "step" if s.get("scope") == "steps" else "trace span per rank"

    comm = (s.get("exposed_transfer_ms") or 0) + (s.get("exposed_wait_ms") or 0)
    waiting = (
        (s.get("exposed_wait_ms") or 0) > (s.get("exposed_transfer_ms") or 0)
        if matched and not partial
        else None
    )
    head = (
        f"{_wall_words(wall, marginal, waiting, set_by)}: exposed communication is "
        f"{_f(comm)} ({_limit_pct(exposed, policy.WALL_EXPOSED_SHARE)}) of the {_f(step)} "
        f"{scope} — "
        + (
            # a wait for a rank that is not traced looks like transfer on the traced ranks
            f"{_f(s.get('exposed_transfer_ms'))} counted as data transfer (it includes any "
            f"waiting for the {partial[1] - partial[0]} ranks not traced) and "
            f"{_f(s.get('exposed_wait_ms'))} of waiting for late traced ranks"
            if matched and partial and comm > 0
            else f"{_f(s.get('exposed_transfer_ms'))} of data transfer and "
            f"{_f(s.get('exposed_wait_ms'))} of waiting for late ranks"
            if matched or comm <= 0
            else "transfer or waiting for late ranks, which one rank's calls cannot tell apart"
        )
        + "; compute takes "
        f"{_f(s.get('tau_comp_ms'))}, {_f(s.get('compute_overlapped_ms'))} of it overlapped "
        f"with communication; idle {_f(s.get('idle_ms'))} ({_pct(shares['idle_ms'])})."
    )
    # (topic, sentence): the paragraph joins them; `points` keeps them apart for a list
    sentences: list[tuple[str, str | None]] = [("what", head)]
    if big:

        def listed(keys: list[str]) -> str:
            return ", ".join(f"{PART_LABELS[k]} {_f(s.get(k))} ({_pct(shares[k])})" for k in keys)

        if mostly_compute:  # the label named the largest overhead already
            more = f" Other non-compute parts: {listed(big[1:])}." if big[1:] else ""
            sentences.append(("what", f"The step is {label}.{more}"))
        else:
            sentences.append(
                ("what", f"The step is {label}. Largest non-compute parts: {listed(big)}.")
            )
    else:
        sentences.append(
            (
                "what",
                f"The step is {label}: no non-compute part reaches "
                f"{100 * policy.CAUSE_MIN_SHARE:.0f}% of it.",
            )
        )
    sentences.append(("what", _outlier_step_sentence(report)))
    if stalled:
        sentences.append(("what", _stall_sentence(s)))
    if host_copies:
        sentences.append(
            (
                "what",
                f"{_pct(s['memory_host_device_share'])} of the memory copy time is host-device "
                "transfers (HtoD/DtoH over PCIe: input batches, CPU offload, checkpoints), not "
                "copies on the GPU: overlap them with compute (prefetch from pinned memory on "
                "a side stream), move less data per step, or keep it on the GPU.",
            )
        )
    sentences.append(("what", dimension_sentence(report)))  # the dimension that sets it
    if comm > 0 and not matched:
        sentences.append(
            (
                "bandwidth",
                "No collective is matched across ranks in these files (one rank's trace, or no "
                "collective calls recognised), so waiting for peers cannot be told apart from "
                "data transfer: all exposed communication is counted as transfer. Upload every "
                "rank's trace to separate them.",
            )
        )
    elif cause == "bandwidth" or "exposed_transfer_ms" in big:
        sentences.append(("bandwidth", bandwidth_sentence(report)))
    if comm > 0:  # the run's transfers against its fabric's nccl-tests, when the run has them
        sentences.append(("bandwidth", fabric_sentence(report)))
    if partial and comm > 0:
        traced, world = partial
        sentences.append(
            (
                "bandwidth",
                f"The traces hold {traced} of the job's {world} ranks: a collective ends only "
                f"when every rank has arrived, so the exposed transfer includes waiting for the "
                f"{world - traced} ranks not in these files, and the bandwidth is a lower bound. "
                "Upload every rank's trace to separate them.",
            )
        )
    if culprits and shares["exposed_wait_ms"] > 0.01:
        who = "; ".join(culprit_sentence(c, n_steps) for c in culprits)
        sentences.append(("who", f"Of the waiting, {who}.{close_behind(report, culprits)}"))
    if pipeline.get("available") and pipeline.get("sentence"):
        sentences.append(("who", str(pipeline["sentence"])))
    sentences.append(("who", inspector_sentence(report)))  # the whole run, beside the window
    sentences.append(("whatif", _whatif_sentence(report)))
    fix = best_fix(report)
    if fix:
        sentences.append(
            (
                "fix",
                f"Largest single fix: {_label(report, fix)}, {_f(fix['saving_ms'])} faster per "
                f"step ({fix['saving_pct']:.0f}%){_beyond_comm(report, fix)}.",
            )
        )
    sentences.append(("model", _prediction_sentence(report, wall)))
    earlier = before_the_hang(report)
    if died:
        # the job died of an error: what killed it first, then the diagnosis of what was traced
        sentences = [("hang", died), *sentences]
    elif earlier:
        # a profiled window earlier in the job: the hang first, then that window's diagnosis
        sentences = [("hang", stop), ("hang", earlier), *sentences]
        cause, label, big = "hang", HUNG_LABEL, ["hang", *big]
    elif stop:
        # the traces end inside the hung collective: its time until the timeout counts as
        # communication, so their parts say nothing about bandwidth or waiting
        sentences = [
            ("hang", stop),
            (
                "hang",
                "The traces of the ranks that entered the hung collective end in it (its time "
                f"until the timeout counts as communication: {_f(comm)} of the {_f(step)} "
                f"{scope}), so their figures are "
                "no diagnosis of bandwidth or waiting; fix the hang first.",
            ),
        ]
        cause, label, big = "hang", HUNG_LABEL, ["hang"]
    points = [{"topic": t, "text": x} for t, x in sentences if x]
    paragraph = " ".join(p["text"] for p in points)
    out: dict[str, Any] = {
        "available": True,
        "wall": wall,
        "cause": cause,
        "label": label,
        "causes": list(
            dict.fromkeys(
                ([cause] if beyond else [])
                + [
                    DEVICE_STALL[0]
                    if k == "idle_ms" and stalled
                    else CAUSES[k][0]
                    if k in CAUSES
                    else k
                    for k in big
                ]
            )
        ),
        "shares": shares,
        "exposed_comm_share": exposed,
        "culprits": culprits,
        "fix": fix,
        "opening": stop or head,
        "answer": answer(
            report,
            cause,
            shares,
            culprits,
            step,
            stop=died or stop or earlier,
            straggler_set=label == STRAGGLER_SET[1],
            wall=wall,
            marginal=marginal,
        ),
        "paragraph": paragraph,
        "points": points,
    }
    return out
