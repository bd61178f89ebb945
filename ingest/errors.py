"""The one error type ingest raises: which file, and what is wrong with it."""

from __future__ import annotations

import logging
from pathlib import Path

#: Where ingest logs a parser failure with its traceback (for a bug report).
log = logging.getLogger("commwall.ingest")


class IngestError(Exception):
    """A file could not be ingested. `str()` names the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple:
        """Pickled as its path and problem (it crosses from worker processes)."""
        return IngestError, (self.path, self.problem)


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
