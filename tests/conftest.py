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


#: Stores of the repository's own sets, ingested once per test process: set paths → file.
_INGESTED: dict[tuple[Path, ...], Path] = {}


def _in_repository(d: Path) -> bool:
    return d.resolve().is_relative_to(ROOT) and d.resolve().is_dir()


def ingested_store(path: Path, sets: tuple[Path, ...]) -> Path:
    """Make `path` a store with each directory of `sets` ingested as a run named after it.
    Sets of the repository (tests/data, sample_traces: unchanged while tests run) are ingested
    once per test process and copied; a set elsewhere (a test's own directory) is ingested."""
    from commwall.ingest import discover, store

    key = tuple(d.resolve() for d in sets)
    shared = all(_in_repository(d) for d in sets)
    if shared and key in _INGESTED:
        shutil.copyfile(_INGESTED[key], path)
        return path
    w = store.connect(path)
    for d in sets:
        store.ingest(w, d.name, discover.expand([str(d)]))
    w.close()
    if shared:
        keep = _shared_dir() / f"{len(_INGESTED)}.duckdb"
        shutil.copyfile(path, keep)
        _INGESTED[key] = keep
    return path


def _shared_dir() -> Path:
    import atexit
    import tempfile

    global _SHARED
    if _SHARED is None:
        _SHARED = Path(tempfile.mkdtemp(prefix="commwall-test-sets-"))
        atexit.register(shutil.rmtree, _SHARED, True)
    return _SHARED


_SHARED: Path | None = None


def analysis_store(path: Path, sets: tuple[Path, ...]):
    """A store at `path` with each directory of `sets` ingested as a run named after it
    (`ingested_store`), opened for analysis (the caller closes it)."""
    from commwall.analysis.db import open_db

    return open_db(ingested_store(path, sets))


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
