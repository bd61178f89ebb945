"""The diagnosis in brief: at most five points of at most 40 words each, and the fixes as a
ranked table, from the report's own sections (docs/diagnosis.md, "The answer").

The points, in order, each only where its evidence exists:

1. **caveat** — first when it changes the advice: CPU traces whose ranks share a host's cores
   (transfer then competes with compute for the cores; more bandwidth would not help);
2. **where** — where the step goes: compute, data transfer, waiting for late ranks, idle;
3. **who** — the rank that causes most of the waiting, and why it is late; in a pipeline
   without such a rank, the stage the others wait for (or the bubble);
4. **fix** — the largest replayed fix, and what sets the step when it is not the network;
5. **whole run** — what NCCL Inspector records say of the whole run (the rank last most
   often, the largest fall of bandwidth), where the run has them;
6. **dimension** — the parallelism dimension whose communication sets the step, where the
   report splits it by dimension;
7. **links** — what the links deliver: the run's largest transfer class against the fabric's
   nccl-tests at the same size where the run holds them, else the busiest op's bus bandwidth
   against the link's peak;

Only the first five that apply are kept; the caveat, when it does not change the advice,
comes last. A job that hung or died has its stop sentences as points instead. A sentence
longer than the limit keeps its first clauses that fit.

The fixes table holds the replay's what-ifs that are fixes (the bounds left out), largest
saving first. Their step is the replay's: the slowest rank's step, median over steps. It is
named beside the summary's step (the mean over ranks and steps) wherever both appear.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from commwall.analysis.fabric.baseline import fabric_sentence
from commwall.analysis.inspector.sentence import inspector_sentence
from commwall.analysis.report.answer import words
from commwall.analysis.report.culprits import fmt_pct
from commwall.analysis.steps.dimension import dimension_sentence
from commwall.analysis.steps.verdict import BOUNDS, not_the_network
from commwall.analysis.units import ms_text as fmt_ms

#: The most points, and the most words in one.
MAX_POINTS = 5
MAX_WORDS = 40
#: Parts of the step below this share are left out of the "where" point.
MIN_SHARE_SHOWN = 0.005
#: What the replay's baseline step is, in words.
REPLAY_STEP = "the slowest rank's step, median over steps"


def fit(text: str, limit: int = MAX_WORDS) -> str:
    """`text` whole when it has at most `limit` words; else its sentences that fit, else its
    first clauses (cut at '; ', ': ' or ', ') that fit, closed with a full stop."""
    if words(text) <= limit:
        return text
    out = ""
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        if words(out + " " + sentence) > limit:
            break
        out = (out + " " + sentence).strip()
    if out:
        return out
    clauses = re.split(r"(?<=[;:,])\s+", text.strip())
    for clause in clauses:
        if words(out + " " + clause) > limit:
            break
        out = (out + " " + clause).strip()
    if not out:  # one clause longer than the limit: its first words
        out = " ".join(text.split()[: limit - 1])
    return out.rstrip(";:,") + "."


def _shared_cores(info: Mapping[str, Any]) -> str | None:
    hosts, n = info.get("hosts") or [], info.get("n_ranks") or 0
    if info.get("device_kind") != "cpu" or not hosts or len(hosts) >= n:
        return None
    on = f"{len(hosts)} host{'s' * (len(hosts) > 1)}"
    return (
        f"CPU traces: {n} ranks share the cores of {on}, so their compute and their "
        "collectives compete for the same cores — give each rank cores of its own before "
        "paying for bandwidth."
    )


def _where(report: Mapping[str, Any]) -> str | None:
    s = report.get("summary") or {}
    step = s.get("step_ms")
    if not step:
        return None
    parts = [
        ("compute", s.get("tau_comp_ms")),
        ("data transfer", s.get("exposed_transfer_ms")),
        ("waiting for late ranks", s.get("exposed_wait_ms")),
        ("idle", s.get("idle_ms")),
        ("memory copies", s.get("memory_only_ms")),
    ]
    shown = [
        f"{name} {fmt_ms(v)} ({fmt_pct(v / step)})"
        for name, v in parts
        if v and v / step >= MIN_SHARE_SHOWN
    ]
    overlapped = s.get("compute_overlapped_ms")
    tail = f"; {fmt_ms(overlapped)} of the compute overlaps communication" if overlapped else ""
    return f"Of the {fmt_ms(step)} step (mean over ranks and steps): {', '.join(shown)}{tail}."


def _who(report: Mapping[str, Any], d: Mapping[str, Any]) -> str | None:
    cs = d.get("culprits") or []
    pipeline = report.get("pipeline") or {}
    if not cs and pipeline.get("available") and pipeline.get("sentence"):
        return str(pipeline["sentence"])  # the stage the others wait for, or the bubble
    if not cs or (d.get("shares") or {}).get("exposed_wait_ms", 0) <= 0.01:
        return None
    c = cs[0]
    last = f", last at {c['n_last']} of {c['n_instances']} collectives" if c.get("n_last") else ""
    if c["kind"] == "compute":
        why = "it does more operator work than the others"
    elif c.get("late_start"):
        why = "it starts its steps late, before its step's work begins (host work between steps)"
    elif c["kind"] == "other":
        why = "it is late without more operator work: a host, input-pipeline or launch delay"
    else:
        why = "no operator time to compare it on"
    flag = "" if c.get("flagged") else " (not persistent enough to flag)"
    return (
        f"Rank {c['rank']} causes {fmt_pct(c['share_of_wait'])} of the waiting{last}{flag}: {why}."
    )


def _links(report: Mapping[str, Any]) -> str | None:
    against = fabric_sentence(report)  # the run against its fabric's nccl-tests, when known
    if against:
        return against
    ops = [
        o
        for o in (report.get("collectives") or {}).get("ops") or []
        if o.get("busbw_GBps_median") is not None
    ]
    if not ops:
        return None
    o = ops[0]
    text = f"The {o['op']} calls reach {o['busbw_GBps_median']:.3g} GB/s median bus bandwidth"
    measured = (report.get("model") or {}).get("measured") or {}
    peak = measured.get("peak_busbw_GBps")
    if peak and measured.get("busbw_GBps"):
        text += (
            f"; the run's {measured['busbw_GBps']:.3g} GB/s is "
            f"{100 * measured['busbw_GBps'] / peak:.0f}% of the {measured.get('link')} peak "
            f"({peak:.0f} GB/s)"
        )
    return text + "."


def _fix(report: Mapping[str, Any], fixes: Mapping[str, Any]) -> str | None:
    rows = fixes.get("rows") or []
    if not rows or (rows[0]["saving_ms"] or 0) <= 0:
        return None
    f = rows[0]
    text = (
        f"Largest fix, replayed: {f['fix']} — {fmt_ms(f['step_ms'])} instead of "
        f"{fmt_ms(fixes['baseline_ms'])} ({REPLAY_STEP}), −{f['saving_pct']:.0f}%."
    )
    beyond = not_the_network(report)
    if beyond is not None and beyond["key"] == f["key"]:
        text += (
            " It saves more than hiding all communication would: the network does not set the step."
        )
    return text


def ranked_fixes(report: Mapping[str, Any]) -> dict[str, Any]:
    """The replay's fixes, largest saving first: {"baseline_ms" (the replay's step),
    "baseline": its meaning in words, "summary_step_ms" (the summary's step, mean over ranks
    and steps), "rows": [{"key", "fix", "step_ms", "saving_ms", "saving_pct"}]}; rows empty
    without a replay."""
    rep = report.get("replay") or {}
    out: dict[str, Any] = {
        "baseline_ms": rep.get("measured_step_ms"),
        "baseline": REPLAY_STEP,
        "summary_step_ms": (report.get("summary") or {}).get("step_ms"),
        "rows": [],
    }
    if not rep.get("available"):
        return out
    rows = [w for w in rep.get("whatifs") or [] if w["key"] not in BOUNDS]
    out["rows"] = [
        {
            "key": w["key"],
            "fix": str(w["label"]),
            "step_ms": w["step_ms"],
            "saving_ms": w["saving_ms"],
            "saving_pct": w["saving_pct"],
        }
        for w in sorted(rows, key=lambda w: -(w["saving_ms"] or 0))
        if (w["saving_ms"] or 0) > 0
    ]
    return out


def brief_points(report: Mapping[str, Any], d: Mapping[str, Any]) -> list[dict[str, str]]:
    """The diagnosis `d` of `report` in at most five points of at most 40 words:
    [{"topic", "text"}], topics "hang", "caveat", "where", "who", "fix", "whole run",
    "dimension", "links"."""
    points: list[tuple[str, str | None]] = []
    if d.get("cause") in ("hang", "crash"):  # the stop first; its traces say little else
        hang = [p["text"] for p in d.get("points") or [] if p["topic"] == "hang"]
        return [{"topic": "hang", "text": fit(t)} for t in hang[:MAX_POINTS]]
    caveat = _shared_cores(report.get("run_info") or {})
    if caveat and d.get("cause") == "bandwidth":  # it changes the advice: first
        points.append(("caveat", caveat))
    points.append(("where", _where(report)))
    points.append(("who", _who(report, d)))
    points.append(("fix", _fix(report, ranked_fixes(report))))
    points.append(("whole run", inspector_sentence(report)))
    points.append(("dimension", dimension_sentence(report)))
    points.append(("links", _links(report)))
    if caveat and d.get("cause") != "bandwidth":
        points.append(("caveat", caveat))
    return [{"topic": t, "text": fit(x)} for t, x in points if x][:MAX_POINTS]
