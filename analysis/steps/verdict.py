"""Compute-bound or communication wall, for a dict of step metrics.

The rule is the step model's (analysis.model.step.verdict); this adapts it to the dicts the
report carries: the measured `summary` section and the model's `predicted` dict alike (keys
step_ms, tau_comp_ms, tau_comm_ms, exposed_comm_ms, and optionally exposed_comm_share, gamma,
eta, and exposed_wait_ms on a measured step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commwall.analysis.model.step import DEFAULT_TARGET_OVERHEAD
from commwall.analysis.model.step import verdict as step_verdict

#: Exposed communication above this share of the step is a communication wall.
EXPOSED_SHARE_LIMIT = DEFAULT_TARGET_OVERHEAD


def exposed_share(m: dict) -> float | None:
    """Exposed communication / step time (`exposed_comm_share` when given)."""
    if m.get("exposed_comm_share") is not None:
        return m["exposed_comm_share"]
    exposed, step = m.get("exposed_comm_ms"), m.get("step_ms")
    return None if exposed is None or not step else exposed / step


def wait_fraction(m: dict) -> float | None:
    """The part of the exposed communication spent waiting for late ranks (`exposed_wait_ms`
    ÷ `exposed_comm_ms`), or None when either is unknown or nothing is exposed."""
    exposed, wait = m.get("exposed_comm_ms"), m.get("exposed_wait_ms")
    return wait / exposed if wait is not None and exposed else None


def verdict(m: dict | None) -> dict | None:
    """{"verdict", "reason"} for step metrics `m`, or None when they say nothing about
    communication (no step time, no exposed communication, or no compute time)."""
    if not m:
        return None
    share = exposed_share(m)
    if share is None:
        return None
    gamma = m.get("gamma")
    if gamma is None and m.get("tau_comp_ms") and m.get("tau_comm_ms") is not None:
        gamma = m["tau_comm_ms"] / m["tau_comp_ms"]
    if gamma is None:
        return None
    wait = wait_fraction(m)
    v, reason = step_verdict(share, gamma, m.get("eta") or 0.0, EXPOSED_SHARE_LIMIT, wait)
    return {"verdict": v, "reason": reason}


#: What-ifs that are bounds rather than fixes: nobody can make every rank arrive first, and
#: hiding all communication is the ceiling of every communication fix.
BOUNDS = frozenset({"comm_hidden", "no_wait"})

#: Replay fixes that change no transfer.
NOT_COMM_FIXES = frozenset({"straggler_fixed", "idle_removed"})


def best_fix(report: Mapping[str, Any]) -> dict | None:
    """The replay's largest fix (what-ifs ranked by saving, the bounds left out), or None."""
    rep = report.get("replay") or {}
    fixes = [w for w in rep.get("whatifs") or [] if w["key"] not in BOUNDS]
    return fixes[0] if fixes and (fixes[0]["saving_ms"] or 0) > 0 else None


def not_the_network(report: Mapping[str, Any]) -> dict | None:
    """The replay's largest fix when it changes no transfer and saves more than hiding all
    exposed communication would: then that fix's subject (a late rank's pace, idle time), not
    the network, sets the step, whatever share the decomposition gives transfer. Only where
    collectives are matched on every rank of the job: a replay of one rank, or of a few of many
    (`run_info` n_ranks below world_size), cannot tell what sets the step. The one rule the
    diagnosis, the model's measured verdict and the checklist follow."""
    if not (report.get("stragglers") or {}).get("ranks") or traced_part(report):
        return None
    fix = best_fix(report)
    if fix is None or fix["key"] not in NOT_COMM_FIXES:
        return None
    whatifs = (report.get("replay") or {}).get("whatifs") or []
    bound = next((w for w in whatifs if w["key"] == "comm_hidden"), None)
    if bound is None or fix["saving_ms"] <= bound["saving_ms"]:
        return None
    return {**fix, "comm_hidden_saving_ms": bound["saving_ms"]}


def traced_part(report: Mapping[str, Any]) -> tuple[int, int] | None:
    """(ranks traced, world size) when the traces hold only some of the job's ranks."""
    info = report.get("run_info") or {}
    world, traced = info.get("world_size"), info.get("n_ranks")
    return (traced, world) if world and traced and traced < world else None
