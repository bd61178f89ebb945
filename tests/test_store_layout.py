"""How an ingest lays its rows out in the store: packed row groups, no blocks left behind, and
the connection's thread setting as the caller had it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from commwall.ingest import store
from commwall.ingest.errors import IngestError

EVENTS = 130_000  # per rank file: just over one of DuckDB's row groups (122,880 rows)


def _rank_files(tmp_path: Path, ranks: int) -> list[Path]:
    """Generated Kineto traces of EVENTS complete events each (different content per rank)."""
    out = []
    for r in range(ranks):
        events = b",".join(
            b'{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": %d, "dur": 1}'
            % (i + r)
            for i in range(EVENTS)
        )
        path = tmp_path / f"rank{r}.json"
        path.write_bytes(b'{"traceEvents": [' + events + b"]}")
        out.append(path)
    return out


def _blocks(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    used, free = con.execute(
        "SELECT used_blocks, free_blocks FROM pragma_database_size()"
    ).fetchone()
    return used, free


def test_an_ingest_leaves_no_unused_blocks(tmp_path: Path) -> None:
    """Each file just over a row group, on four threads: an insert split across them wrote a
    partial row group per thread, and the checkpoint that packed them left the old blocks free
    in the file (12 blocks, one free, for these two files; 214 MB against 125 MB for
    benchmarks/ingest_e2e.py's 64 ranks)."""
    con = store.connect(tmp_path / "s.duckdb")
    con.execute("SET threads = 4")
    store.ingest(con, "r", _rank_files(tmp_path, 2))
    assert con.execute("SELECT count(*) FROM activities").fetchone() == (2 * EVENTS,)
    used, free = _blocks(con)
    assert free == 0 and used > 0
    groups = con.execute(
        "SELECT row_group_id, max(count) FROM pragma_storage_info('activities') GROUP BY ALL "
        "ORDER BY 1"
    ).fetchall()
    assert [n for _, n in groups] == [122_880, 122_880, 2 * EVENTS - 2 * 122_880]
    assert con.execute("SELECT current_setting('threads')").fetchone() == (4,)
    con.close()


def test_a_failed_ingest_gives_the_threads_back(tmp_path: Path) -> None:
    (bad := tmp_path / "rank1.json").write_bytes(b'{"traceEvents": [{"ph": "X", "ts": ')
    con = store.connect(tmp_path / "s.duckdb")
    con.execute("SET threads = 3")
    with pytest.raises(IngestError, match="rank1.json"):
        store.ingest(con, "r", [*_rank_files(tmp_path, 1), bad])
    assert con.execute("SELECT current_setting('threads')").fetchone() == (3,)
    assert con.execute("SELECT count(*) FROM activities").fetchone() == (0,)  # whole or not at all
    con.close()
