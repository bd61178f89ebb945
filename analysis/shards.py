"""Parquet shards read in place, under the names of the tables they belong to.

Distributed ingest (docs/scale_out.md) keeps a run's big tables as Parquet files listed in the
store's `shards` table, each with every column of its table. `attach(con)` creates, for each
table that has shards, a TEMP VIEW of the same name: the table's own rows UNION ALL its shards.
An unqualified name resolves to the temp view before the stored table, in the analysis macros
too (they bind names when called), so every query reads both without knowing of shards. The
shards of each run form their own branch, filtered on its run_id, so that a query of one run
(`WHERE run_id = rid`) prunes the other runs' branches before opening any of their files; a run
whose shards cannot be read gets a branch that fails the queries touching it, and only those.
"""

from __future__ import annotations

import duckdb

#: URL schemes DuckDB reads itself (httpfs/azure extensions); others go through fsspec.
NATIVE = {"file", "http", "https", "s3", "s3a", "s3n", "gs", "gcs", "r2", "az", "azure", "abfss"}


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _register_filesystems(con: duckdb.DuckDBPyConnection, paths: list[str]) -> None:
    """Let DuckDB read URL schemes it lacks through fsspec (memory://, sftp://, ...)."""
    schemes = {p.split("://", 1)[0] for p in paths if "://" in p} - NATIVE
    if schemes:
        import fsspec  # only stores with such URLs pay for it

        for scheme in sorted(schemes):
            con.register_filesystem(fsspec.filesystem(scheme))


def attach(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create the shard views of the store open on `con`; returns the tables that have one."""
    (db,) = con.execute("SELECT current_database()").fetchone() or (None,)
    (has_manifest,) = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
        "AND table_name = 'shards'",
        [db],
    ).fetchone() or (0,)
    if not has_manifest:
        return []
    rows = con.execute(
        "SELECT s.table_name, s.run_id, list(s.path ORDER BY s.path) "
        f"FROM {_ident(db)}.main.shards s "
        "JOIN duckdb_tables() t ON t.database_name = ? AND t.schema_name = 'main' "
        "AND t.table_name = s.table_name GROUP BY ALL ORDER BY ALL",
        [db],
    ).fetchall()
    _register_filesystems(con, [p for *_, paths in rows for p in paths])
    branches: dict[str, list[tuple[int, str]]] = {}
    for table, rid, paths in rows:
        files = ", ".join(_literal(p) for p in paths)
        branches.setdefault(table, []).append(
            (rid, f"SELECT * FROM read_parquet([{files}], hive_partitioning = false) "
                  f"WHERE run_id = {int(rid)}")
        )  # fmt: skip
    for table, runs in branches.items():
        stored = f"{_ident(db)}.main.{_ident(table)}"
        try:
            _create(con, table, stored, [sql for _, sql in runs])
        except duckdb.IOException:
            _create(con, table, stored, [_checked(con, table, stored, r, sql) for r, sql in runs])
    return list(branches)


def _create(con: duckdb.DuckDBPyConnection, table: str, stored: str, parts: list[str]) -> None:
    union = " UNION ALL BY NAME ".join([f"SELECT * FROM {stored}", *parts])
    con.execute(f"CREATE OR REPLACE TEMP VIEW {_ident(table)} AS {union}")


def _checked(con: duckdb.DuckDBPyConnection, table: str, stored: str, rid: int, sql: str) -> str:
    """`sql` when its shards can be read, else a branch that fails queries touching run `rid`
    (only those: the other runs stay readable) with the reason."""
    try:
        con.execute(f"DESCRIBE {sql}")
        return sql
    except duckdb.IOException as e:
        problem = f"run_id {rid}: {table} shards unreadable ({e}); restore them or delete the run"
        return (
            f"SELECT t.* REPLACE ({int(rid)} AS run_id) FROM (SELECT 1) "
            f"LEFT JOIN {stored} t ON false WHERE error({_literal(problem)})"
        )
