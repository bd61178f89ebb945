"""The run report: one dict whose keys are a public interface (add keys, never rename).

Sections are built by functions `(con, rid) -> JSON-able value`, listed in SECTIONS; later
capabilities add their section there.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import duckdb
import pandas as pd

from commwall.analysis import db
from commwall.analysis.collectives.instances import collectives_section
from commwall.analysis.collectives.stragglers import stragglers_section
from commwall.analysis.db import run_id
from commwall.analysis.fabric.baseline import fabric_baseline
from commwall.analysis.hangs.section import hang_section
from commwall.analysis.hangs.stopped import model_in_context, stragglers_in_context
from commwall.analysis.inspector.section import inspector_section
from commwall.analysis.model.section import model_section
from commwall.analysis.nccl.section import has_nccl_tables, nccl_section
from commwall.analysis.replay.engine import replay_section
from commwall.analysis.report import cache as report_cache
from commwall.analysis.report.checklist import evaluate as checklist
from commwall.analysis.report.diagnosis import diagnose
from commwall.analysis.report.pipeline import pipeline_section
from commwall.analysis.report.session import CACHED, run_session
from commwall.analysis.report.shape import Report, RunInfo
from commwall.analysis.steps.dimension import dimensions_section
from commwall.analysis.steps.overlap import rank_overlap, step_overlap
from commwall.analysis.steps.summary import decomposition_section, json_value, summary_section
from commwall.analysis.units import NS_PER_MS

_log = logging.getLogger("commwall.report")

_RANK_COLS = {
    "rank": "rank",
    "tau_comp_ms": "compute_ns",
    "tau_comm_ms": "comm_ns",
    "overlap_ms": "both_ns",
    "eta": "eta",
    "gamma": "gamma",
    "exposed_comm_ms": "exposed_comm_ns",
    "idle_ms": "idle_ns",
    "comm_overlap_fraction": "comm_overlap_fraction",
    "span_ms": "span_ns",
}
_STEP_COLS = {"rank": "rank", "step": "step", "step_ms": "span_ns", **_RANK_COLS}
del _STEP_COLS["span_ms"]


def _records(df: pd.DataFrame, cols: dict[str, str]) -> list[dict]:
    out = []
    for row in df.to_dict("records"):
        rec = {}
        for key, col in cols.items():
            v = json_value(row[col])
            rec[key] = v / NS_PER_MS if key.endswith("_ms") and v is not None else v
        out.append(rec)
    return out


def ranks_section(con: duckdb.DuckDBPyConnection, rid: int) -> list[dict]:
    """Whole-trace metrics per rank."""
    return _records(rank_overlap(con, rid), _RANK_COLS)


def steps_section(con: duckdb.DuckDBPyConnection, rid: int) -> list[dict]:
    """Metrics per (rank, step)."""
    return _records(step_overlap(con, rid), _STEP_COLS)


def run_section(con: duckdb.DuckDBPyConnection, rid: int) -> RunInfo:
    """What the run is made of: files per format, ranks, world size, devices, time bases."""
    files = con.execute(
        "SELECT format, count(*) FROM files WHERE run_id = ? GROUP BY format ORDER BY format",
        [rid],
    ).fetchall()
    r = db.row(
        con,
        "SELECT count(*), max(world_size), list(DISTINCT gpu_name) FILTER (gpu_name IS NOT NULL),"
        " list(DISTINCT backend) FILTER (backend IS NOT NULL),"
        " list(DISTINCT time_base) FILTER (time_base IS NOT NULL),"
        " list(DISTINCT host) FILTER (host IS NOT NULL) FROM ranks WHERE run_id = ?",
        [rid],
    )
    n_steps = db.scalar(con, "SELECT count(DISTINCT step) FROM steps WHERE run_id = ?", [rid])
    n_dump_ranks = db.scalar(
        con, "SELECT count(DISTINCT rank) FROM fr_dumps WHERE run_id = ?", [rid]
    )
    # the job's size as NCCL's logs state it (the communicators' nranks): a run of logs alone
    # has no traced rank to count
    log_world = (
        db.scalar(con, "SELECT max(nranks) FROM nccl_communicators WHERE run_id = ?", [rid])
        if has_nccl_tables(con)
        else None
    )
    on_gpu, any_act = db.row(
        con,
        "SELECT bool_or(cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')), count(*) > 0 FROM"
        " (SELECT cat FROM activities WHERE run_id = ? ORDER BY (cat = 'kernel') DESC LIMIT 1)",
        [rid],
    )
    return {
        "files": {f: n for f, n in files},
        "n_ranks": r[0],
        "world_size": r[1],
        "gpus": sorted(r[2] or []),
        "device_kind": ("gpu" if on_gpu else "cpu") if any_act else None,
        "backends": sorted(r[3] or []),
        "time_bases": sorted(r[4] or []),
        "hosts": sorted(r[5] or []),
        "n_steps": n_steps,
        "n_dump_ranks": n_dump_ranks,
        "nccl_world_size": log_world,
        "capture": capture_summary(con, rid),
    }


def capture_summary(con: duckdb.DuckDBPyConnection, rid: int) -> str | None:
    """The checks of a `commwall capture` run directory as stored at ingest ('complete: ...'
    or 'incomplete: traces from 6 of 8 ranks; ...'); None for a run not captured so."""
    if not db.has_table(con, "capture_runs"):
        return None
    return db.scalar(con, "SELECT any_value(summary) FROM capture_runs WHERE run_id = ?", [rid])


#: Report sections in output order: key → builder(con, rid).
SECTIONS: dict[str, Callable[[duckdb.DuckDBPyConnection, int], Any]] = {
    "run_info": run_section,
    "summary": summary_section,
    "ranks": ranks_section,
    "steps": steps_section,
    "decomposition": decomposition_section,
    "dimensions": dimensions_section,
    "stragglers": stragglers_section,
    "replay": replay_section,
    "pipeline": pipeline_section,
    "collectives": collectives_section,
    "nccl": nccl_section,
    "model": model_section,
    "fabric": fabric_baseline,
    "hang": hang_section,
    "inspector": inspector_section,
}


#: The cached tables (analysis/report/session.py) of the sections that read collectives matched
#: across ranks: the matching, the clock fit, the per-instance figures, the step windows and
#: the straggler levels; not the sweep and the tables read from it.
MATCHED_TABLES = (*CACHED[: CACHED.index("step_windows") + 1], "_straggler_levels")
#: What a section computed on its own (`Run.section`: `commwall whatif`, …) caches in an
#: analysis session of its own. Without one, every macro it reads redoes the matching and the
#: clock fit (the replay of a 1,024-rank run: 24.2 s alone, 6.3 s in the session;
#: benchmarks/paths_scale.py); with all of CACHED a small run pays for tables (the sweep) the
#: section never reads. A
#: section not listed reads only its own tables (run metadata, NCCL logs, Flight Recorder
#: dumps) and runs without a session.
SECTION_TABLES: dict[str, tuple[str, ...]] = {
    "summary": CACHED,
    "ranks": CACHED,
    "steps": CACHED,
    "decomposition": CACHED,
    "dimensions": CACHED,
    "model": CACHED,
    "replay": MATCHED_TABLES,
    "pipeline": MATCHED_TABLES,
    "stragglers": MATCHED_TABLES,
    "collectives": MATCHED_TABLES,
    "fabric": MATCHED_TABLES,
}

#: Sections derived from the others: key → function(report so far), in order. `stragglers`
#: and `model` are built above and then read again in context: when the job stopped inside
#: the traces, the stragglers get a caveat and the measured verdict is withheld
#: (analysis/hangs/stopped.py), before the diagnosis and the checklist read them.
DERIVED: dict[str, Callable[[dict], Any]] = {
    "stragglers": stragglers_in_context,
    "model": model_in_context,
    "diagnosis": diagnose,
    "checklist": checklist,
}


def build_report(
    con: duckdb.DuckDBPyConnection,
    run: str,
    keep_going: bool = True,
    keep: bool = False,
    baseline: str | None = None,
) -> Report:
    """The full report of run `run`. A section whose builder raises is None, `analysis_errors`
    (present only then) maps its key to the error in words, and the failure is logged with its
    traceback (logger `commwall.report`), so that one failing section never hides the others:
    the CLI, the API, the dashboard and the export all get the rest. `keep_going=False` (tests)
    raises instead. The sections run inside the run's analysis session (analysis/report/session.py):
    the intermediate tables they share are computed once. A report that took long to build is
    kept beside the store and read back by later reports of the unchanged run
    (analysis/report/cache.py); `keep=True` keeps it however quickly it was built. `baseline`:
    the run whose nccl-tests tables the `fabric` section compares with (default: the run's own;
    RunNotFound when there is no such run)."""
    rid = run_id(con, run)
    base = None if baseline in (None, run) else run_id(con, baseline)
    kept, fp = report_cache.load(con, rid, base)
    if kept is not None:
        return cast(Report, kept)
    started = time.perf_counter()
    report: dict[str, Any] = {"run": run}
    errors: dict[str, str] = {}
    sections = SECTIONS
    if base is not None:  # the fabric section against the baseline run's tables
        sections = SECTIONS | {"fabric": partial(fabric_baseline, baseline_rid=base)}
    steps: list[tuple[str, Callable[[], Any]]] = [
        *((k, partial(build, con, rid)) for k, build in sections.items()),
        *((k, partial(derive, report)) for k, derive in DERIVED.items()),
    ]
    with run_session(con, rid):  # the matching, clock fit, step tables: once per report
        for key, make in steps:
            try:
                report[key] = make()
            except Exception as e:
                if not keep_going:
                    raise
                report[key] = None
                errors[key] = f"{type(e).__name__}: {e}"
                _log.error(
                    "run %r: section %r not available: %s", run, key, errors[key], exc_info=e
                )
    if errors:
        report["analysis_errors"] = errors
    spent = math.inf if keep else time.perf_counter() - started
    report_cache.save(con, rid, report, spent, fp, base)
    return cast(Report, report)
