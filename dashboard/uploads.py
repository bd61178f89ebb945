"""Uploads from the browser: files saved under a server-controlled directory with generated
names, every file parsed before anything is written, then one transaction per run.

A run lands whole or not at all: if any file fails, nothing is stored, the saved copies are
removed, and every file's problem is reported in plain words.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from commwall.dashboard.database import StoreFile
from commwall.ingest import store
from commwall.ingest.errors import IngestError, UnknownFormat
from commwall.ingest.formats import registry as formats
from commwall.ingest.parsed import Parsed

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 80


@dataclass
class FileOutcome:
    """One uploaded file: `status` is parsed | failed | ingested | skipped (already in the run)
    | unknown_format (of no known format, left out of a run of several files)."""

    name: str
    status: str
    format: str | None = None
    ranks: list[int] = field(default_factory=list)
    error: str | None = None


@dataclass
class UploadOutcome:
    """What an upload did. `stored` is True only when the run was committed."""

    run: str
    stored: bool
    files: list[FileOutcome]
    error: str | None = None


def safe_name(name: str) -> str:
    """A file name reduced to [A-Za-z0-9._-] (no directories), kept for rank-in-name hints."""
    base = _UNSAFE.sub("_", Path(name.replace("\\", "/")).name).lstrip(".")
    return base[-MAX_NAME:] or "file"


def save_files(files: list[tuple[str, bytes]], root: Path) -> tuple[Path, list[Path]]:
    """Write `(original name, bytes)` pairs to a fresh directory under `root`; the stored names
    are generated (`NNN-<safe name>`). Returns the directory and the paths, in order."""
    folder = root / uuid.uuid4().hex
    folder.mkdir(parents=True)
    paths = []
    for i, (name, data) in enumerate(files):
        p = folder / f"{i:03d}-{safe_name(name)}"
        p.write_bytes(data)
        paths.append(p)
    return folder, paths


def _problem(e: Exception) -> str:
    if isinstance(e, IngestError):
        return e.problem
    return f"could not be read ({type(e).__name__}: {e})"


def upload_run(
    db: StoreFile,
    run: str,
    files: list[tuple[str, bytes]],
    root: Path,
    notes: str | None = None,
    on_file: Callable[[int, FileOutcome], None] | None = None,
) -> UploadOutcome:
    """Store `files` (original name, bytes) as the new run `run`.

    Files are parsed one by one outside the write lock (`on_file(index, outcome)` after each);
    then, under the lock, the run is checked to be new and ingested in one transaction."""
    run = run.strip()
    outcomes = [FileOutcome(name=n, status="pending") for n, _ in files]
    if not run:
        return UploadOutcome(run, False, outcomes, "Give the run a name.")
    if not files:
        return UploadOutcome(run, False, outcomes, "Choose at least one file.")
    folder, paths = save_files(files, root)
    parsed: dict[Path, Parsed] = {}
    for i, (path, out) in enumerate(zip(paths, outcomes, strict=True)):
        try:
            parsed[path] = formats.parse(path)
            out.status, out.format = "parsed", parsed[path].format
            out.ranks = parsed[path].ranks()
        except UnknownFormat as e:  # left out of a run of several files, as in a directory
            out.status, out.error = store.UNKNOWN_FORMAT, e.problem
        except Exception as e:  # a parser bug must not take the server down
            out.status, out.error = "failed", _problem(e)
        if on_file:
            on_file(i, out)
    failed = [o for o in outcomes if o.status == "failed"]
    if not parsed and not failed:  # a file of its own, or none of the files, of a known format
        failed = [o for o in outcomes if o.status == store.UNKNOWN_FORMAT]
        for o in failed:
            o.status = "failed"
    if failed:
        shutil.rmtree(folder, ignore_errors=True)
        return UploadOutcome(run, False, outcomes, f"{len(failed)} file(s) could not be read.")
    unknown = {p for p, o in zip(paths, outcomes, strict=True) if o.status == store.UNKNOWN_FORMAT}
    paths = [p for p in paths if p not in unknown]
    outcomes_stored = [o for o in outcomes if o.status != store.UNKNOWN_FORMAT]
    names = {p: o for p, o in zip(paths, outcomes_stored, strict=True)}
    try:
        with db.writing() as con:
            if con.execute("SELECT 1 FROM runs WHERE name = ?", [run]).fetchone():
                shutil.rmtree(folder, ignore_errors=True)
                msg = f"A run named {run!r} already exists; pick another name."
                return UploadOutcome(run, False, outcomes, msg)
            summary = store.ingest(con, run, paths, notes=notes, parse=lambda p, _: parsed[p])
    except IngestError as e:
        shutil.rmtree(folder, ignore_errors=True)
        bad = names.get(Path(e.path))
        if bad is None:
            return UploadOutcome(run, False, outcomes, e.problem)
        bad.status, bad.error = "failed", e.problem
        return UploadOutcome(run, False, outcomes, f"{bad.name}: {e.problem}")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    for f, out in zip(summary.files, outcomes_stored, strict=True):
        out.status = f.status
    return UploadOutcome(run, summary.committed, outcomes)


#: How the upload page names a file's status.
STATUS_WORDS = {
    "skipped": "already present",
    store.UNKNOWN_FORMAT: "no known format, skipped",
}


def shown_status(status: str) -> str:
    """A file's status in words for the page."""
    return STATUS_WORDS.get(status, status)


def delete_run(db: StoreFile, run: str, root: Path) -> bool:
    """Delete run `run` and the uploaded copies of its files (only those under `root`)."""
    with db.writing() as con:
        paths = [
            Path(r[0])
            for r in con.execute(
                "SELECT f.path FROM files f JOIN runs r USING (run_id) WHERE r.name = ?", [run]
            ).fetchall()
        ]
        if not store.delete_run(con, run):
            return False
    root = root.resolve()
    for folder in {p.parent for p in paths}:
        if folder.resolve().parent == root:
            shutil.rmtree(folder, ignore_errors=True)
    return True


def rename_run(db: StoreFile, old: str, new: str) -> str | None:
    """Rename a run; returns an error in plain words, or None on success."""
    new = new.strip()
    if not new:
        return "The new name is empty."
    with db.writing() as con:
        if con.execute("SELECT 1 FROM runs WHERE name = ?", [new]).fetchone():
            return f"A run named {new!r} already exists."
        if not store.rename_run(con, old, new):
            return f"There is no run named {old!r}."
    return None
