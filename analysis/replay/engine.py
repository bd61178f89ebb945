"""What-if replay of the measured run: the run's own timeline re-played with one thing changed.

Model (docs/diagnosis.md). Per step, every rank is a chain of *gaps* and *collective calls*, on
the aligned clock (sql/replay.sql):

* the first call of a rank's step comes a gap after its window start; a later call comes a gap
  after the rank's previous call, counted from that call's *end* when the rank arrived after it
  had ended (it was blocked on it: a blocking collective, or a serial communication thread), from
  its *arrival* otherwise (an asynchronous collective: the rank went on working); the window end
  comes a gap after the last call, counted the same way;
* every matched instance (>= 2 ranks, sizes agreeing) is a barrier: its transfer starts when its
  last rank arrives (S) and takes the measured transfer T = E - S, E the instance's median end.

Gaps hold whatever the rank did between calls (compute, memory copies, idle, other calls).
Where the trace says when the program *issued* a call that a worker thread ran later (gloo's
`c10d::*` op, sql/replay.sql), the chain above runs on the issues, and the call arrives at the
later of its issue and the own end of an earlier call the worker was still busy with (the
worker's measured delay after that end kept; a call that no earlier end held keeps its measured
delay after its issue): a call waiting in the worker's queue cannot start before the program
asked for it, however early the call ahead of it ends.
Replaying with nothing changed reproduces every window exactly (up to non-causal instances,
E < S, whose transfer is taken as 0). A what-if changes gaps or barriers and replays: the step
time of a step is its slowest rank's (window start to replayed window end), and the run's is the
median over steps (job_step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from commwall.analysis import policy
from commwall.analysis.replay.chain import BusyTime, Steps, build_steps
from commwall.analysis.replay.dimensions import dimension_whatifs
from commwall.analysis.replay.walk import WhatIf, replay_ends
from commwall.analysis.units import NS_PER_MS

#: A run with more calls than this (thousands of ranks) is replayed on a sample of its steps,
#: evenly spaced, as many as fit (at least one); every step of smaller runs (all real sets) is
#: replayed.
MAX_REPLAY_CALLS = 100_000


def _sample_steps(calls_per_step: dict[int, int], budget: int | None = None) -> set[int]:
    """The steps to replay: all when their calls fit in `budget` (default MAX_REPLAY_CALLS),
    else k evenly spaced steps (k = as many of the average step as fit, at least 1)."""
    budget = MAX_REPLAY_CALLS if budget is None else budget
    steps = sorted(calls_per_step)
    total = sum(calls_per_step.values())
    if total <= budget or not steps:
        return set(steps)
    k = max(1, min(len(steps), budget * len(steps) // total))
    return {steps[(2 * i + 1) * len(steps) // (2 * k)] for i in range(k)}


def _load(con: duckdb.DuckDBPyConnection, rid: int) -> Steps:
    return _load_steps(con, rid)[0]


def _load_steps(con: duckdb.DuckDBPyConnection, rid: int) -> tuple[Steps, int]:
    """The steps to replay (all, or the sample of _sample_steps) and the number of steps."""
    wins = con.execute("SELECT * FROM replay_windows(?)", [rid]).df()
    per_step = con.execute("SELECT step, n FROM replay_call_counts(?)", [rid]).fetchall()
    n_steps = wins["step"].nunique()
    keep = _sample_steps({int(s): int(n) for s, n in per_step})
    # only the calls of the steps replayed are loaded (a large run's are millions)
    calls = con.execute(
        "SELECT * FROM replay_calls_in(?, ?) ORDER BY rank, ts", [rid, sorted(keep)]
    ).df()
    if len(keep) < len(per_step):  # a sample: only its steps (windows without calls neither)
        wins = wins[wins["step"].isin(keep)]
    return build_steps(wins, calls, _busy(con, rid, wins, calls)), n_steps


def _busy(
    con: duckdb.DuckDBPyConnection, rid: int, wins: pd.DataFrame, calls: pd.DataFrame
) -> BusyTime:
    """Every rank's busy time over the span of `wins` and `calls` (the steps replayed), which
    holds every instant the replay asks about: window starts and ends, issues, arrivals and
    ends of calls (replay_busy_within; all of replay_busy when every step is replayed)."""
    return BusyTime(_busy_rows(con, rid, wins, calls))


def _busy_rows(
    con: duckdb.DuckDBPyConnection, rid: int, wins: pd.DataFrame, calls: pd.DataFrame
) -> pd.DataFrame:
    """The merged busy intervals of _busy: replay_busy_within over each rank's span."""
    points = pd.concat(
        [
            pd.DataFrame({"rank": wins["rank"], "lo": wins["ts"], "hi": wins["ts"] + wins["dur"]}),
            pd.DataFrame({"rank": calls["rank"], "lo": calls["issue_ts"], "hi": calls["te"]}),
        ]
    )
    ranges = points.groupby("rank").agg(lo=("lo", "min"), hi=("hi", "max")).reset_index()
    view = f"_replay_ranges_{id(ranges)}"
    con.register(view, ranges)
    try:
        return con.execute(f"SELECT * FROM replay_busy_within(?, {view})", [rid]).df()
    finally:
        con.unregister(view)


def replay_all(steps: Steps, whatifs: Sequence[WhatIf]) -> list[pd.DataFrame]:
    """Replayed step time per (rank, step) under each of `whatifs`, as `replay`."""
    ends = replay_ends(steps, whatifs)
    return [
        pd.DataFrame(
            {
                "rank": steps.rank,
                "step": steps.step,
                "measured_ns": steps.end - steps.start,
                "replayed_ns": e - steps.start,
            }
        )
        for e in ends
    ]


def replay(steps: Steps, w: WhatIf) -> pd.DataFrame:
    """Replayed step time per (rank, step) under `w`: rank, step, measured_ns, replayed_ns."""
    return replay_all(steps, [w])[0]


def job_steps(df: pd.DataFrame, col: str) -> pd.Series:
    """The job's time of every step: the slowest rank's (a synchronous job waits for it)."""
    return df.groupby("step")[col].max()


def job_step(df: pd.DataFrame, col: str) -> float:
    """The job's step time: per step the slowest rank's, then the median over steps."""
    return float(job_steps(df, col).median())


def standard_whatifs(
    stragglers: list[int], top_rank: int | None, speedup: float = policy.WHATIF_TRANSFER_SPEEDUP
) -> list[WhatIf]:
    """The what-ifs every report replays: stragglers (or the rank causing the most waiting) at
    the median rank's pace, nobody waiting, transfer `speedup`× faster, transfer hidden, all
    exposed communication hidden, idle removed."""
    out = [WhatIf("unchanged", "nothing changed (the replay of the measured run)")]
    fix = tuple(stragglers) or ((top_rank,) if top_rank is not None else ())
    if fix:
        who = ", ".join(str(r) for r in fix)
        ranks = f"rank{'s' * (len(fix) > 1)} {who}"
        what = f"straggler {ranks}" if stragglers else f"{ranks} (causing the most waiting)"
        out.append(
            WhatIf(
                "straggler_fixed",
                f"{what} at the pace of the other ranks (median gaps)",
                fixed_ranks=fix,
            )
        )
    out += [
        WhatIf("no_wait", "no rank waits for another (each collective starts at the first arrival)",
               barrier="first"),
        WhatIf(f"transfer_{speedup:g}x", f"data transfer {speedup:g}x faster (link or compression)",
               transfer_scale=1 / speedup),
        WhatIf("transfer_hidden", "data transfer fully hidden (takes no time on the critical path)",
               transfer_scale=0.0),
        WhatIf("comm_hidden", "all exposed communication hidden (no transfer, no waiting)",
               barrier="first", transfer_scale=0.0),
        WhatIf("idle_removed", "idle gaps removed (host, input pipeline, launch delays)",
               remove_idle=True),
    ]  # fmt: skip
    return out


@dataclass
class ReplayResult:
    """Measured and replayed step times and the ranked what-ifs."""

    measured_ns: float
    replayed_ns: float
    whatifs: pd.DataFrame  # key, label, step_ns, saving_ns, saving_share (ranked)
    per_step: pd.DataFrame  # rank, step, measured_ns, replayed_ns (unchanged)
    steps_replayed: int = 0  # steps replayed (all, or a sample: MAX_REPLAY_CALLS)
    steps_total: int = 0  # steps of the run with a window
    by_step: pd.DataFrame = field(default_factory=pd.DataFrame)  # see whatif_by_step


def replay_run(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    stragglers: list[int],
    top_rank: int | None,
    progress: Callable[[str], None] | None = None,
) -> ReplayResult | None:
    """Replay run `rid` unchanged, under the standard what-ifs and under those of its
    parallelism dimensions (dimensions.py); None when the run has no steps with collective
    barriers to replay."""
    steps, n_steps = _load_steps(con, rid)
    if not steps.n_calls:
        return None
    results = {}
    per_step = None
    by_step = []
    whatifs = standard_whatifs(stragglers, top_rank) + dimension_whatifs(con, rid, steps)
    floors = _compute_floors(con, rid)
    for w, df in zip(whatifs, replay_all(steps, whatifs), strict=True):
        if progress:
            progress(w.key)
        if w.key == "unchanged":
            per_step = df
        else:
            df = at_least_own_compute(df, floors, w.fixed_ranks)
        job = job_steps(df, "replayed_ns")
        by_step.append(pd.DataFrame({"key": w.key, "step_ns": job}).reset_index())
        results[w] = float(job.median())
    assert per_step is not None
    measured_by_step = job_steps(per_step, "measured_ns").rename("measured_ns").reset_index()
    by_step_df = pd.concat(by_step, ignore_index=True).merge(measured_by_step, on="step")
    measured = job_step(per_step, "measured_ns")
    base = results[next(w for w in results if w.key == "unchanged")]
    rows = [
        (w.key, w.label, v, base - v, (base - v) / base if base else None)
        for w, v in results.items()
        if w.key != "unchanged"
    ]
    table = pd.DataFrame(rows, columns=["key", "label", "step_ns", "saving_ns", "saving_share"])
    table = table.sort_values("saving_ns", ascending=False, kind="stable").reset_index(drop=True)
    by_step_df = by_step_df[["step", "key", "measured_ns", "step_ns"]]
    n_replayed = len(set(steps.step.tolist()))
    return ReplayResult(measured, base, table, per_step, n_replayed, n_steps, by_step_df)


def _compute_floors(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """The serial work per (rank, step) that no what-if shortens (`serial_work`): rank, step,
    floor_ns."""
    work = con.execute(
        "SELECT o.rank, o.step, o.compute_ns AS operator_ns, s.compute_ns AS busy_ns "
        "FROM operator_compute(?) o JOIN step_overlap(?) s USING (rank, step)",
        [rid, rid],
    ).df()
    return serial_work(work)


def serial_work(work: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step) of `work` (rank, step, operator_ns: operator compute, operator_compute
    .sql; busy_ns: compute time, τ_comp of step_overlap), the work no what-if makes shorter
    (rank, step, floor_ns): the rank's operator compute; and for a rank whose compute time over
    the steps is at least policy.BUSY_OUTSIDE_OPERATORS times the median of the other ranks'
    (the rule by which the diagnosis says a rank spends time outside operators), also its
    compute outside operators beyond the other ranks' median in that step: a sleep, a lock or
    Python work in a gradient hook runs inside the autograd node that calls the hook, in no
    operator, and takes as long whatever the network does. The other ranks' time outside
    operators is left out: on CPU traces it holds the engine's overhead and, on a host whose
    ranks share cores, time a thread waited for one, which a shorter transfer may give back."""
    out = work[["rank", "step"]].copy()
    out["floor_ns"] = work["operator_ns"].astype("float64")
    if work.empty:
        return out
    outside = (work["busy_ns"] - work["operator_ns"]).clip(lower=0).astype("float64")
    busy = work.groupby("rank")["busy_ns"].sum()
    if len(busy) < 2:
        return out
    # the other ranks' median is at least this order statistic of all ranks: only the ranks
    # above it by the factor can pass, and only those are checked against their own others
    least = float(np.sort(busy.to_numpy())[(len(busy) - 2) // 2])
    for rank, own in busy[busy >= policy.BUSY_OUTSIDE_OPERATORS * least].items():
        median = busy.drop(rank).median()
        if median <= 0 or own < policy.BUSY_OUTSIDE_OPERATORS * median:
            continue
        mine = work["rank"] == rank
        typical = outside[~mine].groupby(work.loc[~mine, "step"]).median()
        extra = outside[mine] - work.loc[mine, "step"].map(typical).fillna(0.0).to_numpy()
        out.loc[mine, "floor_ns"] += extra.clip(lower=0)
    return out


def at_least_own_compute(
    df: pd.DataFrame, floors: pd.DataFrame, fixed: tuple[int, ...] = ()
) -> pd.DataFrame:
    """A what-if's replayed step per (rank, step), no shorter than the rank's own serial work in
    that step (`serial_work`): no change to communication, waiting or idle time makes it
    shorter. The replay can predict less where a rank computed while one of its
    calls was in flight (gloo runs the call on another thread) and the shortened call takes
    that compute with it. The ranks a what-if fixes (`fixed`) change their compute: left as
    replayed."""
    if floors.empty:
        return df
    out = df.merge(floors, on=["rank", "step"], how="left")
    keep = out["rank"].isin(list(fixed)) | out["floor_ns"].isna()
    out["replayed_ns"] = out["replayed_ns"].where(
        keep, np.maximum(out["replayed_ns"], out["floor_ns"])
    )
    return out.drop(columns="floor_ns")


def _targets(con: duckdb.DuckDBPyConnection, rid: int) -> tuple[list[int], int | None]:
    """The flagged stragglers of run `rid` and the rank causing the most waiting (None when
    nobody waits): whom "straggler fixed" fixes."""
    ranks = con.execute("SELECT rank, flagged, caused_ns FROM straggler_ranks(?)", [rid]).df()
    flagged = [int(r) for r in ranks.loc[ranks["flagged"], "rank"]]
    top = None
    if not ranks.empty and ranks["caused_ns"].max() > 0:
        top = int(ranks.loc[ranks["caused_ns"].idxmax(), "rank"])
    return flagged, top


def whatif_by_step(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """The replay of run `rid` step by step: one row per (replayed step, what-if) with the job's
    measured step (`measured_ns`, the slowest rank's window) and its replay under the what-if
    (`step_ns`); `key` as in the report's `replay.whatifs`, plus `unchanged`. Empty when the run
    has nothing to replay. The run's figures are the medians of these over steps."""
    res = replay_run(con, rid, *_targets(con, rid))
    if res is None:
        return pd.DataFrame(columns=["step", "key", "measured_ns", "step_ns"])
    return res.by_step


def replay_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The report's `replay`: measured and replayed step time (median over rank-step windows)
    and the what-ifs ranked by the time they would save."""
    flagged, top = _targets(con, rid)
    res = replay_run(con, rid, flagged, top)
    if res is None:
        return {
            "available": False,
            "reason": "no step windows with collectives matched across ranks to replay",
            "whatifs": [],
        }
    if res.measured_ns <= 0:
        return {
            "available": False,
            "reason": "the replayed steps measure 0 ms: no step time a change could shorten",
            "whatifs": [],
        }
    err = (res.replayed_ns - res.measured_ns) / res.measured_ns
    whatifs = [
        {
            "key": r.key,
            "label": r.label,
            "step_ms": r.step_ns / NS_PER_MS,
            "saving_ms": r.saving_ns / NS_PER_MS,
            "saving_pct": None if r.saving_share is None else 100 * r.saving_share,
        }
        for r in res.whatifs.itertuples(index=False)
    ]
    return {
        "available": True,
        "statistic": "median over steps of the slowest rank's window",
        "measured_step_ms": res.measured_ns / NS_PER_MS,
        "replayed_step_ms": res.replayed_ns / NS_PER_MS,
        "replay_error": err,
        "fixed_ranks": flagged or ([top] if top is not None else []),
        "whatifs": whatifs,
        "steps_replayed": res.steps_replayed,
        "steps_total": res.steps_total,
    }
