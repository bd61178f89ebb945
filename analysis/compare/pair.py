"""Two runs side by side (before/after a fix): headline metrics and their deltas, and whether
the two are the same job at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def _job(report: Mapping[str, Any]) -> dict[str, Any]:
    """What makes a job the same job: its ranks, devices, backends and GPU models."""
    info = report.get("run_info") or {}
    return {
        "ranks": info.get("n_ranks"),
        "devices": info.get("device_kind"),
        "backends": ", ".join(sorted(str(b) for b in info.get("backends") or [])) or None,
        "GPUs": ", ".join(sorted(str(g) for g in info.get("gpus") or [])) or None,
    }


def job_differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """How run `after` differs from run `before` as a job ("ranks: 8 → 4", "backends: nccl →
    gloo"): a comparison of different jobs says how the runs differ, not what a change did.
    Facts either report lacks are not compared."""
    a, b = _job(before), _job(after)
    return [
        f"{k}: {a[k]} → {b[k]}" for k in a if a[k] is not None and b[k] is not None and a[k] != b[k]
    ]


def comparable(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether the two runs are the same job (no job_differences)."""
    return not job_differences(before, after)
