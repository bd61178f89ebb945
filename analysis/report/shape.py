"""The report's shape as types: what `build_report` returns and what the CLI, the dashboard and
the export read. The JSON report's keys are a public interface (add keys, never rename), so
they are declared here once; `tests/test_report_types.py` checks on real runs that every key a
report holds is declared and every key declared required is there.

All times are milliseconds (`*_ms`), shares are fractions of the step (0–1), ratios plain
floats. `total=False` marks sections whose keys depend on what the run holds (a section that
is "not available" carries `available: False` and a `reason`). The sections not typed here
(`collectives`, `nccl`, `model`, `hang`, `checklist`) are documented with their builders.
"""

from __future__ import annotations

from typing import Any, TypedDict


class RunInfo(TypedDict):
    """What the run is made of."""

    files: dict[str, int]  # files per format
    n_ranks: int
    world_size: int | None
    gpus: list[str]
    device_kind: str | None  # "gpu", "cpu", or None without activity
    backends: list[str]
    time_bases: list[str]
    hosts: list[str]
    n_steps: int
    n_dump_ranks: int  # ranks with a Flight Recorder dump (n_ranks counts traced ranks)
    nccl_world_size: int | None  # the largest communicator the NCCL logs name (None: no logs)


class Parts(TypedDict, total=False):
    """The six parts a step splits into (they add up to `step_ms` where it is given)."""

    step_ms: float
    compute_only_ms: float
    compute_overlapped_ms: float
    exposed_transfer_ms: float
    exposed_wait_ms: float
    memory_only_ms: float
    idle_ms: float


class Summary(Parts, total=False):
    """The run's mean (rank, step) row and the ratios computed from it."""

    scope: str | None  # "steps" or "whole trace"
    aggregation: str
    n_windows: int
    step_ms_median: float
    step_ms_p90: float
    tau_comp_ms: float
    tau_comm_ms: float
    overlap_ms: float
    exposed_comm_ms: float
    eta: float | None
    gamma: float | None
    exposed_comm_share: float | None
    idle_queued_share: float | None  # idle gaps whose work was issued already (sql/idle.sql)
    launch_lead_ms: float | None  # median, over ranks, of how far ahead the host issues work
    memory_host_device_share: float | None  # memory copy time that is HtoD/DtoH (memory.sql)


class RankRow(TypedDict, total=False):
    """Whole-trace metrics of one rank (`ranks`), or of one (rank, step) (`steps`)."""

    rank: int
    step: int
    step_ms: float
    span_ms: float
    tau_comp_ms: float
    tau_comm_ms: float
    overlap_ms: float
    eta: float | None
    gamma: float | None
    exposed_comm_ms: float
    idle_ms: float
    comm_overlap_fraction: float | None


class PartRow(Parts, total=False):
    """Decomposition of one rank (mean over its steps) or of one (rank, step)."""

    rank: int
    step: int


class Decomposition(TypedDict, total=False):
    """Every step split into the six parts: the run, per rank, per (rank, step)."""

    scope: str | None
    parts: list[str]
    labels: dict[str, str]
    run: Parts | None
    ranks: list[PartRow]
    steps: list[PartRow]


class StragglerRank(TypedDict, total=False):
    """One rank's lateness, the wait it causes, and whether it is named a straggler."""

    rank: int
    host: str | None
    flagged: bool
    kind: str | None  # "compute" or "other" for a flagged rank
    n_instances: int
    n_last: int
    late_fraction: float
    lateness_ms: float
    wait_ms: float
    wait_caused_ms: float
    share_of_wait: float | None  # of all the waiting of the run (None when nobody waited)
    cost_share: float
    excess_ms: float
    delay_ms: float
    mean_share: float
    n_units: int
    consistency_t: float
    score: float
    n_steps: int
    steps_flagged: int
    compute_ms: float | None
    compute_ratio: float | None
    compute_score: float | None
    # how much later than the first rank it enters its steps, median (None: no shared step)
    start_delay_ms: float | None


class StragglerStep(TypedDict):
    """Per step: flagged ranks and the rank that caused the most waiting."""

    step: int | None
    flagged: list[int]
    top_rank: int
    top_wait_caused_ms: float
    top_late_fraction: float


class _StragglersRequired(TypedDict):
    flagged: list[int]
    verdict: str
    ranks: list[StragglerRank]
    steps: list[StragglerStep]


class Stragglers(_StragglersRequired, total=False):
    """Who makes the others wait, and the verdict in words; `caveat` when the job hung and the
    figures hold the wait for the hung collective (analysis/hangs/stopped.py)."""

    caveat: str


class WhatIf(TypedDict):
    """One replayed change: the step it would give and what it saves."""

    key: str
    label: str
    step_ms: float
    saving_ms: float
    saving_pct: float


class Replay(TypedDict, total=False):
    """The measured run replayed unchanged and with one change at a time."""

    available: bool
    reason: str
    statistic: str
    measured_step_ms: float
    replayed_step_ms: float
    replay_error: float
    fixed_ranks: list[int]
    whatifs: list[WhatIf]
    steps_replayed: int
    steps_total: int


class Culprit(TypedDict, total=False):
    """A rank the diagnosis names, with why it is late."""

    rank: int
    host: str | None
    flagged: bool
    kind: str
    why: str
    n_instances: int
    n_last: int
    share_of_wait: float
    wait_caused_ms: float
    idle_ms_per_step: float
    median_idle_ms_per_step: float
    late_start: bool  # late before its steps begin (stragglers' start_delay_ms)


class Point(TypedDict):
    """One sentence of the diagnosis paragraph and its topic: "hang", "what", "bandwidth",
    "who", "whatif", "fix" or "model"."""

    topic: str
    text: str


class Diagnosis(TypedDict, total=False):
    """The answer to "why": the cause, the parts as shares, the culprits, the best fix."""

    available: bool
    reason: str
    wall: bool
    cause: str
    label: str
    causes: list[str]
    shares: dict[str, float]
    exposed_comm_share: float
    culprits: list[Culprit]
    fix: WhatIf | None
    headline: str
    answer: str  # at most 25 words: what sets the step and whom or what to fix
    paragraph: str
    points: list[Point]


class Report(TypedDict, total=False):
    """`commwall report --format json`. A section whose builder failed is None and named in
    `analysis_errors`."""

    run: str
    run_info: RunInfo | None
    summary: Summary | None
    ranks: list[RankRow] | None
    steps: list[RankRow] | None
    decomposition: Decomposition | None
    stragglers: Stragglers | None
    replay: Replay | None
    collectives: dict[str, Any] | None
    nccl: dict[str, Any] | None
    model: dict[str, Any] | None
    hang: dict[str, Any] | None
    diagnosis: Diagnosis | None
    checklist: list[dict[str, Any]] | None
    analysis_errors: dict[str, str]
