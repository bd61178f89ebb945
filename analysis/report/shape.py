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
    capture: str | None  # checks of a `commwall capture` directory (None: not captured so)


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


class DimensionRow(TypedDict):
    """One dimension's exposed communication in the mean window (analysis/steps/dimension.py)."""

    dimension: str  # TP, CP, PP, EP, FSDP, DP or unknown
    label: str
    exposed_ms: float
    exposed_transfer_ms: float
    exposed_wait_ms: float
    share_of_step: float | None
    share_of_exposed: float | None


class DimensionRankRow(TypedDict):
    """One (rank, dimension): means over the rank's windows."""

    rank: int
    dimension: str
    exposed_transfer_ms: float
    exposed_wait_ms: float


class GroupRole(TypedDict):
    """A process group, its calls and its role (analysis/collectives/roles.py role_of)."""

    pg_name: str | None
    pg_desc: str | None
    n_calls: int
    role: str
    source: str  # name, structure or none
    dimension: str


class FsdpSplit(TypedDict):
    """FSDP's exposed communication: its all-gathers apart from its reduce-scatters."""

    allgather_exposed_ms: float
    allgather_exposed_wait_ms: float
    reduce_scatter_exposed_ms: float
    reduce_scatter_exposed_wait_ms: float


class AllToAllPair(TypedDict):
    """Bytes one rank sent another in the run's all-to-alls."""

    src: int
    dst: int
    bytes: int


class ExpertImbalance(TypedDict, total=False):
    """The all-to-alls' traffic per rank pair, from their split sizes."""

    available: bool
    reason: str
    n_calls: int
    pairs: list[AllToAllPair]
    pair_max_over_mean: float | None
    received_bytes: dict[str, int]
    top_receiver: int | None
    top_receiver_over_mean: float | None


class Dimensions(TypedDict, total=False):
    """The step's exposed communication by parallelism dimension (docs/parallelism.md)."""

    scope: str | None
    dimensions: list[str]
    labels: dict[str, str]
    step_ms: float | None
    exposed_comm_ms: float | None
    run: list[DimensionRow]
    ranks: list[DimensionRankRow]
    groups: list[GroupRole]
    fsdp: FsdpSplit | None
    ep: ExpertImbalance | None


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


class PipelineStage(TypedDict):
    """One stage of a pipeline: its rank, and per step (medians over steps) its compute, its
    waiting for a neighbour (receives before their send began, sends before their receive was
    posted) and its receives' transfer."""

    stage: int
    rank: int
    compute_ms: float
    wait_ms: float
    recv_wait_ms: float
    send_wait_ms: float
    transfer_ms: float


class PipelineChain(TypedDict):
    """One pipeline: a chain of ranks joined by matched sends and receives
    (analysis/report/pipeline.py)."""

    ranks: list[int]
    micro_batches: int
    stages: list[PipelineStage]
    slowest_stage: int
    slowest_rank: int
    compute_ratio: float | None
    balanced: bool
    step_ms: float | None
    balanced_step_ms: float | None
    bubble_formula: float | None
    bubble_formula_2m: float | None
    micro_batches_2m_step_ms: float | None
    micro_batches_2m_formula_step_ms: float | None
    wait_share: float | None


class Pipeline(TypedDict, total=False):
    """The run's pipelines, the stage that sets the step, and the stages replayed balanced."""

    available: bool
    reason: str
    pipelines: list[PipelineChain]
    sentence: str


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


class FixRow(TypedDict):
    """One replayed fix: its what-if key and words, the step after it and the saving."""

    key: str
    fix: str
    step_ms: float
    saving_ms: float
    saving_pct: float


class Fixes(TypedDict):
    """The replay's fixes, largest saving first, and the step they start from (the replay's:
    the slowest rank's step, median over steps) beside the summary's step."""

    baseline_ms: float | None
    baseline: str
    summary_step_ms: float | None
    rows: list[FixRow]


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
    headline: str  # the answer at a glance (the same text as `answer`)
    answer: str  # at most 25 words: what sets the step and whom or what to fix
    opening: str  # the paragraph's first sentence: the wall, its parts, compute and idle
    brief: list[Point]  # at most five points of at most 40 words (analysis.report.brief)
    fixes: Fixes
    paragraph: str
    points: list[Point]


class FabricPoint(TypedDict):
    """One measured size of an nccl-tests table."""

    size_bytes: int
    busbw_GBps: float


class FabricTable(TypedDict):
    """An nccl-tests table a run is measured against (`fabric.tables`)."""

    name: str  # file base name and table number, `all_reduce.log#1`
    op: str | None
    n_ranks: int | None
    n_nodes: int | None
    gpu: str | None
    min_bytes: int
    max_bytes: int
    curve: list[FabricPoint]  # the measured bus bandwidth by size (out-of-place)


class FabricClass(TypedDict):
    """One class of a run's collectives (op, message size, group size) against the baseline."""

    op: str
    size_bytes: int
    n_ranks: int
    n_calls: int
    transfer_ms_median: float
    transfer_ms_total: float
    busbw_GBps: float  # training's median bus bandwidth
    baseline: str | None  # the table priced from (FabricTable.name)
    baseline_basis: str | None  # same op, or another op carried across
    baseline_n_ranks: int | None
    baseline_time_ms: float | None  # the table's curve at size_bytes
    baseline_busbw_GBps: float | None
    extrapolated: bool | None  # size_bytes outside the table's measured sizes
    ratio: float | None  # busbw_GBps / baseline_busbw_GBps


class FabricBaseline(TypedDict):
    """The run's collectives against nccl-tests on the same fabric (docs/model.md)."""

    present: bool
    reason: str | None
    source: str
    ratio_limit: float
    tables: list[FabricTable]
    n_classes: int
    classes: list[FabricClass]
    time_ratio: float | None  # nccl-tests' time for the same calls / the training's
    status: str | None  # attention | ok
    sentence: str | None
    baseline_run: str | None  # the run whose tables are the baseline; None: this run's own
    caveat: str | None  # the headline's table measured other GPUs, nodes or ranks than the run


class Inspector(TypedDict, total=False):
    """The whole run as NCCL Inspector recorded it (analysis/inspector/section.py,
    docs/inspector.md). Every key is there whether or not the run has Inspector output;
    `present` False says why in `reason`."""

    present: bool
    reason: str | None
    versions: list[str]
    records: dict[str, int]  # coll, p2p, proxy
    traced: bool  # kernel start times (verbose output) were read
    start_ts: int | None  # ns, first and last record
    end_ts: int | None
    instances_kept: bool  # one row per operation and rank was stored
    processes: list[dict[str, Any]]
    communicators: list[dict[str, Any]]
    stragglers: list[dict[str, Any]]
    bandwidth: list[dict[str, Any]]
    slow_hosts: list[dict[str, Any]]
    losses: dict[str, Any] | None
    skipped_batches: int
    prometheus: list[dict[str, Any]]
    traced_window: dict[str, Any] | None
    last_grid: list[dict[str, Any]]  # who was last, ranks × time buckets
    join: dict[str, Any] | None  # the processes and communicators found in traces and logs
    baseline: list[dict[str, Any]]  # bus bandwidth against the run's nccl-tests results
    findings: list[str]


class Report(TypedDict, total=False):
    """`commwall report --format json`. A section whose builder failed is None and named in
    `analysis_errors`."""

    run: str
    run_info: RunInfo | None
    summary: Summary | None
    ranks: list[RankRow] | None
    steps: list[RankRow] | None
    decomposition: Decomposition | None
    dimensions: Dimensions | None
    stragglers: Stragglers | None
    replay: Replay | None
    pipeline: Pipeline | None
    collectives: dict[str, Any] | None
    nccl: dict[str, Any] | None
    model: dict[str, Any] | None
    hang: dict[str, Any] | None
    inspector: Inspector | None
    fabric: FabricBaseline | None
    diagnosis: Diagnosis | None
    checklist: list[dict[str, Any]] | None
    analysis_errors: dict[str, str]
