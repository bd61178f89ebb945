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
from commwall.analysis.report.diagnosis_words import (
    CAUSES,
    COMPUTE,
    DEVICE_STALL,
    DIED_LABEL,
    HOST_COPIES,
    HUNG_LABEL,
    STRAGGLER_SET,
    beyond_comm,
    device_stalled,
    fix_words,
    limit_pct,
    logs_say,
    mostly_host_copies,
    outlier_step_sentence,
    part_subject,
    prediction_sentence,
    stall_sentence,
    wall_words,
    whatif_sentence,
)
from commwall.analysis.steps.dimension import dimension_sentence
from commwall.analysis.steps.summary import PART_LABELS
from commwall.analysis.steps.verdict import best_fix, not_the_network, traced_part


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
            + logs_say(report),
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
    stalled = "idle_ms" in big and device_stalled(s)
    if stalled and big[0] == "idle_ms":
        cause, label = DEVICE_STALL
    host_copies = "memory_only_ms" in big and mostly_host_copies(s)
    if host_copies and big[0] == "memory_only_ms":
        label = HOST_COPIES
    # the replay says a late rank's pace (or idle time), not the network, sets the step
    pipeline = report.get("pipeline") or {}
    # instances of >= 2 ranks, or sends matched with their receives
    matched = bool((report.get("stragglers") or {}).get("ranks")) or bool(pipeline.get("available"))
    partial = traced_part(report) if matched else None
    beyond = not_the_network(report) if wall and not marginal else None
    set_by = part_subject(report, beyond["key"]) if beyond else None
    if beyond and cause in ("bandwidth", "synchronisation"):
        if beyond["key"] == "straggler_fixed":
            cause, label = STRAGGLER_SET
        else:
            cause, label = DEVICE_STALL if device_stalled(s) else CAUSES["idle_ms"]
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
        f"{wall_words(wall, marginal, waiting, set_by)}: exposed communication is "
        f"{_f(comm)} ({limit_pct(exposed, policy.WALL_EXPOSED_SHARE)}) of the {_f(step)} "
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
    sentences.append(("what", outlier_step_sentence(report)))
    if stalled:
        sentences.append(("what", stall_sentence(s)))
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
    sentences.append(("whatif", whatif_sentence(report)))
    fix = best_fix(report)
    if fix:
        sentences.append(
            (
                "fix",
                f"Largest single fix: {fix_words(report, fix)}, {_f(fix['saving_ms'])} faster per "
                f"step ({fix['saving_pct']:.0f}%){beyond_comm(report, fix)}.",
            )
        )
    sentences.append(("model", prediction_sentence(report, wall)))
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
