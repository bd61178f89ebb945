"""Shared fixtures: where the bundled data lives, and fresh stores."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SAMPLES = ROOT / "sample_traces"
DLRM = SAMPLES / "dlrm_8rank"


@pytest.fixture
def tmp_db(tmp_path: Path) -> Path:
    """Path of a store file that does not exist yet."""
    return tmp_path / "store.duckdb"


def gunzip_to(src: Path, dest_dir: Path) -> Path:
    """Decompress `src` (a .gz file) into `dest_dir`; returns the new path."""
    out = dest_dir / src.name.removesuffix(".gz")
    with gzip.open(src, "rb") as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g)
    return out


def memory_store():
    """An in-memory store with the full schema and the analysis macros loaded."""
    import duckdb

    from commwall.analysis.db import load_modules
    from commwall.ingest.schema import ddl

    con = duckdb.connect()
    con.execute(ddl())
    return load_modules(con)


def analysis_store(path: Path, sets: tuple[Path, ...]):
    """A store at `path` with each directory of `sets` ingested as a run named after it, opened
    for analysis (the caller closes it)."""
    from commwall.analysis.db import open_db
    from commwall.ingest import discover, store

    w = store.connect(path)
    for d in sets:
        store.ingest(w, d.name, discover.expand([str(d)]))
    w.close()
    return open_db(path)


@pytest.fixture(autouse=True)
def _restore_main_module():
    """Streamlit's AppTest runs the app as module `__main__` and leaves it in sys.modules; a
    Dask worker started later would then re-import the app while preparing its process. Put
    the real `__main__` back after every test."""
    import sys

    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture(autouse=True)
def _no_kept_reports(request, monkeypatch):
    """Tests change analysis code in memory (a section made to fail, a threshold moved), which
    the report cache's fingerprint (the code on disk) cannot see: a report kept by an earlier
    ingest of the same store would be read instead. Off in this process for every test but
    those of the cache itself (tests/test_report_cache.py); a command run in a process of its
    own (the CLI in a subprocess, the browser tests' server) uses it as users do."""
    if request.module.__name__ != "test_report_cache":
        from commwall.analysis.report import cache as report_cache

        monkeypatch.setattr(report_cache, "ENABLED", False)
