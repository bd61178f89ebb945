"""The CLI under hostile input and contention: trace text printed safely, options validated, a
failing report section or parser never takes a command down, a busy store named and waited for."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from commwall.analysis.api import Store
from commwall.analysis.report import build as report_mod
from commwall.analysis.safe_text import MAX_LINE
from commwall.cli.main import main
from commwall.dashboard.export import postmortem
from commwall.ingest.errors import IngestError
from commwall.ingest.formats import registry as formats
from tests.robust_support import hold_store
from tests.synthetic_traces import Scenario, simulate, write_kineto

HOSTILE_GPU = "NVIDIA \x1b[2J\x1b]0;pwned\x07H100" + "x" * 60_000
HOSTILE_HOST = "node\x1b[31m01\u202e"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two ranks of a synthetic run; rank 0 names its GPU and host with terminal escapes."""
    paths = write_kineto(
        simulate(Scenario(hosts=1, ranks_per_host=2, steps=2)), Path(tmp_path_factory.mktemp("t"))
    )
    doc = json.loads(paths[0].read_text())
    doc["deviceProperties"][0]["name"] = HOSTILE_GPU
    doc["host_name"] = HOSTILE_HOST
    paths[0].write_text(json.dumps(doc))
    return paths


@pytest.fixture(scope="module")
def db(traces: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "s.duckdb"
    assert main(["ingest", *map(str, traces), "--db", str(path), "--run", "r", "--quiet"]) == 0
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--run", "r"],
        ["report", "--run", "r", "--format", "csv"],
        ["runs"],
        ["runs", "--format", "csv"],
        ["collectives", "--run", "r"],
    ],
)
def test_trace_text_is_printed_escaped_and_short(db: Path, argv: list[str], capsys) -> None:
    assert main([argv[0], "--db", str(db), *argv[1:]]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert max(len(line) for line in out.splitlines()) <= MAX_LINE + 40
    if argv[0] == "report" and len(argv) == 3:  # the text report shows the run's GPU and host
        assert "\\x1b[2J" in out and "\\x1b[31m" in out


def test_json_output_escapes_control_characters(db: Path, capsys) -> None:
    assert main(["report", "--db", str(db), "--run", "r", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert HOSTILE_GPU in json.loads(out)["run_info"]["gpus"]  # the data itself is intact


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "lots"])
def test_max_file_size_must_be_a_positive_number(db: Path, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["ingest", str(db), "--db", str(db), "--max-file-size", value])
    assert e.value.code == 2
    assert "--max-file-size: needs a number of GB above 0" in capsys.readouterr().err


def _broken_section(con, rid):  # noqa: ANN001, ANN202
    raise ZeroDivisionError("float division by zero")


def test_a_failing_section_leaves_the_rest(db: Path, monkeypatch, capsys, caplog) -> None:
    monkeypatch.setitem(report_mod.SECTIONS, "stragglers", _broken_section)
    with caplog.at_level(logging.ERROR, logger="commwall.report"):
        assert main(["report", "--db", str(db), "--run", "r"]) == 0
    text = capsys.readouterr().out
    assert "not available: ZeroDivisionError: float division by zero" in text
    assert "== Per rank (whole trace)" in text
    assert any("stragglers" in r.getMessage() and r.exc_info for r in caplog.records)

    assert main(["report", "--db", str(db), "--run", "r", "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["stragglers"] is None and len(rep["ranks"]) == 2
    assert rep["analysis_errors"] == {"stragglers": "ZeroDivisionError: float division by zero"}

    api = Store(str(db)).run("r").report()
    assert api["stragglers"] is None and len(api["ranks"]) == 2
    html = postmortem(Store(str(db)).con, "r")
    assert "float division by zero" in html


def test_keep_going_with_a_crashing_parser(tmp_path, traces, monkeypatch, capsys) -> None:
    real = formats.parse

    def crashing(path, opts=None):  # noqa: ANN001, ANN202
        if Path(path) == traces[1]:
            raise KeyError("a parser bug")
        return real(path, opts)

    monkeypatch.setattr(formats, "parse", crashing)
    db = tmp_path / "k.duckdb"
    argv = ["ingest", *map(str, traces), "--db", str(db), "--run", "k", "--quiet", "--jobs", "1"]
    assert main([*argv, "--keep-going"]) == 1
    err = capsys.readouterr().err
    assert f"failed: {traces[1]}: commwall could not parse this file (KeyError" in err
    assert "Traceback" not in err
    assert Store(str(db)).run("k").ranks()["rank"].tolist() == [0]
    with pytest.raises(IngestError, match="please report it"):
        from commwall.ingest import store

        store.ingest(store.connect(tmp_path / "k2.duckdb"), "k", [traces[1]])


def test_ingest_summary_counts_clamped_events(tmp_path, traces, capsys) -> None:
    doc = json.loads(traces[1].read_text())
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    for e in xs[:3]:
        e["dur"] = -1
    path = tmp_path / traces[1].name
    path.write_text(json.dumps(doc))
    argv = ["ingest", str(path), "--db", str(tmp_path / "c.duckdb"), "--run", "c"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "; 3 event(s) clamped" in err
    assert f"{path}: 3 event(s) clamped (negative duration, stored as 0)" in err


def test_busy_store_names_its_holder_after_the_wait(tmp_path, traces, capsys) -> None:
    db = tmp_path / "b.duckdb"
    hold = hold_store(db)
    try:
        t = time.monotonic()
        rc = main(["ingest", str(traces[0]), "--db", str(db), "--quiet", "--wait", "1"])
        waited = time.monotonic() - t
    finally:
        hold.stdin.close()
        hold.wait(10)
    err = capsys.readouterr().err
    assert rc == 2 and 1 <= waited < 10
    assert f"in use by process {hold.pid} (" in err and "; waited 1 s — try again" in err
    assert "Traceback" not in err and "Conflicting lock" not in err


def test_ingest_waits_for_a_store_that_is_released(tmp_path, traces, capsys) -> None:
    db = tmp_path / "w.duckdb"
    hold = hold_store(db)
    release = subprocess.Popen(["sleep", "1.5"])
    try:
        import threading

        def let_go() -> None:
            release.wait()
            hold.stdin.close()
            hold.wait(10)

        t = threading.Thread(target=let_go)
        t.start()
        rc = main(["ingest", str(traces[0]), "--db", str(db), "--run", "w", "--quiet"])
        t.join()
    finally:
        release.kill()
    err = capsys.readouterr().err
    assert rc == 0
    assert f"in use by process {hold.pid}" in err and "waiting up to 60 s" in err
    assert Store(str(db)).run("w").ranks()["rank"].tolist() == [0]


def test_read_commands_say_the_store_is_busy(tmp_path, db, capsys) -> None:
    copy = tmp_path / "c.duckdb"
    copy.write_bytes(db.read_bytes())
    hold = hold_store(copy)
    try:
        rc = main(["runs", "--db", str(copy), "--wait", "0"])
    finally:
        hold.stdin.close()
        hold.wait(10)
    err = capsys.readouterr().err
    assert rc == 2 and f"in use by process {hold.pid}" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["runs"], ["report", "--run", "r", "--format", "json"]])
def test_read_commands_wait_for_a_store_that_is_released(tmp_path, db, capsys, command) -> None:
    # the dashboard holds the store while it computes a run's report; a reading command waits
    # for it (60 s by default) as `commwall ingest` does, instead of failing at once
    copy = tmp_path / "r.duckdb"
    copy.write_bytes(db.read_bytes())
    hold = hold_store(copy)
    release = threading.Timer(1.5, lambda: (hold.stdin.close(), hold.wait(10)))
    release.start()
    try:
        t = time.monotonic()
        rc = main([command[0], "--db", str(copy), *command[1:]])
        waited = time.monotonic() - t
    finally:
        release.join()
    err = capsys.readouterr().err
    assert rc == 0 and waited >= 1.0
    assert f"in use by process {hold.pid}" in err and "waiting up to 60 s" in err


def test_two_ingests_started_together_both_land_and_prepare(tmp_path) -> None:
    # Each step that opens the store waits for the other process: the second ingest for the
    # first's write, the first's preparation of analysis tables (after its commit) for the
    # second's write, which it used to meet with DuckDB's lock error.
    from conftest import DATA, ROOT, SAMPLES

    files = [
        DATA / "nccl" / "001_efa_ofi_2.6.4_p3dn_8node_64rank_aws_libfabric_ring_lines.log.gz",
        SAMPLES / "gloo_4rank_compute" / "rank2.pt.trace.json.gz",
    ]
    db = tmp_path / "two.duckdb"
    procs = []
    for name, path in zip("ab", files, strict=True):
        argv = [
            sys.executable,
            "-m",
            "commwall",
            "ingest",
            str(path),
            "--db",
            str(db),
            "--run",
            name,
        ]
        procs.append(
            subprocess.Popen(
                [*argv, "--quiet"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True,
            )
        )  # fmt: skip
        time.sleep(0.1)
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    for out in outs:
        assert "IO Error" not in out and "Could not set lock" not in out, out
        assert "not prepared" not in out, out
    with Store(str(db)) as s:
        assert sorted(s.runs()["run"]) == ["a", "b"]


def test_preparation_after_the_commit_waits_for_the_store(tmp_path, db, capsys) -> None:
    from commwall.cli.commands.ingest import _prepare

    copy = tmp_path / "p.duckdb"
    copy.write_bytes(db.read_bytes())
    hold = hold_store(copy)
    release = threading.Timer(1.0, lambda: (hold.stdin.close(), hold.wait(10)))
    release.start()
    try:
        _prepare(str(copy), "r", True, 60.0)
    finally:
        release.join()
    err = capsys.readouterr().err
    assert f"in use by process {hold.pid}" in err and "waiting up to 60 s" in err
    assert "not prepared" not in err and "IO Error" not in err


def test_preparation_gives_up_in_one_line_naming_the_holder(tmp_path, db, capsys) -> None:
    from commwall.cli.commands.ingest import _prepare

    copy = tmp_path / "g.duckdb"
    copy.write_bytes(db.read_bytes())
    hold = hold_store(copy)
    try:
        t = time.monotonic()
        _prepare(str(copy), "r", True, 0.5)
        waited = time.monotonic() - t
    finally:
        hold.stdin.close()
        hold.wait(10)
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert 0.5 <= waited < 5
    assert line.startswith("run 'r': analysis tables not prepared (the store ")
    assert f"is in use by process {hold.pid} (" in line and "; waited 0.5 s" in line
    assert "--wait SECONDS" in line
    assert "IO Error" not in err and "Could not set lock" not in err


def test_the_busy_error_names_the_pid_duckdb_reports(tmp_path) -> None:
    from commwall.ingest import store

    db = tmp_path / "e.duckdb"
    hold = hold_store(db)
    try:
        with pytest.raises(store.StoreBusyError) as caught:
            store.while_held(lambda: Store(str(db)), db, 0.2)
    finally:
        hold.stdin.close()
        hold.wait(10)
    e = caught.value
    assert e.pid == hold.pid and e.wait_s == 0.2
    assert str(e).startswith(f"the store {db} is in use by process {hold.pid} (")
    assert "\n" not in str(e) and "IO Error" not in str(e)
