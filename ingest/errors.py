"""The one error type ingest raises: which file, and what is wrong with it."""

from __future__ import annotations

import logging
import re
from pathlib import Path

#: Where ingest logs a parser failure with its traceback (for a bug report).
log = logging.getLogger("commwall.ingest")


#: Characters of a file name shown as escapes in a message: every control character (newline
#: and tab too: a name is one line), DEL, and the invisible or direction-changing ones.
_NAME_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def shown_name(path: str | Path) -> str:
    """A file name as a message shows it: on one line, its control characters as escapes
    (`\\n`, `\\x1b`), so that a crafted name cannot pass for a second message."""
    return _NAME_CONTROL.sub(_name_escape, str(path))


def _name_escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return named.get(m.group()) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")


class IngestError(Exception):
    """A file could not be ingested. `str()` names the file (`shown_name`) and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{shown_name(self.path)}: {problem}")

    def __reduce__(self) -> tuple:
        """Pickled as its path and problem (it crosses from worker processes)."""
        return type(self), (self.path, self.problem)


class UnknownFormat(IngestError):
    """The file is of no format commwall reads (a README, a job's own log, a JSON of metrics):
    named on its own it is an error; found in a directory or an upload it is skipped and
    listed, where a damaged file of a known format still stops the ingest."""


def parser_failure(path: str | Path, e: BaseException) -> IngestError:
    """The IngestError for a parser bug (any exception but IngestError or OSError while parsing
    `path`): it names the file and asks for a report, so that a bug never takes a command down
    and `--keep-going` still stores the other files. Log it with `log_parser_failure`."""
    problem = f"commwall could not parse this file ({type(e).__name__}: {str(e)[:200]})"
    return IngestError(path, f"{problem}; please report it")


class RemoteTraceback(Exception):
    """A traceback formatted in another process (a Dask worker), logged as its failure."""

    def __str__(self) -> str:
        return str(self.args[0]).rstrip()


def log_parser_failure(path: str | Path, e: BaseException | str) -> None:
    """Log a parser bug with its traceback, for a bug report: `e` is the exception, or the
    traceback as formatted by the process that parsed the file."""
    exc = RemoteTraceback(e) if isinstance(e, str) else e
    log.error("%s: parser failure", path, exc_info=exc)
