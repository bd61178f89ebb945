"""Who makes the others wait, and why, in the diagnosis's words: the culprit ranks (at most two,
each causing at least a tenth of the waiting), why each is late (more operator work, a late
start, or late without more work), the ranks close behind them, and one sentence per culprit.
Read from the report's `stragglers`, `decomposition` and `ranks` sections."""

from __future__ import annotations

from collections.abc import Mapping
from statistics import median
from typing import Any

from commwall.analysis import policy
from commwall.analysis.collectives.stragglers import SAME_WORK, extra_work_ms, late_not_compute

#: A rank not named among the culprits is "close behind" when its share of the waiting is
#: within this fraction of the last named one's.
CLOSE_BEHIND = 0.2


def fmt_ms(ms: float | None) -> str:
    """Milliseconds as the diagnosis writes them: 5.9 ms, 0.20 ms."""
    if ms is None:
        return "n/a"
    return f"{ms:.1f} ms" if abs(ms) >= 1 else f"{ms:.2f} ms"


def fmt_pct(x: float | None) -> str:
    """A share as a whole percentage."""
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _late_start(r: Mapping[str, Any]) -> bool:
    """Whether a late rank is late before its steps begin: it enters them later than the first
    rank by at least LATE_START_SHARE of its delay at the collectives (stragglers.sql)."""
    start, delay = r.get("start_delay_ms"), r.get("delay_ms")
    return bool(start and delay and delay > 0 and start >= policy.LATE_START_SHARE * delay)


def _more_work(r: Mapping[str, Any]) -> bool:
    """Whether a rank that is not flagged is late for its operator work: the compute
    straggler's rule (stragglers.sql), its extra work at least STRAGGLER_COMPUTE_FRACTION of its
    delay; when its delay is not known, 1.1x the median rank's work."""
    ratio, compute, delay = r.get("compute_ratio"), r.get("compute_ms"), r.get("delay_ms")
    if not ratio or ratio <= SAME_WORK:
        return False
    extra = extra_work_ms(ratio, compute)
    if extra is None or delay is None:
        return ratio >= 1.1
    return extra >= policy.STRAGGLER_COMPUTE_FRACTION * max(delay, 0.0)


def _busy_ratio(report: Mapping[str, Any], rank: int) -> float | None:
    """The rank's τ_comp over the median of the other ranks' (report `ranks`, whole trace)."""
    rows = [r for r in report.get("ranks") or [] if r.get("tau_comp_ms") is not None]
    own = [r["tau_comp_ms"] for r in rows if r.get("rank") == rank]
    others = [r["tau_comp_ms"] for r in rows if r.get("rank") != rank]
    if not own or not others or median(others) <= 0:
        return None
    return float(own[0] / median(others))


def culprits(report: Mapping[str, Any]) -> list[dict]:
    """Ranks causing the waiting, largest share first (share >= 10% of all waiting)."""
    ranks = (report.get("stragglers") or {}).get("ranks") or []
    if not any(r.get("share_of_wait") for r in ranks):
        return []
    decomp = {r["rank"]: r for r in (report.get("decomposition") or {}).get("ranks") or []}
    out: list[dict] = []
    for r in sorted(ranks, key=lambda r: -(r.get("wait_caused_ms") or 0)):
        share = r.get("share_of_wait") or 0.0
        if share < 0.10 or len(out) >= 2:
            break
        ratio, late_start = r.get("compute_ratio"), _late_start(r)
        if r.get("kind") == "compute" or (not r.get("flagged") and _more_work(r)):
            why = f"it does {ratio:.2f}x the median rank's operator work" + (
                " (a compute straggler)" if r.get("flagged") else ""
            )
            kind = "compute"
        elif late_start:
            start = (
                f"enters its steps {fmt_ms(r['start_delay_ms'])} after the first rank "
                f"({fmt_pct(r['start_delay_ms'] / r['delay_ms'])} of its "
                f"{fmt_ms(r['delay_ms'])} delay at the collectives)"
            )
            why = (
                f"it too {start}"
                if any(c["late_start"] for c in out)
                else f"it {start}: it is late before its step begins (the previous step's host "
                "work, data loading or the optimizer, between the profiler's step marks), not "
                "inside it; the replay starts each rank where its step began, so it leaves this "
                "delay out"
            )
            kind = "other"
        elif ratio is not None:
            why = (
                "it is "
                + late_not_compute(
                    ratio, r.get("compute_ms"), r.get("delay_ms"), _busy_ratio(report, r["rank"])
                )
                + ": a host, input-pipeline or launch delay"
            )
            kind = "other"
        else:
            why = (
                "no operator time to compare it on"
                if (report.get("run_info") or {}).get("n_steps")
                # operator work is compared per step: without step marks there is none
                else "no steps marked in the traces to compare its operator work on"
            )
            kind = "unknown"
        idle = decomp.get(r["rank"], {}).get("idle_ms")
        # the other ranks' median: with two ranks a median over all would include the culprit
        others = [d.get("idle_ms") or 0 for k, d in decomp.items() if k != r["rank"]]
        med_idle = median(others) if others else None
        out.append(
            {
                "rank": r["rank"],
                "host": r.get("host"),
                "share_of_wait": share,
                "wait_caused_ms": r.get("wait_caused_ms"),
                "n_last": r.get("n_last"),
                "n_instances": r.get("n_instances"),
                "flagged": bool(r.get("flagged")),
                "kind": kind,
                "why": why,
                "idle_ms_per_step": idle,
                "median_idle_ms_per_step": med_idle,
                "late_start": kind == "other" and late_start,
            }
        )
    return out


def close_behind(report: Mapping[str, Any], culprits: list[dict]) -> str:
    """The ranks not named that cause nearly as much of the waiting as the last one named
    (within CLOSE_BEHIND of its share): then the waiting is spread, and looking at the named
    ranks alone would mislead."""
    named = {c["rank"] for c in culprits}
    floor = culprits[-1]["share_of_wait"] * (1 - CLOSE_BEHIND)
    ranks = (report.get("stragglers") or {}).get("ranks") or []
    near = sorted(
        (r for r in ranks if r["rank"] not in named and (r.get("share_of_wait") or 0) >= floor),
        key=lambda r: -(r.get("share_of_wait") or 0),
    )
    if not near:
        return ""
    who = ", ".join(f"rank {r['rank']} {fmt_pct(r['share_of_wait'])}" for r in near)
    first, last = culprits[0]["rank"], culprits[-1]["rank"]
    if len(culprits) == 1:
        return f" Close behind: {who}: the waiting is not rank {first}'s alone."
    return (
        f" Close behind rank {last}: {who}: beyond rank {first}, the waiting is spread over "
        "several ranks."
    )


def culprit_sentence(c: dict, n_steps: int | None) -> str:
    host = f" (host {c['host']})" if c.get("host") else ""
    persistent = "a persistent straggler" if c["flagged"] else "not persistent enough to flag"
    if c["n_last"] == 0:
        # waiting is charged to every rank still absent, not only to the last one (stragglers.sql)
        s = (
            f"rank {c['rank']}{host} causes {fmt_pct(c['share_of_wait'])} of it without ever "
            f"arriving last (0/{c['n_instances']} collectives): the ranks already there wait "
            f"for it, and then for a later one; {c['why']}"
        )
    else:
        s = (
            f"rank {c['rank']}{host} causes {fmt_pct(c['share_of_wait'])} of it, last in "
            f"{c['n_last']}/{c['n_instances']} collectives ({persistent}); {c['why']}"
        )
    idle, med = c.get("idle_ms_per_step"), c.get("median_idle_ms_per_step")
    late_inside = c["kind"] != "compute" and not c.get("late_start")
    if late_inside and idle is not None and med is not None and idle > med + 0.05:
        s += (
            f"; its timeline is idle {fmt_ms(idle)} per step against {fmt_ms(med)} on the other "
            "ranks (median)"
        )
    return s
