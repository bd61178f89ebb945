"""Getting an Nsight Systems SQLite file to read: as given, gunzipped, or exported by `nsys`.

A `.sqlite` export is read in place; a gzipped one (`.sqlite.gz`) is decompressed to a temporary
file; a binary report (`.nsys-rep`, `.qdrep`) is exported with `nsys export --type sqlite` when
`nsys` is on PATH, and refused with the exact command to run otherwise.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from commwall.ingest.errors import IngestError
from commwall.ingest.exec.forked import exists
from commwall.ingest.sources import inflate, is_gzip

SQLITE_MAGIC = b"SQLite format 3\x00"
#: Temporary directories are named for the process that made them (`commwall-nsys-<pid>-…`),
#: so that one left by a killed process is recognised and removed by the next.
TEMP_PREFIX = "commwall-nsys-"
_TEMP_PID = re.compile(rf"^{TEMP_PREFIX}(\d+)-")
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_SUFFIXES = (".sqlite", ".sqlite.gz")


def is_report(path: Path) -> bool:
    """True for a binary Nsight Systems report, which only `nsys` can read."""
    return path.name.lower().endswith(REPORT_SUFFIXES)


def looks_like_nsys(path: Path, head: bytes) -> bool:
    """Content sniff: an SQLite database (plain or gzipped) or a binary nsys report. Whether the
    database is an nsys export is decided by its tables when it is opened; a file named like an
    export is claimed too, so that the error says what is wrong with it."""
    name = path.name.lower()
    return head.startswith(SQLITE_MAGIC) or is_report(path) or name.endswith(EXPORT_SUFFIXES)


def export_command(path: Path, out: Path) -> list[str]:
    """The `nsys export` command that writes the SQLite export of report `path` to `out`."""
    return [
        "nsys",
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "-o",
        str(out),
        str(path),
    ]


@contextmanager
def sqlite_file(path: Path, max_bytes: int) -> Iterator[Path]:
    """A readable SQLite file for `path`; temporary copies are removed on exit."""
    if not is_report(path) and not is_gzip(path):
        yield path
        return
    reclaim_temp()
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp:
        out = Path(tmp) / (path.name.split(".")[0] + ".sqlite")
        if is_report(path):
            _export(path, out)
        else:
            _gunzip(path, out, max_bytes)
        yield out


def reclaim_temp(root: str | Path | None = None) -> list[Path]:
    """Remove the temporary directories (unpacked exports) that processes killed before they
    could clean up left behind: those named for a process that no longer exists. Returns them."""
    gone = []
    for d in Path(root or tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*-*"):
        m = _TEMP_PID.match(d.name)
        if m is None or not d.is_dir() or d.stat().st_uid != os.getuid() or exists(int(m[1])):
            continue
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
    return gone


def _export(path: Path, out: Path) -> None:
    nsys = shutil.which("nsys")
    if nsys is None:
        user_out = path.with_name(path.name.rsplit(".", 1)[0] + ".sqlite")
        hint = shlex.join(export_command(path, user_out))
        raise IngestError(
            path,
            f"Nsight Systems report, and `nsys` is not on PATH to export it. Run:\n  {hint}\n"
            "then ingest the .sqlite file",
        )
    cmd = [nsys, *export_command(path, out)[1:]]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.is_file():
        tail = (done.stderr or done.stdout).strip()[-500:]
        raise IngestError(
            path, f"`{shlex.join(cmd)}` failed (exit {done.returncode}): {tail or 'no output'}"
        )


def _gunzip(path: Path, out: Path, max_bytes: int) -> None:
    with open(out, "wb") as g:
        for piece in inflate(path, max_bytes):
            g.write(piece)
