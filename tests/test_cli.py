"""The CLI end to end, in process: ingest, runs, report in every format, re-ingest no-op."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from conftest import DLRM, SAMPLES

from commwall.cli.main import build_parser, main

RANK_KEYS = {
    "rank", "tau_comp_ms", "tau_comm_ms", "overlap_ms", "eta", "gamma",
    "exposed_comm_ms", "idle_ms", "comm_overlap_fraction",
}  # fmt: skip
STEP_KEYS = {
    "rank", "step", "step_ms", "tau_comp_ms", "tau_comm_ms", "overlap_ms", "eta", "gamma",
    "exposed_comm_ms", "idle_ms",
}  # fmt: skip


@pytest.fixture(scope="module")
def dlrm_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "s.duckdb"
    assert main(["ingest", str(DLRM / "*.gz"), "--db", str(db), "--run", "dlrm", "--quiet"]) == 0
    return db


def report_json(db, run, capsys):
    assert main(["report", "--db", str(db), "--run", run, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_report_has_the_public_keys(dlrm_db, capsys):
    rep = report_json(dlrm_db, "dlrm", capsys)
    assert rep["run"] == "dlrm"
    assert len(rep["ranks"]) == 8 and len(rep["steps"]) == 8
    for r in rep["ranks"]:
        assert RANK_KEYS <= set(r)
    for s in rep["steps"]:
        assert STEP_KEYS <= set(s)


def test_report_identities(dlrm_db, capsys):
    rep = report_json(dlrm_db, "dlrm", capsys)
    for r in rep["ranks"] + rep["steps"]:
        assert r["exposed_comm_ms"] == pytest.approx(r["tau_comm_ms"] - r["overlap_ms"])
        assert r["eta"] == pytest.approx(r["overlap_ms"] / min(r["tau_comp_ms"], r["tau_comm_ms"]))
        assert r["gamma"] == pytest.approx(r["tau_comm_ms"] / r["tau_comp_ms"])
        assert r["comm_overlap_fraction"] == pytest.approx(r["overlap_ms"] / r["tau_comm_ms"])
        assert 0 <= r["eta"] <= 1
    for s in rep["steps"]:
        assert s["idle_ms"] <= s["step_ms"]


def test_text_and_csv_formats(dlrm_db, capsys):
    assert main(["report", "--db", str(dlrm_db), "--run", "dlrm"]) == 0
    text = capsys.readouterr().out
    assert "Per rank and step" in text and "tau_comm_ms" in text
    assert main(["report", "--db", str(dlrm_db), "--run", "dlrm", "--format", "csv"]) == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(df.scope.value_counts().sort_index().items()) == [("rank", 8), ("step", 8)]
    assert RANK_KEYS <= set(df.columns)


def test_runs_lists_files_ranks_formats(dlrm_db, capsys):
    assert main(["runs", "--db", str(dlrm_db), "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["files"], r["ranks"], r["formats"]) for r in runs] == [
        ("dlrm", 8, 8, "kineto")
    ]
    # the bytes stored are the files' sizes on disk, a whole number
    assert runs[0]["bytes"] == sum(p.stat().st_size for p in DLRM.glob("*.json.gz"))
    assert isinstance(runs[0]["bytes"], int)


def test_reingest_is_a_noop(dlrm_db, capsys):
    before = report_json(dlrm_db, "dlrm", capsys)
    assert main(["ingest", str(DLRM), "--db", str(dlrm_db), "--run", "dlrm", "--quiet"]) == 0
    assert "0 file(s) ingested, 8 already present" in capsys.readouterr().err
    assert report_json(dlrm_db, "dlrm", capsys) == before


def test_unknown_run_lists_runs(dlrm_db, capsys):
    assert main(["report", "--db", str(dlrm_db), "--run", "nope"]) == 2
    assert "dlrm" in capsys.readouterr().err


def test_gloo_run_many_runs_one_file(dlrm_db, capsys):
    d = SAMPLES / "gloo_4rank_sleep"
    assert main(["ingest", str(d), "--db", str(dlrm_db), "--run", "gloo", "--quiet"]) == 0
    rep = report_json(dlrm_db, "gloo", capsys)
    assert [r["rank"] for r in rep["ranks"]] == [0, 1, 2, 3]
    assert {s["step"] for s in rep["steps"]} == {2, 3, 4, 5, 6, 7}
    # real overlap: bucket all-reduces run during backward on gloo threads
    assert all(0 < s["eta"] < 1 for s in rep["steps"])
    assert main(["runs", "--db", str(dlrm_db), "--format", "json"]) == 0
    assert {r["run"] for r in json.loads(capsys.readouterr().out)} == {"dlrm", "gloo"}


def test_every_subcommand_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        assert p.description, f"commwall {name} has no description"
        helps = {a.help for a in sub._choices_actions if a.dest == name}
        assert helps and None not in helps, f"commwall {name} has no help line"


def test_text_report_reads_model_and_checklist_from_the_json(dlrm_db, capsys):
    d = SAMPLES / "gloo_4rank_compute"
    assert main(["ingest", str(d), "--db", str(dlrm_db), "--run", "compute", "--quiet"]) == 0
    rep = report_json(dlrm_db, "compute", capsys)
    assert main(["report", "--db", str(dlrm_db), "--run", "compute"]) == 0
    text = capsys.readouterr().out
    model = text.split("== Model\n")[1].split("\n== ")[0]
    step = model.splitlines()[2].split()
    assert step[0] == "step_ms"
    assert float(step[1]) == pytest.approx(rep["model"]["measured"]["step_ms"], abs=1e-3)
    assert float(step[2]) == pytest.approx(rep["model"]["predicted"]["step_ms"], abs=1e-3)
    checklist = text.split("== Checklist\n")[1].split("\n== ")[0]
    marks = [line.split()[0] for line in checklist.splitlines() if line.startswith("[")]
    want = {"attention": "[!]", "ok": "[ok]", "not_observable": "[?]", "not_applicable": "[-]"}
    assert sorted(marks) == sorted(want[i["status"]] for i in rep["checklist"])
    assert marks == sorted(marks, key=["[!]", "[ok]", "[?]", "[-]"].index)  # attention first
    assert "[!] Straggler nodes" in checklist  # rank 2 is the injected straggler
    assert "== Run\nfiles: 4 kineto | ranks: 4 (world size 4)" in text


@pytest.mark.parametrize(("n", "shown"), [(40, 40), (41, 40), (1024, 40)])
def test_long_text_tables_show_the_top_rows_and_count_the_rest(n, shown):
    """Above MAX_TEXT_ROWS (40) rows a text table shows the rows first by its key (here the
    slowest rank-steps: step_ms = rank, so ranks n-1 down to n-40) and counts the rest; 40 or
    fewer rows are shown whole, in their own order."""
    from commwall.cli.text_report import render_text  # noqa: PLC0415

    steps = [{"rank": r, "step": 1, "step_ms": float(r)} for r in range(n)]
    text = render_text({"run": "r", "steps": steps}, lambda df: df.to_string(index=False))
    body = text.split("== Per rank and step\n", 1)[1].splitlines()
    rows = [int(line.split()[0]) for line in body[1:] if line.strip()[:1].isdigit()]
    if n <= 40:
        assert rows == list(range(n)) and "rows shown" not in text
    else:
        assert rows == list(range(n - 1, n - 1 - shown, -1))
        assert body[-1] == (
            f"… 40 of {n:,} rows shown: the slowest rank-steps; every row: --format json or csv"
        )
