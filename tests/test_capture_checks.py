"""`commwall ingest` of a `commwall capture` run directory (no torch): recognised by its
manifest.json, checked against what lands, and the summary on the report's run line.

The directories are built from the real 4-rank gloo set `sample_traces/gloo_4rank_sleep`
(every rank has ProfilerStep#2..#7 and world_size 4, sample_traces/README.md) with the
damage each test names done by hand: the truth is what was left out or changed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES

from commwall.cli.main import main
from commwall.ingest.store import connect

SET = SAMPLES / "gloo_4rank_sleep"
#: A real NCCL log (tests/data/nccl/README.md): stands for the log one host's process wrote.
NCCL_LOG = DATA / "nccl" / "027_tuning_table_2.29.7_pat_perop_socket.log.gz"


def make_capture(
    root: Path,
    ranks=(0, 1, 2, 3),
    settings=None,
    exit_status=0,
    infos=None,
    drop_step=None,
    nccl_logs=(),
) -> Path:
    """A capture directory: `ranks`' traces of SET, a manifest, the helper's records `infos`
    (rank -> dict), rank `drop_step[0]`'s ProfilerStep#`drop_step[1]` removed, and an NCCL log
    named after each host of `nccl_logs`."""
    for sub in ("kineto", "ranks", "fr", "nccl"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for r in ranks:
        src, dest = SET / f"rank{r}.pt.trace.json.gz", root / "kineto" / f"rank{r}.pt.trace.json.gz"
        if drop_step and drop_step[0] == r:
            trace = json.loads(gzip.decompress(src.read_bytes()))
            name = f"ProfilerStep#{drop_step[1]}"
            trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("name") != name]
            dest.write_bytes(gzip.compress(json.dumps(trace).encode()))
        else:
            shutil.copy(src, dest)
    for r, info in (infos or {}).items():
        (root / "ranks" / f"rank{r}.json").write_text(json.dumps({"rank": r, **info}))
    for host in nccl_logs:
        (root / "nccl" / f"{host}.4242.log").write_bytes(gzip.decompress(NCCL_LOG.read_bytes()))
    manifest = {
        "commwall_capture": 1,
        "command": ["torchrun", "--nproc-per-node", "4", "train.py"],
        "hosts": ["h0"],
        "start": {"utc": "2026-01-02T03:04:05+00:00", "ns": 1767323045000000000},
        "end": {"utc": "2026-01-02T03:05:05+00:00", "ns": 1767323105000000000},
        "exit_status": exit_status,
        "signal": None,
        "settings": {"nccl_debug": "INFO", "flight_recorder": True, **(settings or {})},
        "environment": {},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def ingest(root: Path, db: Path, capsys) -> tuple[int, str]:
    rc = main(["ingest", str(root), "--db", str(db), "--run", "cap", "--quiet", "--no-prepare"])
    return rc, capsys.readouterr().err


def stored(db: Path) -> list[tuple]:
    con = connect(db)
    try:
        return con.execute("SELECT exit_status, findings, summary FROM capture_runs").fetchall()
    finally:
        con.close()


def test_a_complete_capture_says_so(tmp_path, capsys):
    root = make_capture(tmp_path / "run")
    rc, err = ingest(root, tmp_path / "s.duckdb", capsys)
    assert rc == 0
    assert "run 'cap': 4 file(s) ingested" in err  # the manifest is checked, not parsed
    assert "no known format" not in err
    summary = "complete: traces from all 4 ranks, steps 2-7"
    assert f"run 'cap': capture {summary}" in err
    assert stored(tmp_path / "s.duckdb") == [(0, [], summary)]


@pytest.mark.parametrize(
    "damage, finding",
    [
        ({"ranks": (0, 1, 2)}, "traces from 3 of 4 ranks (none from rank 3)"),
        ({"ranks": (1,), "infos": {1: {"world_size": 8}}},
         "traces from 1 of 8 ranks (none from rank 0, 2, 3, 4, 5, 6, 7)"),
        ({"drop_step": (1, 2)},
         "ranks profiled different steps (rank 0: 2-7; rank 1: 3-7; rank 2: 2-7; rank 3: 2-7)"),
        ({"settings": {"flight_recorder": False}}, "Flight Recorder was off"),
        ({"infos": {r: {"flight_recorder_buffer": 0 if r == 2 else 2000} for r in range(4)}},
         "Flight Recorder was off on rank 2"),
        ({"exit_status": 1}, "the job exited with status 1"),
        ({"infos": {r: {"backend": "nccl", "host": f"h{r // 2}"} for r in range(4)},
          "nccl_logs": ("h0",)}, "no NCCL log for host h1"),
        ({"infos": {0: {"backend": "nccl", "host": "h0"}}, "settings": {"nccl_debug": "WARN"},
          "nccl_logs": ("h0",)}, "NCCL_DEBUG was WARN: the NCCL logs hold no INFO lines"),
        ({"settings": {"inspector": True}}, "NCCL Inspector was on but wrote nothing"),
    ],
)  # fmt: skip
def test_each_gap_is_found(tmp_path, capsys, damage, finding):
    root = make_capture(tmp_path / "run", **damage)
    rc, err = ingest(root, tmp_path / "s.duckdb", capsys)
    assert rc == 0
    ((status, findings, summary),) = stored(tmp_path / "s.duckdb")
    assert finding in findings
    assert summary == "incomplete: " + "; ".join(findings)
    assert f"run 'cap': capture {summary}" in err


def test_a_failed_job_without_dumps_is_named(tmp_path, capsys):
    root = make_capture(tmp_path / "run", exit_status=1)
    ingest(root, tmp_path / "s.duckdb", capsys)
    ((_, findings, _),) = stored(tmp_path / "s.duckdb")
    assert findings == ["the job exited with status 1", "the job failed but left no Flight "
                        "Recorder dump"]  # fmt: skip


def test_the_report_run_line_shows_the_checks(tmp_path, capsys):
    root = make_capture(tmp_path / "run", ranks=(0, 1, 2), settings={"flight_recorder": False})
    db = tmp_path / "s.duckdb"
    ingest(root, db, capsys)
    assert main(["report", "--db", str(db), "--run", "cap", "--format", "json"]) == 0
    expected = "incomplete: traces from 3 of 4 ranks (none from rank 3); Flight Recorder was off"
    assert json.loads(capsys.readouterr().out)["run_info"]["capture"] == expected
    assert main(["report", "--db", str(db), "--run", "cap"]) == 0
    text = capsys.readouterr().out
    run_line = text.split("== Run\n", 1)[1].split("\n", 1)[0]
    assert run_line.endswith(f" | capture: {expected}")


def test_a_run_not_captured_has_no_capture_line(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(SET), "--db", str(db), "--run", "plain", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--run", "plain", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_info"]["capture"] is None


def test_reingest_keeps_one_row(tmp_path, capsys):
    root = make_capture(tmp_path / "run")
    db = tmp_path / "s.duckdb"
    ingest(root, db, capsys)
    rc, err = ingest(root, db, capsys)
    assert rc == 0 and "0 file(s) ingested, 4 already present" in err
    assert len(stored(db)) == 1


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{not json", "cannot read it as JSON"),
        ('{"commwall_capture": 2}', "capture manifest version 2, this reads 1"),
        ('{"commwall_capture": 1, "command": "x", "start": {}, "settings": {}}',
         "'command' missing or not a list"),
    ],
)  # fmt: skip
def test_a_bad_manifest_stops_the_ingest_naming_it(tmp_path, capsys, text, problem):
    root = make_capture(tmp_path / "run")
    (root / "manifest.json").write_text(text)
    db = tmp_path / "s.duckdb"
    rc, err = ingest(root, db, capsys)
    assert rc == 2
    assert "manifest.json" in err and problem in err
    con = connect(db)
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    con.close()


def test_a_bad_rank_record_stops_the_ingest_naming_it(tmp_path, capsys):
    root = make_capture(tmp_path / "run")
    (root / "ranks" / "rank0.json").write_text('{"rank": "zero"}')
    rc, err = ingest(root, tmp_path / "s.duckdb", capsys)
    assert rc == 2 and "rank0.json" in err and "no integer 'rank'" in err


def test_someone_elses_manifest_is_an_ordinary_file(tmp_path, capsys):
    root = make_capture(tmp_path / "run")
    (root / "manifest.json").write_text('{"name": "not ours"}')
    rc, err = ingest(root, tmp_path / "s.duckdb", capsys)
    assert rc == 0 and "manifest.json" in err  # skipped, of no known format
    assert stored(tmp_path / "s.duckdb") == []


def test_the_overview_shows_what_the_capture_missed(tmp_path, capsys, monkeypatch):
    """The Overview says what the checks found, as a warning when the capture is incomplete."""
    from apptest_support import open_app

    root = make_capture(tmp_path / "run", ranks=(0, 1, 2))
    db = tmp_path / "s.duckdb"
    assert ingest(root, db, capsys)[0] == 0
    at = open_app(db, monkeypatch, tmp_path, "cap", "overview")
    warnings = [w.value.replace("\\", "") for w in at.warning]
    assert any("traces from 3 of 4 ranks (none from rank 3)" in w for w in warnings), warnings
