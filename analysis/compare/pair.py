"""Two runs side by side (before/after a fix): headline metrics and their deltas."""

from __future__ import annotations

#: Summary keys compared, with their labels (times in ms, ratios as fractions).
METRICS: dict[str, str] = {
    "step_ms": "step time (ms)",
    "tau_comp_ms": "τ_comp (ms)",
    "tau_comm_ms": "τ_comm (ms)",
    "overlap_ms": "overlap (ms)",
    "exposed_comm_ms": "exposed communication (ms)",
    "idle_ms": "idle (ms)",
    "eta": "η (overlap efficiency)",
    "gamma": "γ (τ_comm / τ_comp)",
    "exposed_comm_share": "exposed communication share of step",
}


def compare(before: dict, after: dict) -> list[dict]:
    """One row per headline metric: metric key, label, before, after, delta (after − before)
    and change (delta / before; None when before is 0 or a value is missing)."""
    a, b = before.get("summary") or {}, after.get("summary") or {}
    rows = []
    for key, label in METRICS.items():
        x, y = a.get(key), b.get(key)
        delta = None if x is None or y is None else y - x
        change = None if delta is None or not x else delta / x
        rows.append(
            {
                "metric": key,
                "label": label,
                "before": x,
                "after": y,
                "delta": delta,
                "change": change,
            }
        )
    return rows
