"""Reading a gzip file costs memory after what it really inflates to, never what its trailer
claims, and every format stops a gzip bomb at the same ratio (benchmarks/ingest_memory.py
measures whole ingests)."""

from __future__ import annotations

import gzip
import mmap
import random
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import DLRM

from commwall.ingest import sources, store
from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nccl_log import stream
from commwall.ingest.sources import read_bytes

TRACE = b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}'


def _peak_of_read(path: Path) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(IngestError, match="corrupt gzip data"):
            read_bytes(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_trailer_claim_in_front_of_junk_allocates_nothing_for_the_claim(tmp_path: Path) -> None:
    # 83 bytes of trace gzipped, then 16 MB of random bytes ending in a trailer that claims
    # 4 GiB - 1: the file inflates to 83 bytes before the junk is found corrupt. Sizing a buffer
    # from the trailer (up to 32x the file, as before) allocated 521 MB here.
    path = tmp_path / "junk_rank0.json.gz"
    junk = random.Random(0).randbytes(16 << 20)
    path.write_bytes(gzip.compress(TRACE) + junk + b"\xff\xff\xff\xff")
    # what one read of the file costs: a 4 MB chunk read and its piece, whatever the file's size
    assert _peak_of_read(path) < 12 << 20


def _big_gzip(tmp_path: Path) -> tuple[Path, bytes]:
    events = b",".join(b'{"ph": "X", "ts": %d, "dur": 1}' % i for i in range(300_000))
    text = b'{"traceEvents": [' + events + b"]}"
    path = tmp_path / "t_rank0.json.gz"
    path.write_bytes(gzip.compress(text, 6))
    return path, text


def _traced_read(path: Path) -> tuple[bytearray | mmap.mmap, int]:
    """read_bytes(path) and the most the heap held meanwhile (bytes)."""
    tracemalloc.start()
    try:
        data = read_bytes(path)
        return data, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_gzip_content_is_read_whole_and_exact(tmp_path: Path) -> None:
    path, text = _big_gzip(tmp_path)
    data, peak = _traced_read(path)
    assert bytes(data) == text
    # one buffer of the content (grown in place) plus the pieces in flight, not twice it
    assert peak < 1.3 * len(text) + (12 << 20)


def test_large_gzip_content_goes_to_a_temporary_file_not_the_heap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, text = _big_gzip(tmp_path)  # 10.7 MB inflated
    monkeypatch.setattr(sources, "SPILL", 1 << 20)
    monkeypatch.setattr(sources, "CHUNK", 1 << 18)  # inflated 256 KB at a time
    data, peak = _traced_read(path)
    assert isinstance(data, mmap.mmap)  # pages the decoder can drop as it goes
    assert data[:] == text
    # the spill size and a few pieces in flight are all that was on the heap: not the content
    assert peak < 4 << 20
    assert len(text) > 10 << 20
    data.close()


def test_gzip_content_stays_in_memory_where_no_temporary_file_can_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, text = _big_gzip(tmp_path)
    monkeypatch.setattr(sources, "SPILL", 1 << 20)

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sources.tempfile, "TemporaryFile", no_space)
    data = read_bytes(path)
    assert isinstance(data, bytearray)
    assert bytes(data) == text


def test_nccl_log_gzip_bomb_is_refused_at_the_ratio_limit(tmp_path: Path) -> None:
    # 128 members of 1 MiB of spaces each (about 1 KB compressed apiece): ~130 KB that
    # inflate to 128 MiB, over 100x the file + 64 MiB (~77 MiB), as for every other format;
    # the log used to be streamed to the end (up to --max-file-size, 8 GB)
    bomb = tmp_path / "nccl.log.gz"
    member = gzip.compress(b" " * (1 << 20), 9)
    bomb.write_bytes(gzip.compress(b"host:1:1 [0] NCCL INFO Bootstrap\n") + member * 128)
    limit = 100 * bomb.stat().st_size + (64 << 20)
    assert limit < 128 << 20
    seen = 0
    with pytest.raises(IngestError, match="gzip bomb"):
        for piece in stream.chunks(bomb, 8 << 30):
            seen += len(piece)
    assert seen <= limit


def test_an_ingest_does_not_hold_every_files_rows_until_it_commits(tmp_path: Path) -> None:
    """An ingest is one transaction. Each file's Arrow rows must be freed once DuckDB has copied
    them, not kept until the commit: with a view registered and dropped per file, DuckDB kept
    every file's table alive to the end (12 MB per 53.7 MB rank file in the parent, so a
    1,024-rank job grew the parent by about 12 GB)."""
    con = store.connect(tmp_path / "s.duckdb")
    held: list[int] = []
    files = sorted(DLRM.glob("*.gz"))
    try:
        store.ingest(
            con, "r", files, on_file=lambda path, result: held.append(pa.total_allocated_bytes())
        )
    finally:
        con.close()
    assert len(held) == len(files) == 8
    # what Arrow holds after each file, against after the first: flat, not growing with files
    assert held[-1] - held[0] < (held[0] + (1 << 20)) / 2


@pytest.mark.parametrize("own_limit", [None, "3GB"])
def test_an_ingest_is_folded_into_the_store_before_it_is_closed(tmp_path, own_limit):
    """After the commit the ingest checkpoints with DuckDB's pool capped (closing the store
    did it with the default pool; benchmarks/ingest_e2e.py's 64-rank job peaked at 1,393 MB
    that way, 658-671 MB capped), and leaves the connection's own limit as it found it."""
    db = tmp_path / "s.duckdb"
    con = store.connect(db)
    setting = "SELECT value FROM duckdb_settings() WHERE name = 'memory_limit'"
    try:
        if own_limit:
            con.execute(f"SET memory_limit = '{own_limit}'")
        before = con.execute(setting).fetchall()
        store.ingest(con, "r", sorted(DLRM.glob("*.gz")))
        wal = Path(f"{db}.wal")
        assert not wal.exists() or wal.stat().st_size == 0  # folded in before the close
        assert con.execute(setting).fetchall() == before
        assert con.execute("SELECT count(*) FROM ranks").fetchall() == [(8,)]
    finally:
        con.close()
