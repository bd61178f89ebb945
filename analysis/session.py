"""A run's analysis session: the heavy intermediate tables of one run computed once.

Every macro of analysis/sql stays callable on its own with the same answer. Many of them start
from the same few (the matching of collectives, the clock fit, the per-(instance, rank) rows,
the step windows and overlaps), so a report that calls a dozen macros would otherwise redo the
matching and the clock fit about nine times. Inside `run_session(con, rid)`:

* each macro of CACHED, in that order (later ones read the earlier ones), is computed once for
  run `rid` into a TEMP table of the connection (nothing is written to the store), and
* the macro is redefined as a dispatch: the cached table for a cached run, the original
  definition (kept as `_uncached_<name>`) for any other run. The run id of a call is a constant
  or a bound parameter, so DuckDB's planner prunes the branch that is not taken.

The macros of FROM_SWEEP (the per-step and per-rank interval figures) are not computed by their
own sweeps but from the one sweep of analysis/sweep.py, through the same `_<name>_from` macro
that finishes their SQL definition; when the sweep does not apply (overlapping step windows) or
fails, they are computed by their macros.

On exit the tables are dropped and the macros restored. Sessions nest: a session of a run that
is already cached does nothing, and sessions of different runs on one connection each add their
branch. A macro that cannot be computed for the run (a store without the table it reads, bad
data) is left uncached, so its section fails or degrades exactly as it would without a session.
The cache is valid while the run's rows do not change: hold a session only as long as the
store is read (one report, one view of a run).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import duckdb

from analysis.db import defined_macros, sql_modules
from analysis.sweep import sweep

#: The macros computed once per run, in dependency order (each reads only earlier ones).
CACHED = (
    "_match_rows",
    "clock_offsets",
    "_aligned_calls",
    "_instances",
    "collective_ranks",
    "collective_instances",
    "step_windows",
    "operator_compute",
    "step_overlap",
    "rank_overlap",
    "step_decomposition",
    "rank_decomposition",
    "run_summary",
    "_straggler_levels",
)

_PREFIX = "_session_"

_PARTS = (
    "compute_only_ns, compute_overlapped_ns, exposed_transfer_ns, exposed_wait_ns,"
    " memory_only_ns, parts_busy_ns AS busy_ns"
)
#: Cached macros computed from the sweep's tables ({steps}, {ranks}; analysis/sweep.py).
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


def _definition(name: str) -> str:
    """The original `CREATE OR REPLACE TEMP MACRO name(rid) AS TABLE ...;` statement of `name`,
    from the analysis/sql module that defines it."""
    head = re.compile(rf"^CREATE OR REPLACE TEMP MACRO {re.escape(name)}\(rid\) AS TABLE$", re.M)
    for text in sql_modules().values():
        m = head.search(text)
        if m:
            end = re.compile(r";\s*$", re.M).search(text, m.end())
            if end is None:
                break
            return text[m.start() : end.end()]
    raise KeyError(f"analysis/sql: no table macro {name}(rid)")


def _table(name: str, rid: int) -> str:
    return f"{_PREFIX}{name.lstrip('_')}_r{rid}"


def _cached_runs(con: duckdb.DuckDBPyConnection, name: str) -> list[int]:
    """The runs whose `name` is cached on this connection."""
    prefix = f"{_PREFIX}{name.lstrip('_')}_r"
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary AND starts_with(table_name, ?)",
        [prefix],
    ).fetchall()
    return sorted(int(t[len(prefix) :]) for (t,) in rows if t[len(prefix) :].isdigit())


def _redefine(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Define `name` as the dispatch over the runs cached now (the original when none)."""
    original = _definition(name)
    runs = _cached_runs(con, name)
    if not runs:
        con.execute(original)
        return
    con.execute(original.replace(f"MACRO {name}(rid)", f"MACRO _uncached_{name}(rid)", 1))
    ids = ", ".join(str(r) for r in runs)
    branches = [f"SELECT * FROM {_table(name, r)} WHERE rid = {r}" for r in runs]
    branches.append(f"SELECT * FROM _uncached_{name}(rid) WHERE rid NOT IN ({ids})")
    body = "\nUNION ALL\n".join(branches)
    con.execute(f"CREATE OR REPLACE TEMP MACRO {name}(rid) AS TABLE\n{body};")


@contextmanager
def run_session(
    con: duckdb.DuckDBPyConnection, rid: int, names: Sequence[str] = CACHED
) -> Iterator[list[str]]:
    """Cache the intermediate tables of run `rid` on `con` for the duration of the block
    (those of CACHED that are in `names`: a view that reads a few of them caches only those);
    yields the names of the macros cached by this session (empty when an enclosing session
    already caches the run)."""
    rid = int(rid)
    mine: list[str] = []
    swept: dict[str, str] | None = None
    # a session nested in one that caches the run already (a Timeline view inside a report's
    # preparation) looks at nothing more than which runs are cached
    wanted = [n for n in CACHED if n in names and rid not in _cached_runs(con, n)]
    try:
        defined = defined_macros(con, wanted) if wanted else set()
        for name in wanted:
            if name not in defined:
                continue
            table = _table(name, rid)
            query = f"SELECT * FROM {name}({rid})"
            if name in FROM_SWEEP:
                if swept is None:
                    swept = _sweep_tables(con, rid)
                if swept:
                    query = FROM_SWEEP[name].format(rid=rid, **swept)
            try:
                con.execute(f"CREATE TEMP TABLE {table} AS {query}")
            except duckdb.Error:
                con.execute(f"DROP TABLE IF EXISTS temp.{table}")
                continue
            mine.append(name)
            _redefine(con, name)
        yield list(mine)
    finally:
        for name in reversed(mine):
            con.execute(f"DROP TABLE IF EXISTS temp.{_table(name, rid)}")
            _redefine(con, name)
        for table in (swept or {}).values():
            con.execute(f"DROP TABLE IF EXISTS temp.{table}")


def _sweep_tables(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, str]:
    """The sweep of run `rid` (analysis/sweep.py) as TEMP tables: {'steps': name, 'ranks':
    name}; empty when it does not apply or fails (the macros then compute their own)."""
    try:
        result = sweep(con, rid)
    except duckdb.Error:
        return {}
    if result is None:
        return {}
    names = {"steps": _table("sweep_steps", rid), "ranks": _table("sweep_ranks", rid)}
    for key, name in names.items():
        view = f"{name}_arrow"
        con.register(view, getattr(result, key))
        try:
            con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM {view}")
        finally:
            con.unregister(view)
    return names
