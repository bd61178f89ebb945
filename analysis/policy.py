"""Policy: every threshold that turns a measurement into a judgement, named once.

The SQL modules read these values as zero-argument macros (``straggler_min_t()`` …), created
from this module by :func:`sql_text` when a connection is opened (analysis/db.py), so a
threshold changed here changes the SQL and the Python that print it alike.
"""

from __future__ import annotations

#: Exposed communication (transfer + waiting not hidden by compute) above this share of the
#: step makes a communication wall.
WALL_EXPOSED_SHARE = 0.10

#: A part of the step (exposed transfer, exposed wait, idle, memory-only) is a cause worth
#: naming in the diagnosis when it takes at least this share of the step.
CAUSE_MIN_SHARE = 0.10

#: … but with compute at least this share of the step and that part below OVERHEAD_BOUND_SHARE,
#: the step is said to be mostly compute, the part its largest overhead (not "memory-bound").
COMPUTE_MAJORITY = 0.50
OVERHEAD_BOUND_SHARE = 0.25

#: Idle time is the device's own stall, not its host's delay, when at least this share of it
#: had the work that ends each gap issued already (analysis/sql/idle.sql). On the real traces
#: in tests/data: 0.87 on HTA's negative-queue-length trace (the host 162 ms ahead of the GPU),
#: 0.06-0.20 on the host-bound ones.
IDLE_QUEUED_SHARE = 0.5

#: … judged only over at least this many device activities with a launch time (a capture of a
#: few kernels, each paying its first-launch cost, says nothing about the run).
IDLE_MIN_LAUNCHED = 10

#: Memory-bound steps whose memory copy time is at least this share host <-> device
#: (analysis/sql/memory.sql) are named for those copies: PCIe input or offload traffic, not
#: on-device copies.
HOST_COPY_SHARE = 0.5

#: The diagnosis names the step window that pulls the mean step more than this far above the
#: median (the parts it reports are means over the windows).
MEAN_ABOVE_MEDIAN = 0.10

#: A rank is a straggler when its share of the waiting beats the fair share 1/n with a
#: one-sided t statistic of at least this, over the units (steps, or instances) of the scope.
#: On real 2–4 rank gloo runs made here, injected stragglers scored 6.2–604 and the 10 runs
#: without one at most 4.8 (a rank the loaded machine itself kept late, 22 % of the time).
STRAGGLER_MIN_T = 5.0

#: … over at least this many units (a t statistic over fewer is meaningless).
STRAGGLER_MIN_UNITS = 3

#: … and when the waiting it causes is at least this share of all ranks' time (it matters).
STRAGGLER_MIN_COST_SHARE = 0.05

#: … and when it is late by at least this much (ns): timestamps and clock residuals are µs.
STRAGGLER_MIN_EXCESS_NS = 10_000

#: A straggler is a *compute* straggler when its extra operator work per step is at least this
#: fraction of its delay per step.
STRAGGLER_COMPUTE_FRACTION = 0.5

#: A late rank (not a compute straggler) that enters its steps later than the first rank by at
#: least this share of its delay at the collectives is late before its steps begin.
LATE_START_SHARE = 0.5

#: A rank not flagged (its share of the waiting is not consistent from unit to unit) that still
#: causes at least INTERMITTENT_SHARE of all the waiting, costing the ranks at least
#: INTERMITTENT_COST_SHARE of their time, is an intermittent straggler: the checklist marks it
#: for attention (slow in some steps only is what throttling, a noisy neighbour or periodic work
#: look like). On the real gloo runs in tests/data the stragglers slowed in every other block of
#: steps cost 0.28-0.69 of the ranks' time; the top rank of the runs made without a straggler
#: 0.07-0.22 (with two ranks one of them always causes most of the waiting).
INTERMITTENT_SHARE = 0.5
INTERMITTENT_COST_SHARE = 0.25

#: Within one step the consistency test runs over that step's few collective instances (8 in
#: the gloo runs): one instance of noise, a loss all-reduce the ranks leave together, keeps t
#: under STRAGGLER_MIN_T. So a rank is flagged in a step also when it causes more than half of
#: that step's waiting and the waiting costs the ranks at least this share of their time in it
#: (and it is late by a measurable amount). On the real runs of tests/data/gloo_alternating and
#: gloo_pairs the consistency test alone flagged the straggler in 39 of the 132 steps it was
#: delayed in; with this rule too in 130, while the 132 steps without a delay injected that have
#: a rank flagged went from 18 to 29 (steps in which one rank's lateness, from the loaded host,
#: did cost the others that much).
STEP_STRAGGLER_COST_SHARE = 0.35

#: A rank whose compute time (τ_comp) is at least this many times the median of the other
#: ranks' spends what it does not spend in operators in its own serial work (a sleep, a lock,
#: Python in a gradient hook, which run inside the autograd node that calls them): the
#: diagnosis says so beside its operator work (analysis/collectives/stragglers.py), and the replay
#: keeps that
#: time in the rank's step (analysis/replay/engine.py's floors).
BUSY_OUTSIDE_OPERATORS = 1.5

#: What-if: the "transfer k× faster" replay uses this k.
WHATIF_TRANSFER_SPEEDUP = 2.0

_SQL_MACROS = {
    "wall_exposed_share": (WALL_EXPOSED_SHARE, "exposed share of the step that makes a wall"),
    "straggler_min_t": (STRAGGLER_MIN_T, "least t of a rank's share of the waiting vs 1/n"),
    "straggler_min_units": (STRAGGLER_MIN_UNITS, "least units (steps or instances) for t"),
    "straggler_min_cost_share": (
        STRAGGLER_MIN_COST_SHARE,
        "least share of all ranks' time a straggler's waiting costs",
    ),
    "straggler_min_excess_ns": (STRAGGLER_MIN_EXCESS_NS, "least median lateness (ns)"),
    "step_straggler_cost_share": (
        STEP_STRAGGLER_COST_SHARE,
        "least share of the ranks' time in a step a rank causing most of its waiting costs",
    ),
    "straggler_compute_fraction": (
        STRAGGLER_COMPUTE_FRACTION,
        "extra operator work / delay above which a straggler is a compute straggler",
    ),
}


def sql_text() -> str:
    """The SQL module `policy`: one documented zero-argument macro per threshold."""
    head = "-- policy: thresholds as zero-argument macros, generated from analysis/policy.py.\n"
    return head + "".join(
        f"\n-- {name}(): {doc}.\n--   returns   {value!r}\n"
        f"-- Algorithm: the constant of analysis/policy.py.\n"
        f"CREATE OR REPLACE TEMP MACRO {name}() AS {value!r};\n"
        for name, (value, doc) in _SQL_MACROS.items()
    )
