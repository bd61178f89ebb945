"""The one error type ingest raises: which file, and what is wrong with it."""

from __future__ import annotations

from pathlib import Path


class IngestError(Exception):
    """A file could not be ingested. `str()` names the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple:
        """Pickled as its path and problem (it crosses from worker processes)."""
        return IngestError, (self.path, self.problem)
