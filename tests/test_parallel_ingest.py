"""Several files parsed by worker processes land exactly as when parsed one by one, in order,
with the same all-or-nothing, keep-going and re-ingest behaviour."""

from __future__ import annotations

import pickle
import shutil

import pytest
from conftest import DLRM, SAMPLES

from commwall.cli.main import main
from commwall.ingest import store
from commwall.ingest.errors import IngestError
from commwall.ingest.exec import parallel
from commwall.ingest.options import ParseOptions

FILES = sorted(DLRM.glob("*.gz")) + sorted((SAMPLES / "gloo_4rank_compute").glob("*.gz"))[:1]
TABLES = ("ranks", "activities", "steps", "collectives")


def dump(con) -> dict[str, list]:
    out = {}
    for t in TABLES:
        cols = [c for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND column_name NOT IN ('file_id', 'run_id') ORDER BY ordinal_position", [t]
        ).fetchall()]  # fmt: skip
        out[t] = con.execute(f"SELECT {', '.join(cols)} FROM {t} ORDER BY ALL").fetchall()
    out["files"] = con.execute(
        "SELECT path, sha256, format, n_rows FROM files ORDER BY path"
    ).fetchall()
    return out


@pytest.fixture
def fresh(tmp_path):
    n = iter(range(100))

    def make():
        return store.connect(tmp_path / f"s{next(n)}.duckdb")

    return make


def test_workers_store_what_one_process_stores(fresh, monkeypatch):
    files = FILES[:8]  # the 8 DLRM ranks
    serial, pooled = fresh(), fresh()
    order, pools = [], []
    real = parallel.outcomes
    monkeypatch.setattr(parallel, "outcomes", lambda *a: pools.append(a[2]) or real(*a))
    s1 = store.ingest(serial, "r", files, ParseOptions(jobs=1))
    s2 = store.ingest(
        pooled, "r", files, ParseOptions(jobs=2), on_file=lambda p, r: order.append(p)
    )
    assert [f.status for f in s2.files] == ["ingested"] * 8
    assert order == files  # results come back in the files' order
    assert pools == [2]  # one pool of two workers (none for jobs=1)
    assert [f.rows for f in s1.files] == [f.rows for f in s2.files]
    assert dump(serial) == dump(pooled)
    assert len(dump(pooled)["activities"]) > 10_000


def test_a_bad_file_fails_the_run_or_is_recorded_with_keep_going(fresh, tmp_path):
    bad = tmp_path / "rank9.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": "soon"}]}')
    files = [*FILES[:3], bad, *FILES[3:5]]
    con = fresh()
    with pytest.raises(IngestError, match=r"rank9.json.*traceEvents\[0\]\.ts"):
        store.ingest(con, "r", files, ParseOptions(jobs=2))
    assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 0
    summary = store.ingest(con, "r", files, ParseOptions(jobs=2), keep_going=True)
    assert [f.status for f in summary.files] == ["ingested"] * 3 + ["failed"] + ["ingested"] * 2
    assert "rank9.json" in summary.files[3].error
    assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 5


def test_reingest_with_workers_skips_known_content(fresh, tmp_path):
    con = fresh()
    store.ingest(con, "r", FILES[:4], ParseOptions(jobs=2))
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(FILES[0], copy / FILES[0].name)
    again = store.ingest(
        con, "r", [*FILES[:4], copy / FILES[0].name, FILES[4]], ParseOptions(jobs=2)
    )
    assert [f.status for f in again.files] == ["skipped"] * 5 + ["ingested"]
    assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 5


def test_how_many_workers():
    assert parallel.workers_for(FILES[:1], 0, 8) == 1  # one file: it may use two processes itself
    assert parallel.workers_for(FILES, 0, 8) == 1  # under 64 MB in all: not worth starting workers
    assert parallel.workers_for(FILES, 3, 8) == 3
    assert parallel.workers_for(FILES[:2], 8, 8) == 2  # at most one per file
    assert parallel.workers_for(FILES, 1, 8) == 1


def test_ingest_errors_cross_processes_intact():
    e = pickle.loads(pickle.dumps(IngestError("/x/rank3.json", "truncated gzip file")))
    assert (e.path, e.problem, str(e)) == (
        "/x/rank3.json",
        "truncated gzip file",
        "/x/rank3.json: truncated gzip file",
    )


def test_cli_jobs_option(tmp_path, capsys):
    db = tmp_path / "c.duckdb"
    assert main(["ingest", str(DLRM / "*.gz"), "--db", str(db), "--jobs", "2", "--quiet"]) == 0
    assert "8 file(s) ingested" in capsys.readouterr().err
    assert main(["ingest", str(DLRM / "*.gz"), "--db", str(db), "--jobs", "-1"]) != 0
    assert "--jobs needs 0" in capsys.readouterr().err
