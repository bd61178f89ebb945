"""The answer at a glance: one sentence of at most 25 words that names what sets the step and
whom or what to fix, from the diagnosis's own findings (docs/diagnosis.md, "The answer").

The rules, first that applies:

1. the job hung or died: the Flight Recorder's or the logs' culprits;
2. a flagged straggler, when waiting for late ranks is at least as large as data transfer or
   the replay says the late rank sets the step: that rank and why it is late (more compute,
   a late start, or late without more compute);
2b. a pipeline (analysis/report/pipeline.py) at the wall whose waiting is at least its
   transfer: the stage that computes longest, or the bubble of balanced stages;
3. otherwise the diagnosis's cause (idle host, device stalls, data transfer, waiting, memory
   copies, compute), with the step, its share and the first thing to look at; on CPU traces
   whose ranks share a host, data transfer is said to run on shared cores, since that changes
   the advice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from commwall.analysis.hangs.section import spans
from commwall.analysis.policy import COMPUTE_MAJORITY
from commwall.analysis.report.culprits import fmt_pct as _pct
from commwall.analysis.steps.verdict import BOUNDS
from commwall.analysis.units import ms_text as _ms

#: A pipeline's slowest stage sets the step when balancing the stages saves at least this share
#: of what the replay's best fix saves.
STAGE_FIX_SHARE = 0.5
#: The most words the answer has.
MAX_WORDS = 25
#: The step's non-compute parts as the answer names them.
PARTS = {
    "exposed_transfer_ms": "data transfer",
    "exposed_wait_ms": "waiting for late ranks",
    "idle_ms": "idle time",
    "memory_only_ms": "memory copies",
}


def _ranks(ranks: list[int]) -> str:
    """'rank 1', 'ranks 9 and 14', 'ranks 1–7'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if len(ranks) == 2:
        return f"ranks {ranks[0]} and {ranks[1]}"
    return f"ranks {spans(ranks)}"


def _stopped(report: Mapping[str, Any], stop: str) -> str:
    """The job hung or died: the stop sentence's first two sentences when they fit, else the
    Flight Recorder's culprits in a sentence of their own."""
    parts = re.split(r"(?<=[.!?])\s+", stop.strip())
    first = " ".join(parts[:2])
    if words(first) <= MAX_WORDS:
        return first
    if words(parts[0]) <= MAX_WORDS and len(parts[0]) > 20:
        return parts[0]
    crashed = ((report.get("nccl") or {}).get("crashed") or {}).get("by_rank") or []
    if stop.startswith("The job died") and crashed:
        dead = sorted({r["rank"] for r in crashed})
        oom = any(r.get("kind") == "oom" for r in crashed)
        of = "running out of GPU memory" if oom else "an error of their own"
        return (
            f"The job died: {_ranks(dead)} stopped on {of} — the NCCL section quotes "
            "the first error."
        )
    h = report.get("hang") or {}
    causes = [g["cause"] for g in h.get("groups") or [] if g.get("cause")]
    culprits = sorted(c["rank"] for c in h.get("culprits") or []) or sorted(
        {r for c in causes for r in c.get("culprit_ranks") or []}
    )
    if not culprits:
        return "The job stopped: a collective never completed — see the hang and NCCL sections."
    kinds = {c.get("kind") for c in causes}
    them = "them" if len(culprits) > 1 else "it"
    if kinds & {"op", "dtype", "size"} and "missing" not in kinds:
        did = {
            "op": "called a different collective than the others at the same point",
            "dtype": "passed different dtypes than the others to the same collective",
            "size": "passed different shapes than the others to the same collective",
        }[sorted(kinds & {"op", "dtype", "size"})[0]]
        return f"The job hung: {_ranks(culprits)} {did} — fix that call."
    if kinds == {"stuck"}:
        return (
            f"The job hung: {_ranks(culprits)} entered a collective and never completed it — "
            "look at the network or the devices."
        )
    return (
        f"The job hung: {_ranks(culprits)} stopped issuing collectives the others waited in — "
        f"look at what stopped {them}."
    )


def _who(c: Mapping[str, Any]) -> str:
    """'rank 2, computing more, causes 73% of the waiting'."""
    how = {"compute": ", computing more,"}.get(c["kind"], "")
    if c.get("late_start"):
        how = ", starting its steps late,"
    return f"rank {c['rank']}{how} causes {_pct(c['share_of_wait'])} of waiting"


def _straggler(c: Mapping[str, Any], step: float | None) -> str:
    r = c["rank"]
    if c["kind"] == "compute":
        return (
            f"Rank {r} sets the {_ms(step)} step: it computes more than the others, who wait "
            f"for it ({_pct(c['share_of_wait'])} of the waiting) — balance its work or check "
            "its GPU."
        )
    if c.get("late_start"):
        return (
            f"Rank {r} sets the {_ms(step)} step: it starts its steps late ("
            f"{_pct(c['share_of_wait'])} of the waiting) — look at its host work between steps."
        )
    last = f"last at {c['n_last']} of {c['n_instances']} collectives" if c.get("n_last") else ""
    return (
        f"Rank {r} sets the {_ms(step)} step: {last or 'late'} with no extra compute — look at "
        "its host, input pipeline or launch delays."
    )


def _fixes(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The replay's what-ifs that are fixes (its bounds left out)."""
    ws = (report.get("replay") or {}).get("whatifs") or []
    return [w for w in ws if w.get("key") not in BOUNDS]


def _pipeline(report: Mapping[str, Any], step: float | None, transfer_first: bool) -> str | None:
    """The pipeline's stage that sets the step (or its bubble), when the report found a
    pipeline (analysis/report/pipeline.py); with `transfer_first`, a clause for after the
    transfer's sentence instead."""
    pl = report.get("pipeline") or {}
    if not pl.get("available") or not pl.get("pipelines"):
        return None
    p = pl["pipelines"][0]
    if p.get("balanced") or not p.get("compute_ratio"):
        if transfer_first:
            return None
        return (
            f"The pipeline bubble sets the {_ms(step)} step: balanced stages wait for each "
            "other — more micro-batches per step shrink it."
        )
    slow = p["stages"][p["slowest_stage"]]
    balanced, now = p.get("balanced_step_ms"), p.get("step_ms")
    best = max((w.get("saving_ms") or 0 for w in _fixes(report)), default=0.0)
    sets = balanced is not None and now is not None and now - balanced >= STAGE_FIX_SHARE * best
    if transfer_first or not sets:  # balancing is not the fix: the stage is a clause
        ratio = p["compute_ratio"]
        return f"stage {slow['stage']} (rank {slow['rank']}) computes {ratio:.1f}× the others"
    return (
        f"Stage {slow['stage']} (rank {slow['rank']}) sets the {_ms(step)} step: it computes "
        f"{p['compute_ratio']:.1f}× as long as the other stages, which wait for it — move "
        "layers off it."
    )


def answer(
    report: Mapping[str, Any],
    cause: str,
    shares: Mapping[str, float],
    culprits: list[dict],
    step: float | None,
    stop: str | None = None,
    straggler_set: bool = False,
    wall: bool = True,
    marginal: bool = False,
) -> str:
    """The answer (see module) for a diagnosis whose cause is `cause`, parts' `shares` of the
    step `step` (ms), `culprits` (the diagnosis's), the sentence saying the job stopped
    (`stop`), whether the replay says a late rank sets the step (`straggler_set`), whether the
    step is at the wall (`wall`) or at its edge (`marginal`: transfer and waiting pass the line
    only together)."""
    if stop:
        return _stopped(report, stop)
    info = report.get("run_info") or {}
    wait, transfer = shares.get("exposed_wait_ms", 0.0), shares.get("exposed_transfer_ms", 0.0)
    top = culprits[0] if culprits else None
    if top and top["flagged"] and (straggler_set or wait >= transfer):
        return _straggler(top, step)
    compute = shares.get("compute_only_ms", 0.0) + shares.get("compute_overlapped_ms", 0.0)
    stage = _pipeline(report, step, transfer_first=False)
    if stage and wall and wait >= transfer and not stage[0].islower():
        return stage  # a pipeline's ranks wait for a stage (the fix) or for the bubble
    if marginal:
        return (
            f"At the communication wall's edge: exposed communication is {_pct(wait + transfer)} "
            f"of the {_ms(step)} step, compute {_pct(compute)} — hide more of it behind compute."
        )
    if not wall and compute >= COMPUTE_MAJORITY:
        part = max(PARTS, key=lambda k: shares.get(k, 0.0))
        return (
            f"No communication wall: compute is {_pct(compute)} of the {_ms(step)} step; the "
            f"largest overhead is {PARTS[part]} ({_pct(shares.get(part))})."
        )
    idle = shares.get("idle_ms", 0.0)
    late = f"; rank {top['rank']} starts its steps late" if top and top.get("late_start") else ""
    if cause == "host":
        return (
            f"An idle host sets the {_ms(step)} step ({_pct(idle)} idle){late} — check data "
            "loading, launch delays, host syncs."
        )
    if cause == "device":
        return (
            f"Device stalls set the {_ms(step)} step: the GPU sits idle {_pct(idle)} with work "
            "already issued — not the host, not the network."
        )
    if cause == "bandwidth":
        shared = info.get("device_kind") == "cpu" and len(info.get("hosts") or []) < (
            info.get("n_ranks") or 0
        )
        where = " on shared CPUs" if shared else " exposed"
        advice = "give ranks their own cores" if shared else "overlap it or add bandwidth"
        stage = _pipeline(report, step, transfer_first=True)
        who = _who(top) if top and top["flagged"] else stage
        text = (
            f"Data transfer sets the {_ms(step)} step ({_pct(transfer)}{where})"
            + (f"; {who}" if who else "")
            + f" — {advice}."
        )
        if words(text) > MAX_WORDS:  # the culprit goes first to the points below
            text = f"Data transfer sets the {_ms(step)} step ({_pct(transfer)}{where}) — {advice}."
        return text
    if cause == "synchronisation":
        r = f" — {_who(top)}" if top and top["flagged"] else f" — {stage}" if stage else ""
        return f"Waiting for late ranks sets the {_ms(step)} step ({_pct(wait)}){r}."
    if cause == "memory":
        return (
            f"Memory copies set the {_ms(step)} step ({_pct(shares.get('memory_only_ms'))}) — "
            "overlap them with compute or copy less."
        )
    exposed = wait + transfer
    return (
        f"No communication wall: compute sets the {_ms(step)} step; exposed communication is "
        f"{_pct(exposed)} of it."
    )


def words(text: str) -> int:
    """Words of `text`: its whitespace-separated pieces (a dash counts, as a word counter
    counts it)."""
    return len(text.split())
