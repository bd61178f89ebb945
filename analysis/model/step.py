"""Step-time model with overlap, and the verdict (docs/model.md).

`T_step = τ_comp + τ_comm − min(τ_comp, τ_comm)·η`, η ∈ [0, 1] the overlap efficiency. With
gradient accumulation over k micro-batches the gradient collectives run once per optimizer
step and can overlap only the last micro-batch's backward: `T = k·τ_comp + τ_comm −
min(τ_comp, τ_comm)·η` (τ_comp per micro-batch). All times in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

COMPUTE_BOUND = "compute-bound"
COMM_WALL = "communication wall"
DEFAULT_TARGET_OVERHEAD = 0.10
#: Exposed communication spent waiting for late ranks at or above this fraction of it is a
#: wall of waiting: neither bandwidth nor overlap is the remedy.
WAIT_DOMINATES = 0.5


@dataclass(frozen=True)
class StepModel:
    """One optimizer step: its parts (s) and ratios.

    gamma = τ_comm / (k·τ_comp); comm_overhead = exposed comm / T_step (the share of the step
    lost to communication); gpu_efficiency = k·τ_comp / T_step (the compute share, not MFU)."""

    compute_s: float
    comm_s: float
    eta: float
    grad_accum: int
    overlap_s: float
    exposed_comm_s: float
    step_s: float
    gamma: float
    comm_overhead: float
    gpu_efficiency: float
    verdict: str
    reason: str


def _check(compute_s: float, comm_s: float, eta: float, grad_accum: int) -> None:
    if compute_s < 0 or comm_s < 0 or not 0 <= eta <= 1 or grad_accum < 1:
        raise ValueError("need compute_s, comm_s >= 0, 0 <= eta <= 1, grad_accum >= 1")


def mostly_waiting(wait_fraction: float | None) -> TypeGuard[float]:
    """Whether exposed communication of which `wait_fraction` was spent waiting for late ranks
    (None: not known) is mostly waiting."""
    return wait_fraction is not None and wait_fraction >= WAIT_DOMINATES


def verdict(
    comm_overhead: float,
    gamma: float,
    eta: float,
    target: float,
    wait_fraction: float | None = None,
) -> tuple[str, str]:
    """(verdict, reason): a communication wall when exposed communication exceeds `target` of
    the step; the reason says whether overlap could hide it (γ < 1) or not. On a measured step,
    `wait_fraction` is the part of the exposed communication spent waiting for late ranks:
    when that is most of it, neither bandwidth nor overlap is the remedy, and the reason says
    so instead (the diagnosis names the late ranks)."""
    share = f"exposed communication is {100 * comm_overhead:.1f}% of the step"
    if comm_overhead <= target:
        return COMPUTE_BOUND, f"{share} (target {100 * target:.0f}%)"
    if mostly_waiting(wait_fraction):
        return COMM_WALL, (
            f"{share}, {100 * wait_fraction:.0f}% of it waiting for late ranks rather than "
            "transferring data: more bandwidth would not remove the waiting (the diagnosis "
            "says who is late and why)"
        )
    if gamma >= 1:
        return COMM_WALL, (
            f"{share}; communication takes {gamma:.2f}× the compute time, so no overlap can "
            "hide it: more bandwidth, fewer bytes or more compute per sync are needed"
        )
    return COMM_WALL, (
        f"{share}; communication is shorter than compute (γ = {gamma:.2f}) but overlap "
        f"η = {eta:.2f} leaves it exposed: better overlap would hide it"
    )


def step_model(
    compute_s: float,
    comm_s: float,
    eta: float = 0.0,
    grad_accum: int = 1,
    target_overhead: float = DEFAULT_TARGET_OVERHEAD,
) -> StepModel:
    """The step model for τ_comp = `compute_s` per micro-batch and τ_comm = `comm_s` per
    optimizer step."""
    _check(compute_s, comm_s, eta, grad_accum)
    compute = grad_accum * compute_s
    overlap = min(compute_s, comm_s) * eta
    exposed = comm_s - overlap
    step = compute + exposed
    gamma = comm_s / compute if compute > 0 else float("inf")
    overhead = exposed / step if step > 0 else 0.0
    v, reason = verdict(overhead, gamma, eta, target_overhead)
    return StepModel(
        compute_s=compute,
        comm_s=comm_s,
        eta=eta,
        grad_accum=grad_accum,
        overlap_s=overlap,
        exposed_comm_s=exposed,
        step_s=step,
        gamma=gamma,
        comm_overhead=overhead,
        gpu_efficiency=compute / step if step > 0 else 1.0,
        verdict=v,
        reason=reason,
    )


def max_comm_for_overhead(
    compute_s: float, eta: float, grad_accum: int = 1, target: float = DEFAULT_TARGET_OVERHEAD
) -> float:
    """The longest τ_comm (s) that keeps comm_overhead <= `target` (0 <= target < 1): exposed
    comm E may reach target/(1 − target)·k·τ_comp, and E = τ_comm(1 − η) up to τ_comp,
    τ_comm − η·τ_comp beyond."""
    _check(compute_s, 0.0, eta, grad_accum)
    if not 0 <= target < 1:
        raise ValueError("target must be in [0, 1)")
    e_max = target / (1 - target) * grad_accum * compute_s
    if e_max >= compute_s * (1 - eta):
        return e_max + eta * compute_s
    return e_max / (1 - eta)
