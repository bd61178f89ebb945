"""Compute-bound or communication wall, for a dict of step metrics.

The rule is the step model's (analysis.model.step.verdict); this adapts it to the dicts the
report carries: the measured `summary` section and the model's `predicted` dict alike (keys
step_ms, tau_comp_ms, tau_comm_ms, exposed_comm_ms, and optionally exposed_comm_share, gamma,
eta, and exposed_wait_ms on a measured step).
"""

from __future__ import annotations

from analysis.model.step import DEFAULT_TARGET_OVERHEAD
from analysis.model.step import verdict as step_verdict

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
