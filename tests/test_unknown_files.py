"""Files of no known format beside a run's traces (a job's README, its fault-injection log, a
JSON of metrics, a picture): skipped and listed when found in a directory or an upload; an error
when named on their own; a damaged file of a known format still stops the ingest."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from conftest import SAMPLES

from commwall.cli.main import main
from commwall.dashboard import uploads
from commwall.dashboard.database import StoreFile
from commwall.ingest import store

SLEEP = SAMPLES / "gloo_4rank_sleep"
#: Files a run folder holds beside its traces, of no format commwall reads.
STRANGERS = {
    "fault_injection.log": "2025-01-01 10:00:00 injecting GPU_ERROR into ranks 9, 14\n",
    "metrics.json": json.dumps([{"step": 1, "loss": 2.5}, {"step": 2, "loss": 2.4}]),
    "notes.txt": "rerun of job 42 with the new NCCL\n",
    "plot.png": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
}


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(SLEEP, d)
    for name, text in STRANGERS.items():
        (d / name).write_bytes(text.encode("latin-1"))
    return d


def test_a_directory_skips_and_lists_files_of_no_known_format(run_dir, tmp_path, capsys):
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "r", "--quiet", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert "skipped 4 files of no known format: fault_injection.log, metrics.json, notes.txt, " \
        "plot.png" in err  # fmt: skip
    con = store.connect(db)
    try:
        n = con.execute("SELECT count(*) FROM files").fetchone()[0]
    finally:
        con.close()
    assert n == len(list(SLEEP.glob("rank*.pt.trace.json.gz")))  # every trace, nothing else


def test_a_file_named_on_its_own_must_be_known(run_dir, tmp_path, capsys):
    db = str(tmp_path / "s.duckdb")
    args = ["ingest", "--db", db, "--run", "r", "--quiet", str(run_dir), str(run_dir / "notes.txt")]
    assert main(args) == 2
    assert "notes.txt: no NCCL log lines found" in capsys.readouterr().err


def test_a_damaged_file_of_a_known_format_still_stops_the_ingest(run_dir, tmp_path, capsys):
    trace = next(run_dir.glob("rank1.pt.trace.json.gz"))
    data = trace.read_bytes()
    trace.write_bytes(data[: len(data) // 2])  # a truncated gzip of a Kineto trace
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "r", "--quiet", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "rank1.pt.trace.json.gz: truncated gzip" in err and "nothing was stored" in err


def test_an_upload_skips_and_lists_them_too(run_dir, tmp_path):
    db = StoreFile(tmp_path / "u.duckdb")
    files = [(p.name, p.read_bytes()) for p in sorted(run_dir.iterdir()) if p.is_file()]
    files = [f for f in files if not f[0].startswith("README")]
    out = uploads.upload_run(db, "u", files, tmp_path / "uploads")
    assert out.stored, out.error
    by_name = {f.name: f for f in out.files}
    # the sample folder's ground_truth.json too (a directory walk skips it by name)
    unknown = {n for n, f in by_name.items() if f.status == store.UNKNOWN_FORMAT}
    assert unknown == set(STRANGERS) | {"ground_truth.json"}
    assert uploads.shown_status(by_name["notes.txt"].status) == "no known format, skipped"
    assert {f.status for n, f in by_name.items() if n.startswith("rank")} == {"ingested"}


def test_an_upload_of_only_such_files_stores_nothing(tmp_path):
    db = StoreFile(tmp_path / "u.duckdb")
    out = uploads.upload_run(db, "u", [("notes.txt", b"hello\n")], tmp_path / "uploads")
    assert not out.stored and out.files[0].status == "failed"
    assert "no NCCL log lines found" in (out.files[0].error or "")


def test_gzip_of_an_unknown_file_is_unknown_too(run_dir, tmp_path, capsys):
    (run_dir / "notes.txt.gz").write_bytes(gzip.compress(b"just words\n"))
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "r", "--quiet", str(run_dir)]) == 0
    assert "notes.txt.gz" in capsys.readouterr().err
