"""A small Python API over a store, for notebooks, the CLI and the dashboard alike.

from analysis.api import Store
run = Store("runs.duckdb").run("dlrm")
run.ranks(); run.steps(); run.activities(kind="comm"); run.report()
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from analysis import db, diff, overlap
from analysis.replay import replay_section
from analysis.report import build_report


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
        return self.report()["diagnosis"]

    def report(self) -> dict:
        """The full report (same dict as `commwall report --format json`)."""
        return build_report(self.con, self.name)


class Store:
    """A commwall database opened read-only for analysis."""

    def __init__(self, path: str | Path) -> None:
        self.con = db.open_db(path)

    def runs(self) -> pd.DataFrame:
        """Runs with file counts, ranks and formats."""
        return runs_table(self.con)

    def run(self, name: str) -> Run:
        """The run named `name`."""
        return Run(self.con, name)

    def diff(self, *names: str) -> dict[str, pd.DataFrame]:
        """Runs side by side against the first (the baseline): tables `step_time` (judged
        against noise), `summary`, `diagnosis`, `decomposition`, `collectives`, `stragglers`,
        `straggler_verdicts`, `nccl`, `model`, `step_samples` (analysis/diff.py)."""
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
            sum(f.size_bytes) AS bytes, r.created_at, r.notes
        FROM runs r LEFT JOIN files f USING (run_id)
        GROUP BY r.run_id, r.name, r.created_at, r.notes
        ORDER BY r.created_at, r.name
        """
    ).df()
