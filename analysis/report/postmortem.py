"""What the post-mortem document shows beyond the report: figures computed here, drawn and
formatted by dashboard/export.py. Every part that cannot be had is the string
"not available: reason" instead, so that a document is always written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import duckdb
import pandas as pd

from commwall.analysis.compare.diff import decomposition_records, diff_tables, run_facts
from commwall.analysis.db import run_id
from commwall.analysis.model import whatif
from commwall.analysis.model.section import run_scenario
from commwall.analysis.report.build import build_report
from commwall.analysis.report.session import run_session
from commwall.analysis.steps import timeline
from commwall.analysis.units import NS_PER_MS

#: Model what-ifs ranked when the report has no `replay` (label → knob changes, as factors of
#: the run's value or absolute values).
WHATIFS: dict[str, tuple[str, str, float]] = {
    "2× link bandwidth": ("link_Bps", "times", 2.0),
    "perfect overlap (η = 1)": ("eta", "set", 1.0),
    "2× gradient compression": ("compression", "times", 2.0),
}


def _guard(build: Callable[[], Any]) -> Any:
    try:
        return build()
    except ValueError as e:  # a figure this run cannot have, in words
        return f"not available: {e}"
    except Exception as e:  # one figure failing must not cost the document
        return f"not available: {type(e).__name__}: {e}"


def decomposition_table(report: Mapping[str, Any]) -> pd.DataFrame:
    """Mean per step (ms) of each part of the step, per rank: rank, part, ms."""
    recs, parts = decomposition_records(report)
    if not recs:
        raise ValueError("the run has no steps")
    df = pd.DataFrame(recs)
    means = df.groupby("rank")[parts].mean().reset_index()
    return means.melt(id_vars="rank", var_name="part", value_name="ms")


def collective_sizes(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """Per (op, message size): instances, median transfer (ms) and bus bandwidth (GB/s)."""
    df = con.execute("SELECT * FROM collective_sizes(?)", [rid]).df()
    df["transfer_ms"] = df.pop("transfer_ns_median") / NS_PER_MS
    return df.rename(columns={"busbw_GBps_median": "busbw_GBps"})


def median_step(con: duckdb.DuckDBPyConnection, rid: int) -> int:
    """The step whose time (slowest rank) is the median of the run's steps."""
    steps = con.execute("SELECT step, step_ns FROM step_times(?)", [rid]).df()
    if steps.empty:
        raise ValueError("the run has no steps")
    steps = steps.sort_values(["step_ns", "step"]).reset_index(drop=True)
    return int(steps.loc[(len(steps) - 1) // 2, "step"])


def step_timeline(
    con: duckdb.DuckDBPyConnection, rid: int, report: Mapping[str, Any] | None = None
) -> dict:
    """The median step on the aligned clock: step, ranks (those drawn: every rank, or with
    `report` the ranks a timeline opens on, timeline.default_ranks: the stragglers first, then
    the lowest), n_ranks, tracks (rank, kind, start_ms, end_ms) and collectives (rank, op,
    instance, wait_ms, start_ms, end_ms), times from the step's start."""
    step = median_step(con, rid)
    every = [r for (r,) in con.execute("SELECT DISTINCT rank FROM ranks WHERE run_id = ? "
                                       "ORDER BY rank", [rid]).fetchall()]  # fmt: skip
    ranks = every if report is None else timeline.default_ranks(report)
    tracks, collectives = timeline.view(con, rid, step, ranks)
    return {"step": step, "ranks": ranks, "n_ranks": len(every), "tracks": tracks,
            "collectives": collectives}  # fmt: skip


def whatif_ranking(
    con: duckdb.DuckDBPyConnection, rid: int, report: Mapping[str, Any]
) -> pd.DataFrame:
    """What-ifs ranked by predicted step time (ms, best first; what_if, step_ms, saving_pct):
    the replay's when the report has one (`replay.whatifs`, replayed on the measured
    timeline), else the α-β model's scenarios of WHATIFS."""
    replay = report.get("replay") or {}
    ranked = replay.get("whatifs")
    if replay.get("available") and isinstance(ranked, list) and ranked:
        rows = [{"what_if": r.get("label") or r.get("key"), "step_ms": r.get("step_ms"),
                 "saving_pct": r.get("saving_pct")} for r in ranked]  # fmt: skip
        measured = {"what_if": "as measured", "step_ms": replay.get("measured_step_ms"),
                    "saving_pct": 0.0}  # fmt: skip
        return pd.DataFrame([measured, *rows]).sort_values("step_ms", kind="stable")
    s = run_scenario(con, rid)
    if s is None:
        raise ValueError("the model is not calibrated on this run")
    idle = ((report.get("model") or {}).get("measured") or {}).get("idle_ms") or 0.0
    base = whatif.predicted(s, idle)["step_ms"]
    rows = [{"what_if": "as measured (model)", "step_ms": base, "saving_pct": 0.0}]
    for label, (knob, how, v) in WHATIFS.items():
        if knob in whatif.NEED_LINK and not whatif.link_fitted(s):
            continue  # unknown, not "no saving": the export says why (export.model_note)
        value = whatif.knob_value(s, knob) * v if how == "times" else v
        step = whatif.predicted(whatif.with_knobs(s, {knob: value}), idle)["step_ms"]
        rows.append({"what_if": label, "step_ms": step, "saving_pct": 100 * (1 - step / base)})
    return pd.DataFrame(rows).sort_values("step_ms", kind="stable").reset_index(drop=True)


def postmortem_data(
    con: duckdb.DuckDBPyConnection,
    run: str,
    baseline: str | None = None,
    fabric_baseline: str | None = None,
) -> dict[str, Any]:
    """Everything the document of run `run` shows: `report`, `decomposition`, `sizes`,
    `timeline`, `whatifs` and, with a `baseline` run, `diff` (analysis/compare/diff.py tables,
    baseline first). `fabric_baseline`: the run whose nccl-tests tables the report's `fabric`
    section compares with (default: the run's own). Parts that fail are "not available: ..."
    strings."""
    rid = run_id(con, run)
    with run_session(con, rid):  # the report and every table below read one matching
        report = build_report(con, run, keep_going=True, baseline=fabric_baseline)
        data: dict[str, Any] = {"report": report, "baseline": baseline}
        data["decomposition"] = _guard(lambda: decomposition_table(report))
        data["sizes"] = _guard(lambda: collective_sizes(con, rid))
        data["timeline"] = _guard(lambda: step_timeline(con, rid, report))
        data["whatifs"] = _guard(lambda: whatif_ranking(con, rid, report))
        if baseline is not None:
            data["diff"] = diff_tables([run_facts(con, baseline), run_facts(con, run, report)])
    return data
