"""Expanding the user's PATH arguments (files, directories, globs) into a list of files."""

from __future__ import annotations

import glob
from pathlib import Path

from commwall.ingest.errors import IngestError

#: Names skipped when walking a directory (licence notices, READMEs, ground-truth JSON).
SKIP_NAMES = ("LICENSE", "NOTICE", "README", "ground_truth")


def _wanted(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and not p.name.startswith(SKIP_NAMES)


def expand(args: list[str]) -> list[Path]:
    """Files named by `args`: files as given, directories walked recursively, globs expanded.
    Order is stable (sorted within each argument); duplicates are dropped."""
    out: list[Path] = []
    for a in args:
        p = Path(a)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if _wanted(q))
        elif p.exists():
            found = [p]
        else:
            found = sorted(Path(q) for q in glob.glob(a, recursive=True) if Path(q).is_file())
            if not found:
                raise IngestError(a, "no such file, directory or matching glob")
        out.extend(found)
    unique: dict[Path, Path] = {}  # resolved path -> the first spelling given
    for p in out:
        unique.setdefault(p.resolve(), p)
    return list(unique.values())


def named(args: list[str], paths: list[Path]) -> set[Path]:
    """Those of `paths` (from `expand(args)`) that the user named as a file of its own: such a
    file must be of a known format, where one found in a directory or by a glob may be skipped
    as of no known format."""
    given = {Path(a).resolve() for a in args if Path(a).is_file()}
    return {p for p in paths if p.resolve() in given}
