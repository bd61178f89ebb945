"""The one Python API over a store, for notebooks, the CLI and the dashboard alike.

import commwall
with commwall.Store("runs.duckdb") as store:
    run = store.run("dlrm")
    run.ranks(); run.steps(); run.activities(kind="comm"); run.report()

`Store(path)` opens a store file read-only; `Store.over(con)` wraps a connection the caller
opened (the dashboard's short-lived ones). Everything a front end shows of a run comes from a
`Run` method; none of them writes to the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pandas as pd

from commwall.analysis import db
from commwall.analysis.collectives import instances as collectives
from commwall.analysis.compare import diff
from commwall.analysis.fabric.baseline import fabric_baseline
from commwall.analysis.fabric.tables import runs_with_tables
from commwall.analysis.model.run_whatif import run_whatif
from commwall.analysis.model.scenario import Scenario
from commwall.analysis.model.section import run_scenario
from commwall.analysis.replay.engine import replay_section
from commwall.analysis.report.build import SECTION_TABLES, SECTIONS, build_report
from commwall.analysis.report.perfetto import merged_trace
from commwall.analysis.report.pipeline import pipeline_timeline
from commwall.analysis.report.postmortem import postmortem_data
from commwall.analysis.report.session import run_session
from commwall.analysis.report.shape import FabricBaseline, Report
from commwall.analysis.steps import overlap, timeline

#: The tables of matched collectives a run can be listed by (`Run.collective_table`).
COLLECTIVE_VIEWS: dict[str, Callable[[duckdb.DuckDBPyConnection, int], pd.DataFrame]] = {
    "instances": collectives.collective_instances,
    "ranks": collectives.collective_ranks,
    "ops": collectives.collective_ops,
    "clock": collectives.clock_offsets,
    "problems": collectives.collective_problems,
}


@dataclass
class Prepared:
    """A run's report with the tables and the model scenario a front end shows beside it, all
    computed in one analysis session (the matching, clock fit and step tables once). A table or
    the scenario whose computation failed is absent (`has_scenario` False for the scenario):
    the caller computes it on its own and meets the error there."""

    report: Report
    tables: dict[str, pd.DataFrame | None] = field(default_factory=dict)
    views: dict[str, pd.DataFrame] = field(default_factory=dict)
    scenario: Scenario | None = None
    has_scenario: bool = False
    #: Run.step_tracks of the views a timeline opens on and flips to first
    #: (timeline.prepared_views), keyed by (step, ranks as a tuple).
    tracks: dict[tuple[int, tuple[int, ...]], tuple[pd.DataFrame, pd.DataFrame]] = field(
        default_factory=dict
    )


class Run:
    """One run of a store."""

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        self.con = con
        self.name = name
        self.id = db.run_id(con, name)

    def _table(self, table: str, where: str = "", params: tuple = ()) -> pd.DataFrame:
        q = f"SELECT * EXCLUDE (run_id) FROM {table} WHERE run_id = ? {where}"
        return self.con.execute(q, [self.id, *params]).df()

    def ranks(self) -> pd.DataFrame:
        """One row per rank (host, device, GPU, world size, backend) with whole-trace metrics."""
        info = self._table("ranks", "ORDER BY rank")
        return info.merge(overlap.rank_overlap(self.con, self.id), on="rank", how="left")

    def steps(self) -> pd.DataFrame:
        """One row per (rank, step) with the step window and its metrics."""
        return overlap.step_overlap(self.con, self.id)

    def activities(self, kind: str | None = None, rank: int | None = None) -> pd.DataFrame:
        """Activities, optionally of one kind (compute, comm, memory, other) and one rank."""
        where, params = "", list[str | int]()
        if kind is not None:
            where += " AND kind = ?"
            params.append(kind)
        if rank is not None:
            where += " AND rank = ?"
            params.append(rank)
        return self._table("activities", where + " ORDER BY rank, ts", tuple(params))

    def collectives(self) -> pd.DataFrame:
        """Collective calls per rank, as ingested."""
        return self._table("collectives", "ORDER BY rank, ts")

    def decomposition(self) -> pd.DataFrame:
        """One row per (rank, step): the step window split into compute only, compute
        overlapped, exposed transfer, exposed wait, memory only and idle (ns; they add up)."""
        return self.con.execute("SELECT * FROM step_decomposition(?)", [self.id]).df()

    def whatif(self) -> pd.DataFrame:
        """The what-if replay of the measured run: one row per what-if (key, label, step_ms,
        saving_ms, saving_pct), largest saving first; empty when there is nothing to replay."""
        sec = replay_section(self.con, self.id)
        return pd.DataFrame(sec["whatifs"], columns=["key", "label", "step_ms", "saving_ms",
                                                     "saving_pct"])  # fmt: skip

    def diagnosis(self) -> dict:
        """The diagnosis (cause, culprits, fix and the paragraph) from the full report."""
        return dict(self.report()["diagnosis"] or {})

    def report(self, keep_going: bool = True, baseline: str | None = None) -> Report:
        """The full report (same dict as `commwall report --format json`); a section that
        fails is None and named in `analysis_errors` (`keep_going=False` raises instead).
        `baseline`: the run whose nccl-tests tables the `fabric` section compares with."""
        return build_report(self.con, self.name, keep_going=keep_going, baseline=baseline)

    def prepared(self, tables: Sequence[str] = (), views: Sequence[str] = ()) -> Prepared:
        """The report, the run tables `tables` (names of accessors such as "rank_step_wait"),
        the collective tables `views` (keys of COLLECTIVE_VIEWS), the model scenario and the
        timeline's first views (timeline.prepared_views), in one analysis session: what a
        dashboard needs for every page of a run, for little more than the cost of the report
        (each computed on its own would match collectives and fit clocks again)."""
        with run_session(self.con, self.id):
            out = Prepared(report=self.report())
            for name in tables:
                try:
                    out.tables[name] = getattr(self, name)()
                except Exception:  # noqa: BLE001  (left to the caller, which shows the error)
                    continue
            for view in views:
                try:
                    out.views[view] = self.collective_table(view)
                except Exception:  # noqa: BLE001
                    continue
            try:
                out.scenario, out.has_scenario = self.scenario(), True
            except Exception:  # noqa: BLE001
                pass
            for step, ranks in timeline.prepared_views(out.report):
                try:
                    out.tracks[(step, tuple(ranks))] = self.step_tracks(step, ranks)
                except Exception:  # noqa: BLE001
                    break
        return out

    def keep(self) -> list[str]:
        """Compute the run's analysis tables (analysis/report/session.py) and its report now and
        keep them beside the store (analysis/report/run_cache.py, analysis/report/cache.py), so
        that its next report reads them. Returns the tables computed (or read back, when they
        were kept already)."""
        with run_session(self.con, self.id, keep=True) as cached:
            build_report(self.con, self.name, keep=True)
            return list(cached)

    def fabric(self, nodes: int | None = None, link_peak: Any = None) -> dict[str, Any]:
        """The run's nccl-tests tables beside the fabric model (analysis/fabric/section.py):
        `nodes` for tables whose nodes are not known, `link_peak` a model.hardware link."""
        from commwall.analysis.fabric.section import fabric_json  # noqa: PLC0415

        return fabric_json(self.con, self.id, nodes, link_peak)

    def fabric_section(self, baseline: str | None = None) -> FabricBaseline:
        """The report's `fabric` section against the nccl-tests tables of run `baseline` of
        the same store (default: the run's own; RunNotFound when there is no such run)."""
        base = None if baseline in (None, self.name) else db.run_id(self.con, str(baseline))
        with run_session(self.con, self.id, SECTION_TABLES["fabric"]):
            return fabric_baseline(self.con, self.id, base)

    def section(self, key: str) -> Any:
        """One section of the report (a key of analysis.report.build.SECTIONS) on its own, e.g.
        "hang", "nccl", "replay"; KeyError for a key that is not a section."""
        if key not in SECTIONS:
            raise KeyError(f"no report section {key!r} (sections: {', '.join(SECTIONS)})")
        names = SECTION_TABLES.get(key)
        if not names:
            return SECTIONS[key](self.con, self.id)
        with run_session(self.con, self.id, names):
            return SECTIONS[key](self.con, self.id)

    def collective_table(self, view: str = "instances") -> pd.DataFrame:
        """Matched collectives listed by `view` (a key of COLLECTIVE_VIEWS): one row per
        instance, per (instance, rank), per op, the clock offset per host, or the instances
        that did not match cleanly."""
        return COLLECTIVE_VIEWS[view](self.con, self.id)

    def _macro(self, name: str) -> pd.DataFrame | None:
        """All rows of table macro `name` for this run; None when the store predates the
        tables the macro reads (its module was not loaded: analysis/db.py)."""
        try:
            return self.con.execute(f"SELECT * FROM {name}(?)", [self.id]).df()
        except duckdb.CatalogException:
            if not db.has_macro(self.con, name):
                return None
            raise

    def rank_step_wait(self) -> pd.DataFrame | None:
        """Per (rank, step): the time the rank waited in collectives and the time it made the
        others wait (analysis/sql/stragglers.sql)."""
        return self._macro("rank_step_wait")

    def nccl_algorithm_choices(self) -> pd.DataFrame | None:
        """What NCCL chose per op and size, from the run's NCCL logs (sql/nccl_*.sql)."""
        return self._macro("nccl_algorithm_choices")

    def collective_algorithms(self) -> pd.DataFrame | None:
        """Algorithm and protocol per collective, where the traces name them."""
        return self._macro("collective_algorithms")

    def nccl_ring_orders(self) -> pd.DataFrame | None:
        """NCCL's rings: the rank order of each channel, from the logs."""
        return self._macro("nccl_ring_orders")

    def nccl_tree_edges(self) -> pd.DataFrame | None:
        """NCCL's trees: parent and children of each rank per channel, from the logs."""
        return self._macro("nccl_tree_edges")

    def scenario(self) -> Scenario | None:
        """The run as a calibrated model scenario for what-ifs; None when it cannot be."""
        return run_scenario(self.con, self.id)

    def model_whatif(self, knobs: dict[str, float], link_peak: Any = None) -> dict:
        """The calibrated model's what-if of this run with `knobs` changed
        (analysis.model.run_whatif)."""
        return run_whatif(self.con, self.id, knobs, link_peak)

    def step_tracks(self, step: int, ranks: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Busy tracks and collective calls of `ranks` in `step`, relative to its start."""
        return timeline.view(self.con, self.id, step, ranks)

    def pipeline_timeline(self, step: int, ranks: list[int]) -> pd.DataFrame:
        """One pipeline's stages (`ranks` in stage order) along `step`: compute, sends,
        receives and waiting (analysis/report/pipeline.py pipeline_timeline)."""
        return pipeline_timeline(self.con, self.id, step, ranks)

    def windows(self, n: int) -> list[tuple[int, int]]:
        """The run's span cut in `n` windows (start, end ns); empty without activity."""
        return timeline.windows(self.con, self.id, n)

    def window_tracks(self, t0: int, t1: int, ranks: list[int]) -> pd.DataFrame:
        """Busy tracks of `ranks` between `t0` and `t1` (ns)."""
        return timeline.window_tracks(self.con, self.id, t0, t1, ranks)

    def postmortem_data(
        self, baseline: str | None = None, fabric_baseline: str | None = None
    ) -> dict[str, Any]:
        """What the post-mortem document of this run shows (analysis.postmortem), against run
        `baseline` of the same store when given; its fabric section priced from the nccl-tests
        tables of run `fabric_baseline` when given."""
        return postmortem_data(self.con, self.name, baseline, fabric_baseline)

    def facts(self, report: Mapping[str, Any] | None = None) -> diff.RunFacts:
        """What a diff needs of this run (its report, built unless given, and per-run
        tables)."""
        return diff.run_facts(self.con, self.name, report)

    def perfetto(self) -> dict:
        """Every rank's timeline merged into one Chrome/Perfetto trace on aligned clocks."""
        return merged_trace(self.con, self.name)


class Store:
    """A commwall database opened read-only for analysis (FileNotFoundError when `path` does
    not exist); a context manager that closes it."""

    def __init__(self, path: str | Path) -> None:
        self.con = db.open_db(path)

    @classmethod
    def over(cls, con: duckdb.DuckDBPyConnection) -> Store:
        """A facade over a connection the caller opened, with the analysis macros loaded
        (db.open_db, db.load_modules), and will close."""
        self = cls.__new__(cls)
        self.con = con
        return self

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def fabric_runs(self) -> list[str]:
        """Names of the runs holding nccl-tests tables (what `Run.fabric_section` and
        `Run.report` can take as the baseline)."""
        return runs_with_tables(self.con)

    def runs(self) -> pd.DataFrame:
        """Runs with file counts, ranks and formats."""
        return runs_table(self.con)

    def run(self, name: str) -> Run:
        """The run named `name`."""
        return Run(self.con, name)

    def diff(self, *names: str) -> dict[str, pd.DataFrame]:
        """Runs side by side against the first (the baseline): tables `step_time` (judged
        against noise), `summary`, `diagnosis`, `decomposition`, `collectives`, `stragglers`,
        `straggler_verdicts`, `nccl`, `model`, `step_samples` (analysis/compare/diff.py)."""
        return diff.diff(self.con, list(names))

    def close(self) -> None:
        """Close the connection."""
        self.con.close()


def runs_table(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Runs with their file counts, ranks, formats and creation time."""
    return con.execute(
        """
        SELECT r.name AS run, count(DISTINCT f.file_id) AS files,
            (SELECT count(DISTINCT k.rank) FROM ranks k WHERE k.run_id = r.run_id) AS ranks,
            string_agg(DISTINCT f.format, ',' ORDER BY f.format) AS formats,
            CAST(coalesce(sum(f.size_bytes), 0) AS BIGINT) AS bytes, r.created_at, r.notes
        FROM runs r LEFT JOIN files f USING (run_id)
        GROUP BY r.run_id, r.name, r.created_at, r.notes
        ORDER BY r.created_at, r.name
        """
    ).df()
