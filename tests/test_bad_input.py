"""Bad input: each case names the file and the problem, exits non-zero, stores nothing, and
leaves earlier runs intact; --keep-going lands the good files."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import duckdb
import pytest
from conftest import DLRM

from commwall.cli.main import main

GOOD = sorted(DLRM.glob("*.gz"))


def make_empty(p):
    p.write_bytes(b"")


def make_truncated_gzip(p):
    p.write_bytes(GOOD[0].read_bytes()[:20000])


def make_not_json(p):
    p.write_bytes(b"\x00\x01binary garbage \xff\xfe" * 100)


def make_json_not_trace(p):
    p.write_text(json.dumps({"hello": "world", "schemaVersion": 1}))


def make_json_array_not_trace(p):
    p.write_text(json.dumps([{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.4}]))  # a metrics log


def make_tagged_text(p):
    # Open MPI's --tag-output in front of a line that is no NCCL line: read as a log, and said so
    p.write_text("[1,3]<stdout>:epoch 1 loss 0.5\n[1,3]<stdout>:epoch 2 loss 0.4\n")


def make_no_events(p):
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))


def make_wrong_types(p):
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 3}
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [ev]}))


def make_broken_json(p):
    with gzip.open(p, "wt") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "a"')


def make_gzip_header_only(p):
    p.write_bytes(GOOD[0].read_bytes()[:10])  # was reported as "file is empty"


def make_fifo(p):
    os.mkfifo(p)  # opening it would wait for a writer forever


CASES = [
    ("empty.json", make_empty, "file is empty"),
    ("fifo_rank1.json", make_fifo, "not a regular file"),
    ("header_rank1.json.gz", make_gzip_header_only, "truncated gzip"),
    ("truncated.json.gz", make_truncated_gzip, "truncated gzip"),
    ("binary.json", make_not_json, "unrecognised format"),
    ("other.json", make_json_not_trace, "no 'traceEvents' array"),
    # a JSON array used to be taken for a text log: "no NCCL log lines found"
    ("metrics.json", make_json_array_not_trace, "JSON but not a recognised trace"),
    ("tagged.log", make_tagged_text, "no NCCL log lines found"),
    ("noevents.json", make_no_events, "no complete ('X') events"),
    ("types_rank1.json", make_wrong_types, "traceEvents[0].ts"),
    ("broken_rank1.json.gz", make_broken_json, "not valid JSON"),
]


@pytest.fixture
def db_with_run(tmp_path):
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(DLRM), "--db", str(db), "--run", "good", "--quiet"]) == 0
    return db


def run_counts(db):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT r.name, count(DISTINCT f.file_id), (SELECT count(*) FROM activities a "
            "WHERE a.run_id = r.run_id) FROM runs r LEFT JOIN files f USING (run_id) "
            "GROUP BY r.run_id, r.name ORDER BY r.name"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("name,make,message", CASES, ids=[c[0] for c in CASES])
def test_bad_file_is_named_and_nothing_stored(tmp_path, capsys, db_with_run, name, make, message):
    before = run_counts(db_with_run)
    bad = tmp_path / name
    make(bad)
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(GOOD[0], good)
    rc = main(["ingest", str(good), str(bad), "--db", str(db_with_run), "--run", "new", "--quiet"])
    err = capsys.readouterr().err
    assert rc != 0
    assert str(bad) in err and message in err
    assert "nothing was stored" in err
    assert run_counts(db_with_run) == before  # no partial run, earlier run intact


def test_keep_going_lands_the_good_files(tmp_path, capsys, db_with_run):
    bad = tmp_path / "empty.json"
    make_empty(bad)
    args = ["ingest", str(DLRM), str(bad), "--db", str(db_with_run), "--run", "kg"]
    rc = main([*args, "--keep-going", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1 and "file is empty" in err and "8 file(s) ingested" in err
    counts = dict((n, f) for n, f, _ in run_counts(db_with_run))
    assert counts == {"good": 8, "kg": 8}


def test_huge_file_is_refused_by_size_limit(tmp_path, capsys, db_with_run):
    rc = main(
        [
            "ingest",
            str(GOOD[0]),
            "--db",
            str(db_with_run),
            "--run",
            "x",
            "--max-file-size",
            "0.0001",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "over the limit" in err and str(GOOD[0]) in err


def test_gzip_bomb_stops_at_the_limit(tmp_path, capsys, db_with_run):
    bomb = tmp_path / "bomb_rank0.json.gz"
    with gzip.open(bomb, "wb") as f:
        f.write(b'{"traceEvents": [' + b" " * (50 << 20))
    rc = main(
        ["ingest", str(bomb), "--db", str(db_with_run), "--run", "b", "--max-file-size", "0.01"]
    )
    assert rc != 0 and "over the limit" in capsys.readouterr().err


def test_same_rank_twice_in_a_run_is_refused(tmp_path, capsys, db_with_run):
    copy = tmp_path / "worker0_copy.json"
    copy.write_bytes(gzip.decompress(GOOD[0].read_bytes()))
    rc = main(["ingest", str(copy), "--db", str(db_with_run), "--run", "good", "--quiet"])
    assert rc != 0 and "rank 0 is already in this run" in capsys.readouterr().err
    assert dict((n, f) for n, f, _ in run_counts(db_with_run)) == {"good": 8}


def test_not_a_database(tmp_path, capsys):
    db = tmp_path / "junk.duckdb"
    db.write_text("not a database")
    rc = main(["ingest", str(GOOD[0]), "--db", str(db), "--quiet"])
    assert rc != 0 and "cannot open database" in capsys.readouterr().err
