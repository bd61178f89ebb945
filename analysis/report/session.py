"""A run's analysis session: the heavy intermediate tables of one run computed once.

Every macro of analysis/sql stays callable on its own with the same answer. Many of them start
from the same few (the matching of collectives, the clock fit, the per-(instance, rank) rows,
the step windows and overlaps), so a report that calls a dozen macros would otherwise redo the
matching and the clock fit about nine times. Inside `run_session(con, rid)`, each macro of
CACHED (analysis/dispatch.py), in that order (later ones read the earlier ones), is computed
once for run `rid` into a TEMP table of the connection (nothing is written to the store), and
the run is added to the macro's list of cached runs, so that its dispatch reads the table for
that run and computes any other run as before. No macro is redefined.

The macros of FROM_SWEEP (the per-step and per-rank interval figures) are not computed by their
own sweeps but from the one sweep of analysis/steps/sweep.py, through the same `_<name>_from` macro
that finishes their SQL definition; when the sweep does not apply (overlapping step windows) or
fails, they are computed by their macros.

A session of all of CACHED whose tables took long enough to compute writes them to the run
cache next to the store (analysis/report/run_cache.py), and a later session of the same run, in any
process, reads them back instead of computing them (those the cache does not keep,
run_cache.RECOMPUTED, are computed from the tables read), while the run's rows and the code
are those they were computed from.

On exit the run is taken off the lists and the tables are dropped. Sessions nest: a session of
a run that is already cached does nothing, and sessions of different runs on one connection
each add their run. A macro that cannot be computed for the run (a store without the table it
reads, bad data) is left uncached, so its section fails or degrades exactly as it would without
a session. The cache is valid while the run's rows do not change: hold a session only as long
as the store is read (one report, one view of a run).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import duckdb

from commwall.analysis.db import defined_macros
from commwall.analysis.dispatch import CACHED, table, variable
from commwall.analysis.report import run_cache
from commwall.analysis.steps.sweep import sweep

__all__ = ["CACHED", "run_session"]

_PARTS = (
    "compute_only_ns, compute_overlapped_ns, exposed_transfer_ns, exposed_wait_ns,"
    " memory_only_ns, parts_busy_ns AS busy_ns"
)
#: Cached macros computed from the sweep's tables ({steps}, {ranks}; analysis/steps/sweep.py).
FROM_SWEEP = {
    "operator_compute": "WITH c AS (SELECT rank, step, op_compute_ns AS compute_ns FROM {steps})"
    " SELECT * FROM _operator_compute_from(c, {rid})",
    "step_overlap": "SELECT * FROM _step_overlap_from({steps}, {rid})",
    "rank_overlap": "SELECT * FROM _rank_overlap_from({ranks}, {rid})",
    "step_decomposition": f"WITH p AS (SELECT rank, step, {_PARTS} FROM {{steps}})"
    " SELECT * FROM _step_decomposition_from(p, {rid})",
    "rank_decomposition": f"WITH p AS (SELECT rank, span_ns, {_PARTS} FROM {{ranks}})"
    " SELECT * FROM _rank_decomposition_from(p)",
}


def _cached_runs(con: duckdb.DuckDBPyConnection) -> dict[str, list[int]]:
    """Macro name → the runs whose rows of it are cached on this connection (one look)."""
    names = {variable(n): n for n in CACHED}
    rows = con.execute(
        "SELECT name, CAST(value AS BIGINT[]) FROM duckdb_variables() WHERE list_contains(?, name)",
        [list(names)],
    ).fetchall()
    return {names[v]: sorted(runs or []) for v, runs in rows}


def _set_runs(con: duckdb.DuckDBPyConnection, name: str, runs: list[int]) -> None:
    """Make `runs` the runs whose `name` the macro's dispatch reads from their tables."""
    if runs:
        ids = ", ".join(str(int(r)) for r in runs)
        con.execute(f"SET VARIABLE {variable(name)} = [{ids}]::BIGINT[]")
    else:
        con.execute(f"RESET VARIABLE {variable(name)}")


@contextmanager
def run_session(
    con: duckdb.DuckDBPyConnection, rid: int, names: Sequence[str] = CACHED, keep: bool = False
) -> Iterator[list[str]]:
    """Cache the intermediate tables of run `rid` on `con` for the duration of the block
    (those of CACHED that are in `names`: a view that reads a few of them caches only those);
    yields the names of the macros cached by this session (empty when an enclosing session
    already caches the run). `keep`: write them to the run cache however quickly they were
    computed (a session of all of CACHED writes them when they took long enough)."""
    rid = int(rid)
    mine: list[str] = []
    swept: dict[str, str] | None = None
    # a session nested in one that caches the run already (a Timeline view inside a report's
    # preparation) looks at nothing more than which runs are cached
    cached = _cached_runs(con)
    wanted = [n for n in CACHED if n in names and rid not in cached.get(n, [])]
    try:
        defined = defined_macros(con, wanted) if wanted else set()
        todo = [n for n in wanted if n in defined]
        read, fp = run_cache.load(con, rid, todo) if todo else ([], "")
        for name in read:  # the tables an earlier process computed for these very rows
            mine.append(name)
            _set_runs(con, name, sorted({*cached.get(name, []), rid}))
        started = time.perf_counter()
        # an entry read back lacks the tables it does not keep (run_cache.RECOMPUTED): those
        # are computed from the tables read, as any table an entry lacks
        for name in (n for n in todo if n not in read):
            name_table = table(name, rid)
            query = f"SELECT * FROM {name}({rid})"
            if name in FROM_SWEEP:
                if swept is None:
                    swept = _sweep_tables(con, rid)
                if swept:
                    query = FROM_SWEEP[name].format(rid=rid, **swept)
            try:
                con.execute(f"CREATE TEMP TABLE {name_table} AS {query}")
            except duckdb.Error:
                con.execute(f"DROP TABLE IF EXISTS temp.{name_table}")
                continue
            mine.append(name)
            _set_runs(con, name, sorted({*cached.get(name, []), rid}))
        if not read and mine and set(CACHED) <= set(names):  # a whole run's tables: keep them
            spent = float("inf") if keep else time.perf_counter() - started
            run_cache.save(con, rid, mine, fp, spent)
        yield list(mine)
    finally:
        after = _cached_runs(con) if mine else {}
        for name in reversed(mine):
            _set_runs(con, name, [r for r in after.get(name, []) if r != rid])
            con.execute(f"DROP TABLE IF EXISTS temp.{table(name, rid)}")
        for swept_table in (swept or {}).values():
            con.execute(f"DROP TABLE IF EXISTS temp.{swept_table}")


def _sweep_tables(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, str]:
    """The sweep of run `rid` (analysis/steps/sweep.py) as TEMP tables: {'steps': name, 'ranks':
    name}; empty when it does not apply or fails (the macros then compute their own)."""
    try:
        result = sweep(con, rid)
    except duckdb.Error:
        return {}
    if result is None:
        return {}
    names = {"steps": table("sweep_steps", rid), "ranks": table("sweep_ranks", rid)}
    for key, name in names.items():
        view = f"{name}_arrow"
        con.register(view, getattr(result, key))
        try:
            con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM {view}")
        finally:
            con.unregister(view)
    return names
