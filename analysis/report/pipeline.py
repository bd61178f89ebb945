"""The pipeline section of the report: stages found from point-to-point traffic, what each
computes and waits per step, the stage that sets the step, and the replay with the stages
balanced (docs/parallelism.md, "Pipeline parallelism").

A pipeline is a chain of ranks joined by matched sends and receives (sql/p2p.sql) in both
directions (activations forward, gradients backward). Stage 0 is the end of the chain whose
first call of a step is a send (it has no previous stage to receive from). Per stage and step:
its compute (τ_comp, step_overlap) and its waiting for a neighbour (receives before their send
began and sends before their receive was posted, p2p_rank_steps); medians over steps. The
slowest stage is the one computing longest; "balanced" replays the run with its busy time
scaled to the median stage's compute (walk.WhatIf.busy_scale).
"""

from __future__ import annotations

import duckdb
import pandas as pd

from commwall.analysis.replay.chain import Steps
from commwall.analysis.replay.engine import _load_steps, job_step, replay_all
from commwall.analysis.replay.micro import replay_micro_batches
from commwall.analysis.replay.walk import WhatIf
from commwall.analysis.report.session import run_session
from commwall.analysis.steps import timeline
from commwall.analysis.units import NS_PER_MS

#: A stage computing at least this many times the median stage's compute is unbalanced.
UNBALANCED = 1.25


def pipeline_chains(pairs: pd.DataFrame) -> list[list[int]]:
    """The pipelines in matched send/receive pairs (columns src, dst, step, send_ts): chains of
    at least two ranks, each rank with at most two neighbours, stage 0 first (the end whose
    first call is a send). Components that are no chain (a ring, a star) are left out."""
    if pairs.empty:
        return []
    nbrs: dict[int, set[int]] = {}
    for a, b in zip(pairs["src"].astype(int), pairs["dst"].astype(int), strict=True):
        if a != b:
            nbrs.setdefault(a, set()).add(b)
            nbrs.setdefault(b, set()).add(a)
    first_send = pairs.groupby("src")["send_ts"].min()
    first_recv = pairs.groupby("dst")["recv_ts"].min()
    seen: set[int] = set()
    out = []
    for start in sorted(nbrs):
        if start in seen:
            continue
        comp, todo = set(), [start]
        while todo:
            r = todo.pop()
            if r not in comp:
                comp.add(r)
                todo += list(nbrs[r])
        seen |= comp
        ends = [r for r in comp if len(nbrs[r]) == 1]
        if len(ends) != 2 or any(len(nbrs[r]) > 2 for r in comp):
            continue

        def sends_first(r: int) -> bool:
            s = first_send.get(r)
            return s is not None and (r not in first_recv or s <= first_recv[r])

        head = min(ends, key=lambda r: (not sends_first(r), r))
        chain, prev = [head], None
        while len(chain) < len(comp):
            nxt = [n for n in nbrs[chain[-1]] if n != prev]
            prev = chain[-1]
            chain.append(nxt[0])
        out.append(chain)
    return out


def _ms(ns: float) -> float:
    return round(float(ns) / NS_PER_MS, 3)


def pipeline_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict:
    """The report's `pipeline` key. `available` false (with `reason`) when the run has no
    pipeline; else `pipelines` (one per chain, the one with the most waiting first), each with
    `ranks` (stage order), `micro_batches` (receives per step on the last stage), `stages`
    (stage, rank, compute_ms, wait_ms, recv_wait_ms, send_wait_ms, transfer_ms per step,
    medians over steps), `slowest_stage`, `slowest_rank`, `compute_ratio` (its compute ÷ the
    median of the other stages'), `balanced` (within UNBALANCED of the median stage),
    `step_ms` (the replayed step, median over steps of the slowest stage), `balanced_step_ms`
    (replayed with the slowest stage at the median stage's compute; null when balanced),
    `bubble_formula` ((p − 1) / (m + p − 1)) and `bubble_formula_2m` (with twice the
    micro-batches), `micro_batches_2m_step_ms` (the step replayed with every micro-batch split
    in two: replay/micro.py; null when it cannot be replayed) beside
    `micro_batches_2m_formula_step_ms` (the formula's: step_ms × (1 − bubble_formula) ÷
    (1 − bubble_formula_2m)), `wait_share` (the stages' median waiting ÷ step); and `sentence`,
    the diagnosis's words for the first pipeline."""
    pairs = con.execute(
        "SELECT * FROM p2p_pairs(?) WHERE matched AND NOT size_mismatch", [rid]
    ).df()
    chains = pipeline_chains(pairs)
    if not chains:
        return {"available": False, "reason": "no point-to-point chain between ranks"}
    per = con.execute("SELECT * FROM p2p_rank_steps(?)", [rid]).df()
    comp = con.execute("SELECT rank, step, compute_ns FROM step_overlap(?)", [rid]).df()
    rows = comp.merge(per, on=["rank", "step"], how="left").fillna(0)
    rows = rows[rows["step"].isin(per["step"].unique())]
    med = rows.groupby("rank")[["compute_ns", "wait_ns", "recv_wait_ns", "send_wait_ns",
                                "recv_transfer_ns"]].median()  # fmt: skip
    steps, _ = _load_steps(con, rid)
    barriers = con.execute("SELECT ik, src, k FROM p2p_replay_pairs(?)", [rid]).df()
    more = replay_micro_batches(steps, barriers, [r for c in chains for r in c])
    out = [_one(chain, med, pairs, steps, more) for chain in chains]
    out.sort(key=lambda p: -sum(s["wait_ms"] for s in p["stages"]))
    return {"available": True, "pipelines": out, "sentence": pipeline_sentence(out[0])}


def _one(
    chain: list[int],
    med: pd.DataFrame,
    pairs: pd.DataFrame,
    steps: Steps,
    more: pd.DataFrame | None,
) -> dict:
    """One pipeline's figures (pipeline_section); `more`: the replay with twice the
    micro-batches (replay_micro_batches), None when not replayed."""
    stages = []
    for i, r in enumerate(chain):
        m = med.loc[r] if r in med.index else pd.Series(dtype=float)
        stages.append(
            {
                "stage": i,
                "rank": r,
                "compute_ms": _ms(m.get("compute_ns", 0.0)),
                "wait_ms": _ms(m.get("wait_ns", 0.0)),
                "recv_wait_ms": _ms(m.get("recv_wait_ns", 0.0)),
                "send_wait_ms": _ms(m.get("send_wait_ns", 0.0)),
                "transfer_ms": _ms(m.get("recv_transfer_ns", 0.0)),
            }
        )
    p = len(chain)
    last_in = pairs[(pairs["dst"] == chain[-1]) & (pairs["src"] == chain[-2])]
    micro = int(last_in.groupby("step").size().median()) if not last_in.empty else 0
    computes = pd.Series([s["compute_ms"] for s in stages])
    slow = int(computes.idxmax())
    others = computes.drop(slow)
    ratio = float(computes[slow] / others.median()) if others.median() > 0 else None
    median_all = float(computes.median())
    balanced = computes[slow] < UNBALANCED * median_all
    whatifs = [WhatIf("unchanged", "nothing changed")]
    if not balanced and computes[slow] > 0:
        factor = median_all / float(computes[slow])
        whatifs.append(
            WhatIf("stages_balanced", "slowest stage at the median stage's compute",
                   busy_scale=((chain[slow], factor),))
        )  # fmt: skip
    dfs = replay_all(steps, whatifs)
    sub = [d[d["rank"].isin(chain)] for d in dfs]
    step_ms = _ms(job_step(sub[0], "replayed_ns"))
    balanced_ms = _ms(job_step(sub[1], "replayed_ns")) if len(sub) > 1 else None
    formula = (p - 1) / (micro + p - 1) if micro else None
    formula_2m = (p - 1) / (2 * micro + p - 1) if micro else None
    mine = None if more is None else more[more["rank"].isin(chain)]
    return {
        "ranks": chain,
        "micro_batches": micro,
        "stages": stages,
        "slowest_stage": slow,
        "slowest_rank": chain[slow],
        "compute_ratio": None if ratio is None else round(ratio, 3),
        "balanced": bool(balanced),
        "step_ms": step_ms,
        "balanced_step_ms": balanced_ms,
        "bubble_formula": formula,
        "bubble_formula_2m": formula_2m,
        "micro_batches_2m_step_ms": (
            _ms(job_step(mine, "replayed_ns")) if mine is not None and not mine.empty else None
        ),
        "micro_batches_2m_formula_step_ms": (
            round(step_ms * (1 - formula) / (1 - formula_2m), 3)
            if formula is not None and formula_2m is not None
            else None
        ),
        "wait_share": (
            round(float(pd.Series([s["wait_ms"] for s in stages]).median()) / step_ms, 4)
            if step_ms
            else None
        ),
    }


def pipeline_sentence(p: dict) -> str:
    """The diagnosis's sentence for one pipeline of pipeline_section."""
    stages = p["stages"]
    slow = stages[p["slowest_stage"]]
    waits = [s for s in stages if s["stage"] != slow["stage"]]
    most = max(waits, key=lambda s: s["wait_ms"])
    n = len(stages)
    if not p["balanced"] and p["compute_ratio"]:
        other = f"stage {waits[0]['stage']}" if n == 2 else "the median other stage"
        fix = (
            f"; balancing the stages would take the step from {p['step_ms']:.0f} to "
            f"{p['balanced_step_ms']:.0f} ms"
            if p["balanced_step_ms"] is not None
            else ""
        )
        who = "which waits" if n == 2 else f"stage {most['stage']} (rank {most['rank']}) waits"
        return (
            f"Pipeline bubble: stage {slow['stage']} (rank {slow['rank']}) computes "
            f"{p['compute_ratio']:.1f}× as long as {other}, {who} {most['wait_ms']:.0f} ms "
            f"per step for it{fix}: move layers off stage {slow['stage']}."
        )
    formula = p["bubble_formula"]
    more = (
        f" ((p − 1)/(m + p − 1) = {100 * formula:.0f}% with {p['micro_batches']} "
        f"micro-batches, {100 * p['bubble_formula_2m']:.0f}% with twice as many)"
        if formula is not None
        else ""
    )
    replayed = p.get("micro_batches_2m_step_ms")
    shrink = (
        f"Twice as many micro-batches replay to a {replayed:.3g} ms step (from {p['step_ms']:.3g})."
        if replayed is not None and p.get("step_ms")
        else "More micro-batches per step shrink it."
    )
    return (
        f"Pipeline of {n} stages, balanced (compute within {100 * (UNBALANCED - 1):.0f}% of the "
        f"median stage); each stage waits up to {most['wait_ms']:.0f} ms per step for its "
        f"neighbours: the pipeline's bubble{more}. {shrink}"
    )


#: The parts of a stage's time in pipeline_timeline, in drawing order.
TIMELINE_PARTS = ("compute", "send", "receive", "waiting")


def pipeline_timeline(
    con: duckdb.DuckDBPyConnection, rid: int, step: int, ranks: list[int]
) -> pd.DataFrame:
    """One step of a pipeline along time: per stage (`ranks` in stage order, the report's
    `pipelines[i].ranks`), its compute and its matched sends and receives, each cut into its
    waiting for the neighbour (the bubble) and the rest. Columns stage, rank, part (one of
    TIMELINE_PARTS), peer (the other stage's rank for sends, receives and waiting; None for
    compute), start_ms, end_ms (ms after the step's earliest window start, aligned clock).

    compute: the rank's compute activities merged (the timeline's compute track); waiting: a
    receive before its send was issued, a send before its receive was posted (sql/p2p.sql);
    send, receive: the rest of each matched call. Calls of other pipelines are left out."""
    with run_session(con, rid, timeline.VIEW_TABLES):
        busy = timeline.tracks(con, rid, step, ranks)
        origin = timeline.step_origin(con, rid, step) or 0
        pairs = con.execute(
            "SELECT src, dst, send_ts, send_te, recv_ts, recv_te, send_wait_ns, recv_wait_ns "
            "FROM p2p_pairs(?) WHERE matched AND NOT size_mismatch AND step = ? "
            "AND list_contains(?, src) AND list_contains(?, dst)",
            [rid, step, ranks, ranks],
        ).df()
    stage = {r: i for i, r in enumerate(ranks)}
    comp = busy[busy["kind"] == "compute"]
    parts = [
        pd.DataFrame(
            {"rank": comp["rank"], "part": "compute", "peer": None,
             "start_ms": comp["start_ms"], "end_ms": comp["end_ms"]}
        )
    ]  # fmt: skip
    for rank, peer, ts, te, wait, part in (
        ("src", "dst", "send_ts", "send_te", "send_wait_ns", "send"),
        ("dst", "src", "recv_ts", "recv_te", "recv_wait_ns", "receive"),
    ):
        waited = pairs[ts] + pairs[wait]
        for a, b, name in ((pairs[ts], waited, "waiting"), (waited, pairs[te], part)):
            parts.append(
                pd.DataFrame(
                    {"rank": pairs[rank], "part": name, "peer": pairs[peer],
                     "start_ms": (a - origin) / NS_PER_MS, "end_ms": (b - origin) / NS_PER_MS}
                )
            )  # fmt: skip
    out = pd.concat([p for p in parts if not p.empty] or [parts[0]], ignore_index=True)
    out = out[out["rank"].isin(ranks) & (out["end_ms"] > out["start_ms"])].copy()
    out["rank"] = out["rank"].astype("int64")
    out.insert(0, "stage", out["rank"].map(stage).astype("int64"))
    order = {p: i for i, p in enumerate(TIMELINE_PARTS)}
    out["_o"] = out["part"].map(order)
    out = out.sort_values(["stage", "_o", "start_ms"], kind="stable").drop(columns="_o")
    return out.reset_index(drop=True)[["stage", "rank", "part", "peer", "start_ms", "end_ms"]]
