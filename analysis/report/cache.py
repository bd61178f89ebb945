"""A run's whole report kept between processes, beside the session tables of
analysis/report/run_cache.py.

The run cache keeps the tables every section reads, so a later report of a 256-rank run of
2,000 collectives per rank reads them back instead of matching and fitting clocks again; it still
calibrates the model, replays the run and builds every section, over a second of it on a
2-core machine. The report itself is a function of the run's rows and the analysis code alone
(and of the baseline run's rows, its one option), so a report that took at least MIN_SECONDS to
build, or one built by `Run.keep` (the ingest's preparation of the run), is written here, and a
later report of the same run reads it back whole when nothing it was computed from has changed.

Where: `<store>.cache/report-run<id>-<fingerprint>.json`, `report-run<id>b<baseline id>-…` for
a report measured against another run's nccl-tests tables (run_cache.directory: none for an
in-memory store or when COMMWALL_CACHE is "0"), written under a temporary name and renamed into
place. Writing a run's report removes its other reports; the most recently used KEEP are kept.

When a report is valid: its fingerprint covers the run's rows and the session code (run_cache's
fingerprint), the run's row of `runs` (its name is in the report), those of the baseline run
when there is one (its nccl-tests tables price the `fabric` section), every file of the analysis
package (its Python and SQL: any change to the code computing a figure) and the versions of
Python, DuckDB, numpy and pandas. A report is written only when it is exactly what JSON gives
back (str keys, lists, str, int, float, bool, None; a float type of numpy counts as a float) and
no section failed (a failure can be transient: memory, a locked file). Anything unreadable means
"not cached"; a cache that cannot be written is not used. Deleting the directory is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import time
import uuid
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from commwall.analysis.report import run_cache

#: Seconds of building below which a report is not written (a small run's report is built about
#: as fast as it is read back, and tests that change the code in memory must not meet old ones).
MIN_SECONDS = 1.0
#: Reports kept (the most recently used; the one just written always stays).
KEEP = 64
#: Version of the file layout.
FORMAT = 1
#: False: neither read nor write reports in this process (the test suite, whose tests change
#: the analysis code in memory where the fingerprint cannot see it). COMMWALL_CACHE=0 turns
#: this cache off with the run cache.
ENABLED = True

_PACKAGE = Path(__file__).resolve().parents[1]  # the analysis package, every subpackage


@cache
def _code_digest() -> str:
    """Every file of the analysis package (Python and SQL) and the versions the figures depend
    on."""
    h = hashlib.sha256(
        f"{FORMAT} {platform.python_version()} duckdb {duckdb.__version__} numpy "
        f"{np.__version__} pandas {pd.__version__} pyarrow {pa.__version__}".encode()
    )
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in (".py", ".sql") and path.is_file():
            h.update(str(path.relative_to(_PACKAGE)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


_code_digest()  # now, as this process loads the code: not when a later report asks for it


def fingerprint(con: duckdb.DuckDBPyConnection, rid: int, baseline: int | None = None) -> str:
    """What run `rid`'s report (against the nccl-tests tables of run `baseline`, when given)
    is computed from, as a digest (see the module)."""
    h = hashlib.sha256(_code_digest().encode())
    for r in (rid,) if baseline is None else (rid, baseline):
        h.update(run_cache.fingerprint(con, r).encode())
        row = con.execute(
            "SELECT name, notes, created_at::VARCHAR FROM runs WHERE run_id = ?", [int(r)]
        ).fetchall()
        h.update(repr(row).encode())
    return h.hexdigest()[:32]


def _prefix(rid: int, baseline: int | None) -> str:
    return f"report-run{int(rid)}" + ("" if baseline is None else f"b{int(baseline)}") + "-"


def _path(base: Path, rid: int, fp: str, baseline: int | None = None) -> Path:
    return base / f"{_prefix(rid, baseline)}{fp}.json"


def faithful(value: Any) -> bool:
    """Whether `value` is exactly what JSON gives back after writing it: dicts with str keys,
    lists, str, int, float (a numpy float counts as a float), bool and None."""
    if value is None or isinstance(value, (str, bool, float)):
        return True
    if type(value) is int:
        return True
    if type(value) is list:
        return all(faithful(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and faithful(v) for k, v in value.items())
    return False


def load(
    con: duckdb.DuckDBPyConnection, rid: int, baseline: int | None = None
) -> tuple[dict | None, str]:
    """(Run `rid`'s report, against run `baseline`'s nccl-tests tables when given, as written
    by `save` for its current fingerprint, that fingerprint):
    the report None when there is none valid, the fingerprint "" without a cache directory.
    A report built after a miss is saved under this fingerprint, the one of the rows it read."""
    base = run_cache.directory(con) if ENABLED else None
    if base is None:
        return None, ""
    fp = ""
    try:
        fp = fingerprint(con, rid, baseline)
        path = _path(base, rid, fp, baseline)
        doc = json.loads(path.read_text())
        if doc.get("format") != FORMAT or not isinstance(doc.get("report"), dict):
            return None, fp
        with contextlib.suppress(OSError):
            os.utime(path)  # most recently used
        return doc["report"], fp
    except Exception:  # noqa: BLE001  (missing, damaged, foreign: not cached)
        return None, fp


def save(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    report: dict,
    seconds: float,
    fp: str = "",
    baseline: int | None = None,
) -> bool:
    """Write run `rid`'s `report`, built in `seconds` from the rows of fingerprint `fp` (taken
    before building: `load`'s; "" takes it now), when that took at least MIN_SECONDS, no
    section failed and JSON gives it back exactly; True when written. Never raises."""
    base = run_cache.directory(con) if ENABLED else None
    if base is None or seconds < MIN_SECONDS or report.get("analysis_errors"):
        return False
    tmp = base / f".tmp-report-{uuid.uuid4().hex}"
    try:
        if not faithful(report):
            return False
        final = _path(base, rid, fp or fingerprint(con, rid, baseline), baseline)
        base.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"format": FORMAT, "run_id": int(rid), "report": report}))
        os.replace(tmp, final)
        _prune(base, _prefix(rid, baseline), final)
        return True
    except Exception:  # noqa: BLE001  (a cache that cannot be written is not used)
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _prune(base: Path, mine: str, keep: Path) -> None:
    """Remove the run's other reports (those named `mine`…: against the same baseline), the
    least recently used beyond KEEP, and temporary files of writers that never finished."""
    with contextlib.suppress(OSError):
        now = time.time()
        for p in base.glob(".tmp-report-*"):
            if now - p.stat().st_mtime > run_cache.ABANDONED_S:
                p.unlink(missing_ok=True)
        reports = [p for p in base.glob("report-run*.json") if p != keep]
        for p in [p for p in reports if p.name.startswith(mine)]:
            p.unlink(missing_ok=True)
            reports.remove(p)
        reports.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for p in reports[KEEP - 1 :]:
            p.unlink(missing_ok=True)
