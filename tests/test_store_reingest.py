"""Re-ingesting content a run already has is a no-op, whichever way the hash is taken: first
(same path and size as a stored file: no parse at all) or beside the parse (new path)."""

from __future__ import annotations

import shutil

import pytest
from conftest import DLRM

from commwall.ingest import store
from commwall.ingest.errors import IngestError
from commwall.ingest.formats import registry as formats

FILE = sorted(DLRM.glob("*.gz"))[0]


@pytest.fixture
def con(tmp_path):
    c = store.connect(tmp_path / "s.duckdb")
    yield c
    c.close()


def counting(calls):
    def parse(path, opts):
        calls.append(path.name)
        return formats.parse(path, opts)

    return parse


def test_same_path_again_is_skipped_without_parsing(con, tmp_path):
    path = tmp_path / FILE.name
    shutil.copy(FILE, path)
    calls = []
    first = store.ingest(con, "r", [path], parse=counting(calls))
    again = store.ingest(con, "r", [path], parse=counting(calls))
    assert [f.status for f in first.files] == ["ingested"]
    assert [f.status for f in again.files] == ["skipped"]
    assert calls == [FILE.name]  # the second ingest hashed first and never parsed


def test_same_content_at_a_new_path_is_skipped_after_parsing(con, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    shutil.copy(FILE, a / FILE.name)
    shutil.copy(FILE, b / FILE.name)
    calls = []
    store.ingest(con, "r", [a / FILE.name], parse=counting(calls))
    again = store.ingest(con, "r", [b / FILE.name], parse=counting(calls))
    assert [f.status for f in again.files] == ["skipped"]
    assert len(calls) == 2  # parsed while hashing, then found to be known content
    n = con.execute("SELECT count(*) FROM files").fetchone()[0]
    assert n == 1


def test_a_known_file_that_no_longer_parses_is_still_skipped(con, tmp_path):
    """A file stored by an older parser that the current one rejects: known content wins."""
    path = tmp_path / FILE.name
    shutil.copy(FILE, path)
    store.ingest(con, "r", [path])
    moved = tmp_path / "elsewhere.json.gz"
    shutil.copy(path, moved)

    def reject(p, opts):
        raise IngestError(p, "rejected")

    again = store.ingest(con, "r", [moved], parse=reject)
    assert [f.status for f in again.files] == ["skipped"]
    with pytest.raises(IngestError, match="rejected"):
        store.ingest(con, "other", [moved], parse=reject)
