"""Browser uploads below the UI: generated names, all-or-nothing runs, concurrent sessions."""

from __future__ import annotations

import gzip
import threading

import pytest
from conftest import DATA, DLRM, SAMPLES
from dashboard_support import ingest_dir, report_of, steps_of, upload_files
from nccl_log_gen import Job, make_log

from commwall.dashboard import uploads
from commwall.dashboard.database import StoreBusy, StoreFile
from commwall.ingest import store


@pytest.fixture
def db(tmp_path):
    s = StoreFile(tmp_path / "s.duckdb")
    s.ensure()
    return s


@pytest.fixture
def root(tmp_path):
    return tmp_path / "uploads"


def runs_in(db):
    with db.reading() as con:
        return con.execute("SELECT name, notes FROM runs ORDER BY name").fetchall()


def test_upload_lands_the_run_like_the_cli(db, root, tmp_path):
    seen = []
    out = uploads.upload_run(
        db, "dlrm", upload_files(DLRM), root, notes="baseline", on_file=lambda i, o: seen.append(i)
    )
    assert out.stored and out.error is None
    assert [f.status for f in out.files] == ["ingested"] * 8
    assert sorted(r for f in out.files for r in f.ranks) == list(range(8))
    assert seen == list(range(8))  # per-file progress, in order
    assert runs_in(db) == [("dlrm", "baseline")]
    cli = tmp_path / "cli.duckdb"
    ingest_dir(cli, "dlrm", DLRM)
    assert report_of(db.path, "dlrm") == report_of(cli, "dlrm")


def test_formats_are_recognised_by_content(db, root, tmp_path):
    """An Nsight Systems export and an NCCL log, uploaded together under neutral names."""
    nsys = (DATA / "nsys" / "nsys_ai_2gpu" / "h100_2gpu_1s.sqlite.gz").read_bytes()
    log = make_log(Job(nodes=1, gpus=2, network="nvlink")).write(tmp_path / "x.log").read_bytes()
    out = uploads.upload_run(db, "nsys", [("profile.bin", nsys), ("stdout.txt", log)], root)
    assert out.stored, out.error
    assert [(f.format, f.ranks) for f in out.files] == [("nsys", [0, 1]), ("nccl_log", [])]
    assert report_of(db.path, "nsys")["nccl"]["present"]


def test_saved_names_are_generated_under_the_root(db, root):
    evil = [("../../etc/passwd", b"x"), ("/abs/rank3.json", b"y"), ("..", b"z")]
    folder, paths = uploads.save_files(evil, root)
    assert folder.parent == root
    for p in paths:
        assert p.parent == folder and not p.name.startswith(".")
    assert [p.name for p in paths] == ["000-passwd", "001-rank3.json", "002-file"]
    assert uploads.safe_name("a b/c;rm -rf *.json") == "c_rm_-rf_.json"


def test_a_bad_file_stores_nothing_and_says_why(db, root):
    junk = [("photo.png", b"\x89PNG\r\n\x1a\n\x00\x00"), ("empty.json", b""), ("x.json", b"{}")]
    out = uploads.upload_run(db, "dlrm", [*upload_files(DLRM), *junk], root)
    assert not out.stored and runs_in(db) == []
    bad = {f.name: f.error for f in out.files if f.status == "failed"}
    unknown = {f.name: f.error for f in out.files if f.status == store.UNKNOWN_FORMAT}
    # an empty file stops the upload; files of no known format would only have been left out
    assert set(bad) == {"empty.json"} and set(unknown) == {"photo.png", "x.json"}
    assert "unrecognised format" in unknown["photo.png"]
    assert "empty" in bad["empty.json"]
    assert "JSON but not a recognised trace" in unknown["x.json"]
    assert all(str(root) not in e for e in [*bad.values(), *unknown.values()])  # no server paths
    assert "1 file(s) could not be read" in out.error
    assert not any(root.iterdir())  # the saved copies are gone


def test_a_clash_found_while_storing_rolls_back(db, root):
    """Two files of the same rank parse fine alone; the clash is found in the transaction."""
    one = upload_files(DLRM)[0]
    twin = ("copy.json", gzip.decompress(one[1]))
    out = uploads.upload_run(db, "dlrm", [one, twin], root)
    assert not out.stored and runs_in(db) == []
    assert "rank 0 is already in this run" in out.error
    assert out.files[1].status == "failed"
    assert not any(root.iterdir())


def test_names_must_be_new_and_non_empty(db, root):
    assert uploads.upload_run(db, "dlrm", upload_files(DLRM), root).stored
    again = uploads.upload_run(db, "dlrm", upload_files(SAMPLES / "gloo_4rank_sleep"), root)
    assert not again.stored and "already exists" in again.error
    assert uploads.upload_run(db, "  ", upload_files(DLRM), root).error == "Give the run a name."
    assert uploads.upload_run(db, "x", [], root).error == "Choose at least one file."
    assert runs_in(db) == [("dlrm", None)]


def test_two_sessions_uploading_at_once_both_land_intact(db, root, tmp_path):
    sets = {"sleep": SAMPLES / "gloo_4rank_sleep", "compute": SAMPLES / "gloo_4rank_compute"}
    start = threading.Barrier(len(sets))
    results = {}

    def upload(name):
        files = upload_files(sets[name])
        start.wait()
        results[name] = uploads.upload_run(db, name, files, root)

    threads = [threading.Thread(target=upload, args=(n,)) for n in sets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.stored for r in results.values())
    for name, folder in sets.items():
        cli = tmp_path / f"{name}.duckdb"
        ingest_dir(cli, name, folder)
        assert steps_of(db.path, name) == steps_of(cli, name)


def test_rename_and_delete_remove_the_uploaded_copies(db, root):
    uploads.upload_run(db, "a", upload_files(SAMPLES / "gloo_4rank_sleep"), root)
    uploads.upload_run(db, "b", upload_files(SAMPLES / "gloo_4rank_compute"), root)
    assert uploads.rename_run(db, "a", "b") == "A run named 'b' already exists."
    assert uploads.rename_run(db, "nope", "c") == "There is no run named 'nope'."
    assert uploads.rename_run(db, "a", " after ") is None
    assert [r[0] for r in runs_in(db)] == ["after", "b"]
    assert len(list(root.iterdir())) == 2
    assert uploads.delete_run(db, "after", root)
    assert [r[0] for r in runs_in(db)] == ["b"] and len(list(root.iterdir())) == 1
    assert not uploads.delete_run(db, "after", root)


def test_a_store_held_by_another_process_is_reported_as_busy(db, root, tmp_path):
    import subprocess
    import sys

    hold = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb,sys; c=duckdb.connect({str(db.path)!r}); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    db.wait_s = 0.3
    try:
        assert hold.stdout.readline().strip() == "held"
        with pytest.raises(StoreBusy, match=f"in use by process {hold.pid} .*; waited 0.3 s"):
            uploads.upload_run(db, "x", upload_files(SAMPLES / "gloo_4rank_sleep"), root)
        with pytest.raises(StoreBusy, match=f"in use by process {hold.pid} .*; waited 0.3 s"):
            runs_in(db)
        assert not any(root.iterdir())
    finally:
        hold.stdin.close()
        hold.wait(10)


def test_the_dashboard_waits_for_a_store_another_process_releases(db, root, monkeypatch):
    from tests.robust_support import hold_store

    monkeypatch.setenv("COMMWALL_WAIT", "30")
    waiting = StoreFile(db.path)  # the wait `commwall serve --wait` passes to the server
    assert waiting.wait_s == 30.0
    hold = hold_store(db.path)
    release = threading.Timer(1.0, lambda: (hold.stdin.close(), hold.wait(10)))
    release.start()
    try:
        out = uploads.upload_run(waiting, "x", upload_files(SAMPLES / "gloo_4rank_sleep"), root)
        assert out.stored, out.error
        assert [r[0] for r in runs_in(waiting)] == ["x"]
    finally:
        release.join()
