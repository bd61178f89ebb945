"""Reading an Nsight Systems SQLite export with the stdlib `sqlite3`, in batches into Arrow.

Exports create only tables that have rows, table names may carry version suffixes (`_V2`), and
columns differ between schema versions: every lookup here tolerates absence. Every SQLite
failure (corrupt, truncated, locked) becomes an IngestError naming the user's file.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nsys.source import SQLITE_MAGIC
from commwall.ingest.schema import TEXT_CUT

#: Seconds to wait for another program's write lock before giving up.
LOCK_TIMEOUT_S = 2.0
BATCH_ROWS = 65536
#: Strings (StringIds, NVTX range text, host, GPU and process names, metadata) are cut to this
#: many characters when read, so that a crafted export with huge strings cannot multiply memory
#: by its number of rows.
MAX_STRING = TEXT_CUT
#: What a malformed value (text, blob or an out-of-range number where an integer belongs) raises
#: when a batch is converted to Arrow.
_BAD_VALUE = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError)
_FROM = re.compile(r'\bFROM\s+"?(\w+)', re.IGNORECASE)
_NOT_UTF8 = "corrupt SQLite file (text that is not UTF-8"
#: An export has StringIds and at least one of these (or a CUPTI_ACTIVITY_KIND_* table).
MARKERS = ("META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME", "NVTX_EVENTS")
_VERSIONED = re.compile(r"^(.*)_V(\d+)$")


class Export:
    """An open, read-only nsys SQLite export. `shown` is the path named in errors."""

    def __init__(self, path: Path, shown: Path) -> None:
        self.shown = shown
        with open(path, "rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise IngestError(shown, "not an SQLite database (no SQLite header)")
        uri = path.resolve().as_uri() + "?mode=ro"
        try:
            self.con = sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT_S)
        except sqlite3.Error as e:
            raise self._error(e) from e
        names = [r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")]
        self.tables = frozenset(names)
        self._columns: dict[str, frozenset[str]] = {}
        self._strings: tuple[pa.Array, pa.Array] | None = None
        if not self.is_nsys():
            listed = ", ".join(sorted(names)[:8]) or "none"
            self.close()
            raise IngestError(
                shown,
                "SQLite database, but not an Nsight Systems export (no StringIds, "
                f"META_DATA_EXPORT or CUPTI_ACTIVITY_KIND_* tables; tables: {listed})",
            )
        if generated := self._generated_columns():
            self.close()
            raise IngestError(
                shown,
                f"SQLite database with computed (generated) columns ({', '.join(generated[:3])}): "
                "nsys never writes them, and one can make every read of a row take unbounded time "
                "or memory; refused",
            )

    def _generated_columns(self) -> list[str]:
        """`table.column` of every generated column (PRAGMA table_xinfo: hidden 2 or 3)."""
        out = []
        for t in sorted(self.tables):
            rows = self.rows(f'PRAGMA table_xinfo("{t}")')
            out += [f"{t}.{r[1]}" for r in rows if r[6] in (2, 3)]
        return out

    def is_nsys(self) -> bool:
        """True when the tables are those of an nsys export."""
        if "StringIds" not in self.tables:
            return False
        return any(t in self.tables for t in MARKERS) or any(
            t.startswith("CUPTI_ACTIVITY_KIND_") for t in self.tables
        )

    def close(self) -> None:
        """Close the connection."""
        self.con.close()

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def table(self, name: str) -> str | None:
        """The table holding `name`: itself, else its highest `_V<n>` version, else None."""
        if name in self.tables:
            return name
        versions = [
            (int(m.group(2)), t)
            for t in self.tables
            if (m := _VERSIONED.match(t)) and m.group(1) == name
        ]
        return max(versions)[1] if versions else None

    def columns(self, table: str) -> frozenset[str]:
        """Column names of `table`."""
        if table not in self._columns:
            rows = self.rows(f'PRAGMA table_info("{table}")')
            self._columns[table] = frozenset(r[1] for r in rows)
        return self._columns[table]

    def pick(self, table: str, *names: str, text: tuple[str, ...] = ()) -> str:
        """A SELECT list of `names`, with `NULL AS name` for columns `table` lacks; columns
        named in `text` are cut to MAX_STRING characters (bytes, for a blob) by SQLite itself,
        so that no longer value reaches Python."""
        have = self.columns(table)

        def item(n: str) -> str:
            if n not in have:
                return f'NULL AS "{n}"'
            return f'substr("{n}", 1, {MAX_STRING}) AS "{n}"' if n in text else f'"{n}"'

        return ", ".join(map(item, names))

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """All rows of a query."""
        try:
            return self.con.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise self._error(e) from e
        except UnicodeDecodeError as e:
            raise IngestError(self.shown, f"{_NOT_UTF8}: {e})") from e

    def read(self, sql: str, schema: pa.Schema, params: tuple = ()) -> pa.Table:
        """A query's rows as an Arrow table of `schema` (columns in select order), fetched in
        batches of BATCH_ROWS."""
        batches = []
        try:
            cur = self.con.execute(sql, params)
            while rows := cur.fetchmany(BATCH_ROWS):
                cols = zip(*rows, strict=True)
                arrays = [_column(self.shown, sql, c, f) for c, f in zip(cols, schema, strict=True)]
                batches.append(pa.record_batch(arrays, schema=schema))
        except sqlite3.Error as e:
            raise self._error(e) from e
        except UnicodeDecodeError as e:
            raise IngestError(self.shown, f"{_NOT_UTF8}: {e})") from e
        return pa.Table.from_batches(batches, schema=schema)

    def strings(self, ids: pa.Array) -> pa.Array:
        """The StringIds values of `ids` (null where an id is null or unknown)."""
        if self._strings is None:
            schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
            t = self.read(f"SELECT id, substr(value, 1, {MAX_STRING}) FROM StringIds", schema)
            self._strings = (t["id"].combine_chunks(), t["value"].combine_chunks())
        known, values = self._strings
        return values.take(pc.index_in(ids, value_set=known))

    def _error(self, e: sqlite3.Error) -> IngestError:
        msg = str(e)
        if "locked" in msg:
            problem = (
                "the SQLite file is locked by another program (is nsys still writing it?); "
                "retry when it is done"
            )
        elif "malformed" in msg or "not a database" in msg:
            problem = f"corrupt or truncated SQLite file ({msg})"
        else:
            problem = f"cannot read the SQLite file ({msg})"
        return IngestError(self.shown, problem)


def _column(shown: Path, sql: str, values: tuple, field: pa.Field) -> pa.Array:
    """One column of a batch as Arrow, or IngestError naming the table and column when a value
    does not fit its type."""
    try:
        return pa.array(values, type=field.type)
    except _BAD_VALUE as e:
        m = _FROM.search(sql)
        table = m.group(1) if m else "a table"
        bad = next((v for v in values if v is not None and type(v) is not int), None)
        what = repr(bad)[:40] if bad is not None else "a value out of range"
        raise IngestError(
            shown, f"{table}: column {field.name!r} holds {what} where {field.type} belongs"
        ) from e
