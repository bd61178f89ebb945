"""No module of the package is longer than a newcomer can read in one sitting: every .py under
ingest/, analysis/, dashboard/, cli/ and commwall/'s own files stays within MAX_LINES (a module
holds one concept; a longer one is split along its own seams, as ingest/formats/nccl_log/ and
ingest/formats/kineto/ were). commwall/'s links to the top-level folders are not followed: those
folders are checked themselves, and sample_traces/ holds generators, not the package's logic."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT

#: The most lines a module may have.
MAX_LINES = 500
TOPS = ("ingest", "analysis", "dashboard", "cli")


def modules() -> list[Path]:
    """Every .py file of the package folders, and commwall/'s own (not through its links)."""
    files = [p for top in TOPS for p in (ROOT / top).rglob("*.py")]
    files += [p for p in (ROOT / "commwall").glob("*.py") if not p.is_symlink()]
    return sorted(p for p in files if "__pycache__" not in p.parts)


def test_the_walk_finds_the_package():
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"ingest/store.py", "dashboard/export.py", "commwall/addrspace.py"} <= names
    assert len(names) > 100


def test_no_module_is_over_the_limit():
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules along their seams (over {MAX_LINES} lines): {long}"
