"""A run's session tables kept between processes, in a directory next to the store.

A run's analysis session (analysis/report/session.py) computes the heavy tables of a run once per
report; every later command on the same run (`commwall whatif`, `export`, the dashboard after
a restart) would compute them again: 5.8 s on a 1,024-rank run of 2,000 collectives per rank.
When computing them took at least MIN_SECONDS, the session writes them here, and a later
session of the same run reads them back instead (`load`, about a tenth of the time).

Where: `<store>.cache/` beside the store file (none for an in-memory store, or when the variable
COMMWALL_CACHE is "0"). One entry per run and fingerprint, `run<id>-<fingerprint>/`: a Parquet
file per table and `manifest.json`, written under a temporary name and renamed into place, so
a reader sees an entry whole or not at all and writers never wait on each other. The most
recently used entries are kept, up to KEEP entries and BUDGET bytes; an entry for an older
fingerprint of the run is removed when a new one is written. Deleting the directory is always
safe.

When an entry is valid: its fingerprint covers what the tables are computed from, namely
* the run's rows: the store's schema version, the run's `files` rows (every ingest into a run
  adds its files, each with its sha256 and time of ingest), its Parquet shards, and how many
  rows of the run every data table holds (so rows added or deleted by other means count too;
  values edited in place by hand are not seen: delete the directory after such an edit); and
* the code computing them: the SQL modules as loaded, the sweep and session code, and the
  DuckDB version.
A table is read back only if its column types are those recorded when it was written; anything
unreadable (a damaged or foreign entry, a full disk, a read-only directory) means "not
cached": the session computes the tables as it would without this cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import uuid
from functools import cache
from pathlib import Path

import duckdb

from commwall.analysis import db, dispatch
from commwall.analysis.steps import sweep

#: Seconds of computing below which a session's tables are not worth writing (a small run's
#: tables are computed faster than they are written and read back).
MIN_SECONDS = 1.0
#: Entries kept: the most recently used, at most KEEP of them and BUDGET bytes in all (the entry
#: just written always stays). A 1,024-rank run of 2,000 collectives per rank takes 136 MB.
KEEP = 32
BUDGET = 4 << 30
#: Set to "0" to neither read nor write the cache.
ENV = "COMMWALL_CACHE"
#: Version of the entry layout.
FORMAT = 1

_MANIFEST = "manifest.json"
#: Tables not written: a session computes them again from the tables read back, faster than
#: they are written and read (_aligned_calls is _match_rows shifted by clock_offsets: at 1,024
#: ranks 0.10 s to compute, 0.33 s to write as Parquet, 64 MiB).
RECOMPUTED = frozenset({"_aligned_calls"})


def directory(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The cache directory of the store open on `con`; None when there is none to use."""
    if os.environ.get(ENV, "1") == "0":
        return None
    row = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()
    if row is None or not row[0]:
        return None
    return Path(f"{row[0]}.cache")


@cache
def _code_digest() -> str:
    h = hashlib.sha256(f"{FORMAT} duckdb {duckdb.__version__}".encode())
    for text in db.loaded_modules():
        h.update(text.encode())
    for module in (sweep, dispatch):
        h.update(Path(str(module.__file__)).read_bytes())
    h.update(Path(__file__).with_name("session.py").read_bytes())
    return h.hexdigest()


def fingerprint(con: duckdb.DuckDBPyConnection, rid: int) -> str:
    """What run `rid`'s session tables are computed from, as a digest (see the module)."""
    rid = int(rid)
    h = hashlib.sha256(_code_digest().encode())
    tables = [
        t
        for (t,) in con.execute(
            "SELECT DISTINCT table_name FROM information_schema.columns WHERE column_name = "
            "'run_id' AND table_name <> 'runs' AND table_schema = 'main' ORDER BY table_name"
        ).fetchall()
    ]
    facts: list[object] = [
        con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall(),
        con.execute(
            "SELECT file_id, sha256, size_bytes, format, n_rows, detail, ingested_at::VARCHAR "
            "FROM files WHERE run_id = ? ORDER BY file_id",
            [rid],
        ).fetchall(),
    ]
    if "shards" in tables:
        facts.append(
            con.execute(
                "SELECT table_name, path, n_rows, size_bytes FROM shards WHERE run_id = ? "
                "ORDER BY ALL",
                [rid],
            ).fetchall()
        )
    if tables:
        counts = " UNION ALL ".join(
            f"SELECT {_literal(t)}, count(*) FROM {_ident(t)} WHERE run_id = {rid}" for t in tables
        )
        facts.append(con.execute(counts).fetchall())
    h.update(repr(facts).encode())
    return h.hexdigest()[:32]


def _literal(text: Path | str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _types(con: duckdb.DuckDBPyConnection, source: str) -> list[list[str]]:
    return [[r[0], r[1]] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]


def _entry(base: Path, rid: int, fp: str) -> Path:
    return base / f"run{int(rid)}-{fp}"


def load(con: duckdb.DuckDBPyConnection, rid: int, names: list[str]) -> tuple[list[str], str]:
    """Create the TEMP tables (dispatch.table) of `names` for run `rid` from its cache entry.
    Returns (the names read, the run's fingerprint); ([], fingerprint) when the run has no
    valid entry ("" when there is no cache directory), leaving no table behind."""
    base = directory(con)
    if base is None or not base.is_dir():
        return [], ""
    made: list[str] = []
    fp = ""
    try:
        fp = fingerprint(con, rid)
        entry = _entry(base, rid, fp)
        manifest = json.loads((entry / _MANIFEST).read_text())
        if manifest.get("format") != FORMAT or manifest.get("fingerprint") != fp:
            return [], fp
        stored = manifest["tables"]
        for name in (n for n in names if n in stored):
            source = f"read_parquet({_literal(entry / f'{name}.parquet')})"
            if _types(con, source) != stored[name]:
                raise ValueError(f"{name}: column types differ from the manifest")
            table = dispatch.table(name, rid)
            con.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM {source}")
            made.append(name)
        with contextlib.suppress(OSError):
            os.utime(entry)  # most recently used
        return made, fp
    except Exception:  # noqa: BLE001  (whatever is wrong with the entry or the store: not cached)
        for name in made:
            con.execute(f"DROP TABLE IF EXISTS temp.{dispatch.table(name, rid)}")
        return [], fp


def save(
    con: duckdb.DuckDBPyConnection, rid: int, names: list[str], fp: str, seconds: float
) -> bool:
    """Write the TEMP tables of `names` for run `rid` as its entry of fingerprint `fp`, when
    computing them took at least MIN_SECONDS; True when written. Never raises: a cache that
    cannot be written is not used."""
    base = directory(con)
    names = [n for n in names if n not in RECOMPUTED]
    if base is None or seconds < MIN_SECONDS or not names:
        return False
    tmp = base / f".tmp-{uuid.uuid4().hex}"
    try:
        fp = fp or fingerprint(con, rid)
        final = _entry(base, rid, fp)
        tmp.mkdir(parents=True)
        tables = {}
        for name in names:
            path = tmp / f"{name}.parquet"
            table = f"temp.{dispatch.table(name, rid)}"
            con.execute(
                f"COPY (SELECT * FROM {table}) TO {_literal(path)} "
                "(FORMAT parquet, COMPRESSION snappy)"
            )
            types = _types(con, table)
            if _types(con, f"read_parquet({_literal(path)})") != types:
                return False  # a type Parquet does not keep: not cached
            tables[name] = types
        manifest = {"format": FORMAT, "fingerprint": fp, "run_id": int(rid), "tables": tables}
        (tmp / _MANIFEST).write_text(json.dumps(manifest))
        try:
            tmp.rename(final)
        except OSError:
            return final.is_dir()  # another process wrote the same entry first
        _prune(base, rid, final)
        return True
    except Exception:  # noqa: BLE001  (a cache that cannot be written is not used)
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: Seconds after which a temporary entry is taken for one left by a process that was killed.
ABANDONED_S = 3600.0


def _prune(base: Path, rid: int, keep: Path) -> None:
    """Remove the run's other entries, the least recently used beyond KEEP entries or BUDGET
    bytes, and temporary entries of writers that never finished (killed)."""
    with contextlib.suppress(OSError):
        now = time.time()
        for p in base.glob(".tmp-*"):
            if now - p.stat().st_mtime > ABANDONED_S:
                shutil.rmtree(p, ignore_errors=True)
        entries = [p for p in base.iterdir() if p.is_dir() and p.name.startswith("run")]
        stale = [p for p in entries if p.name.startswith(f"run{int(rid)}-") and p != keep]
        rest = sorted(
            (p for p in entries if p not in stale and p != keep),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        used = _bytes(keep)
        for i, p in enumerate(rest, start=1):
            size = _bytes(p)
            if i < KEEP and used + size <= BUDGET:
                used += size
            else:
                stale.append(p)
        for p in stale:
            shutil.rmtree(p, ignore_errors=True)


def _bytes(entry: Path) -> int:
    """Bytes of an entry's files."""
    return sum(f.stat().st_size for f in entry.iterdir())
