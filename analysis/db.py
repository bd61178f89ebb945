"""Opening a store for analysis: a connection with the SQL modules of analysis/sql loaded."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources  # not `files`: DuckDB would scan it for the table `files`
from pathlib import Path
from typing import Any

import duckdb

import commwall.addrspace as addrspace
from commwall.analysis import dispatch, policy, shards


class RunNotFound(KeyError):
    """No run of that name in the store."""

    def __str__(self) -> str:
        return str(self.args[0])


REQUIRES = re.compile(r"^-- requires:(.*)$", re.MULTILINE)


def sql_modules() -> dict[str, str]:
    """Module name → SQL text of every analysis/sql/*.sql file, in dependency order: a module
    that says `-- requires: a, b` comes after a and b (read once per process)."""
    return dict(_sql_modules())


@cache
def _sql_modules() -> dict[str, str]:
    root = resources.files("commwall.analysis").joinpath("sql")
    texts = {
        p.name.removesuffix(".sql"): p.read_text()
        for p in sorted(root.iterdir(), key=lambda q: q.name)
        if p.name.endswith(".sql")
    }
    texts["policy"] = policy.sql_text()
    ordered: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered:
            return
        if name in path or name not in texts:
            raise ValueError(f"analysis/sql: bad requirement {name!r} (via {' > '.join(path)})")
        for m in REQUIRES.finditer(texts[name]):
            for dep in filter(None, (d.strip() for d in m.group(1).split(","))):
                visit(dep, (*path, name))
        ordered[name] = texts[name]

    for name in texts:
        visit(name, ())
    return ordered


@cache
def loaded_modules() -> tuple[str, ...]:
    """The SQL texts `load_modules` executes, in order (the modules with their dispatches)."""
    return tuple(dispatch.with_dispatch(t) for t in _sql_modules().values())


#: Columns the store's schema gained after stores were first made (ingest adds them with
#: `ALTER TABLE … ADD COLUMN IF NOT EXISTS` when it next writes): table → column → type.
LATER_COLUMNS: dict[str, dict[str, str]] = {
    "collectives": {
        "peer": "INTEGER",
        "pg_ranks": "VARCHAR",
        "in_splits": "VARCHAR",
        "out_splits": "VARCHAR",
    },
    "nccl_test_results": {"n_nodes": "INTEGER"},
}


def fill_later_columns(con: duckdb.DuckDBPyConnection) -> None:
    """A store made before LATER_COLUMNS existed, opened read-only (its schema cannot be brought
    up to date): each such table is shadowed by a TEMP view with the missing columns as NULL
    (nothing known of them: a send without its peer stays unmatched by p2p.sql), so that every
    macro reads one schema. Nothing is written to the store."""
    catalog = scalar(con, "SELECT current_database()")
    for table, later in LATER_COLUMNS.items():
        have = {
            r[0]
            for r in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? "
                "AND table_schema = 'main' AND table_name = ?",
                [catalog, table],
            ).fetchall()
        }
        missing = [c for c in later if c not in have]
        if not have or not missing:
            continue
        extra = ", ".join(f"NULL::{later[c]} AS {c}" for c in missing)
        source = f'"{catalog}".main.{table}'
        con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT *, {extra} FROM {source}")


def load_modules(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Create the analysis macros (TEMP: nothing is written to the store), reading the store's
    Parquet shards along with its tables when it has some (analysis/shards.py); the macros a
    run's session caches are defined as their dispatch (analysis/dispatch.py). A store made
    before some columns existed reads them as NULL (fill_later_columns)."""
    fill_later_columns(con)
    shards.attach(con)
    _plan_faster(con)
    for text in loaded_modules():
        try:
            con.execute(text)
        except duckdb.CatalogException as e:
            # A store made before some tables existed, opened read-only (so its schema could
            # not be brought up to date): the modules reading those tables, and the modules
            # needing them, are left out; their sections check the tables and say so.
            if "does not exist" not in str(e):
                raise
    con.execute(
        f"SET VARIABLE {LOADED} = (SELECT list(DISTINCT function_name) FROM duckdb_functions()"
        " WHERE NOT internal AND function_type IN ('macro', 'table_macro'))"
    )
    return con


#: DuckDB optimizer steps left out of the analysis connections' plans. `projection_pullup`
#: optimizes again the part of a plan under every projection it removes; on the analysis
#: macros, nested many deep, that is most of a query's time: an uncached `run_summary` planned
#: in about 28 of its 31 s, 2.6 s without the step, with the same rows (and a session's set-up
#: halves). Leaving an optimizer step out never changes a result, only how it is computed.
SKIPPED_OPTIMIZERS = ("projection_pullup",)


def _plan_faster(con: duckdb.DuckDBPyConnection) -> None:
    """Leave SKIPPED_OPTIMIZERS out of the plans of `con` (a DuckDB that lacks a step keeps
    its defaults)."""
    try:
        con.execute(f"SET disabled_optimizers = '{','.join(SKIPPED_OPTIMIZERS)}'")
    except duckdb.Error:
        pass


def open_db(db: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A connection to the store `db` with the analysis macros loaded."""
    if read_only and not Path(db).exists():
        raise FileNotFoundError(f"{db}: no such database (ingest something first)")
    return load_modules(addrspace.connect(db, read_only))


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> Any:
    """The value of an aggregate query (one row, one column): a count, a min, a world size."""
    row = con.execute(sql, params or []).fetchone()
    return None if row is None else row[0]


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the store has table `name` (stores made before a table existed lack it)."""
    return bool(scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]))


def has_macro(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the connection defines the macro `name` (its module loaded: `load_modules`)."""
    return name in defined_macros(con, [name])


#: The session variable in which `load_modules` lists the macros it defined.
LOADED = "analysis_macros"


def defined_macros(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> set[str]:
    """Which of `names` the connection defines: from the list `load_modules` made when it
    loaded them (a look at the catalog lists every function DuckDB has, about 15 ms), else from
    the catalog."""
    q = f"SELECT list_filter(getvariable('{LOADED}'), lambda n: list_contains(?, n))"
    loaded = con.execute(q, [list(names)]).fetchone()
    if loaded is not None and loaded[0] is not None:
        return set(loaded[0])
    return _catalog_macros(con, names)


def _catalog_macros(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> set[str]:
    q = (
        "SELECT DISTINCT function_name FROM duckdb_functions() "
        "WHERE list_contains(?, function_name)"
    )
    return {n for (n,) in con.execute(q, [list(names)]).fetchall()}


def row(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> tuple[Any, ...]:
    """The one row of an aggregate query (several aggregates, no GROUP BY: always one row)."""
    out = con.execute(sql, params or []).fetchone()
    if out is None:
        raise RuntimeError(f"an aggregate query returned no row: {sql}")
    return out


def run_id(con: duckdb.DuckDBPyConnection, run: str) -> int:
    """The id of run `run`, or RunNotFound listing the runs there are."""
    row = con.execute("SELECT run_id FROM runs WHERE name = ?", [run]).fetchone()
    if row is None:
        names = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        raise RunNotFound(f"no run named {run!r}; runs in this store: {names or 'none'}")
    return row[0]
