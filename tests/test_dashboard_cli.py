"""`commwall serve`, `commwall export`, `commwall demo --no-serve`, the packaged Streamlit
config, and the post-mortem renderers."""

from __future__ import annotations

import html
import json
import re

import pytest
from conftest import DLRM, ROOT, SAMPLES
from dashboard_support import ingest_dir, report_of

from commwall.analysis.db import open_db
from commwall.cli.commands import serve
from commwall.cli.main import main
from commwall.dashboard.export import postmortem, render_html, render_markdown

EVIL = "<script>alert(1)</script> **x** | y"


@pytest.fixture(scope="module")
def dlrm_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "s.duckdb"
    ingest_dir(db, "dlrm", DLRM)
    return db


def test_packaged_config_is_production_ready():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    cfg = tomllib.loads((ROOT / "dashboard" / ".streamlit" / "config.toml").read_text())
    assert cfg["browser"]["gatherUsageStats"] is False
    assert cfg["server"]["maxUploadSize"] * 2**20 >= 2e9  # MiB: at least 2 GB per file
    assert cfg["server"]["fileWatcherType"] == "none" and cfg["server"]["runOnSave"] is False
    assert cfg["server"]["headless"] is True and cfg["global"]["developmentMode"] is False


def test_serve_runs_the_packaged_app_from_its_directory():
    cmd = serve.streamlit_command("0.0.0.0", 9000)
    assert cmd[1:4] == ["-m", "streamlit", "run"]
    assert cmd[4] == str(serve.APP_DIR / "app.py") and (serve.APP_DIR / ".streamlit").is_dir()
    assert cmd[5:] == ["--server.address", "0.0.0.0", "--server.port", "9000"]


def test_serve_refuses_a_file_that_is_not_a_store(tmp_path, capsys):
    bad = tmp_path / "notes.duckdb"
    bad.write_text("not a database")
    assert main(["serve", "--db", str(bad), "--port", "1"]) == 2
    assert "cannot open database" in capsys.readouterr().err


@pytest.mark.parametrize("suffix,fmt", [(".html", "html"), (".md", "md")])
def test_export_writes_the_post_mortem(dlrm_db, tmp_path, suffix, fmt, capsys):
    out = tmp_path / f"dlrm{suffix}"
    assert main(["export", "--db", str(dlrm_db), "--run", "dlrm", "--out", str(out)]) == 0
    con = open_db(dlrm_db)
    assert out.read_text() == postmortem(con, "dlrm", fmt)
    con.close()
    assert main(["export", "--db", str(dlrm_db), "--run", "nope", "--out", str(out)]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err


def test_html_report_is_self_contained_and_shows_the_numbers(dlrm_db):
    report = report_of(dlrm_db, "dlrm")
    page = render_html(report)
    assert "communication wall" in page and "39.7%" in page
    assert f"{report['summary']['step_ms']:.3f}" in page
    for item in report["checklist"]:
        assert html.escape(item["title"]) in page
    assert not re.search(r"<(script|link|img|iframe)\b|\bsrc=|href=", page)


def test_strings_from_traces_are_escaped():
    report = {
        "run": EVIL,
        "summary": {"scope": "steps", "step_ms": 1.0},
        "nccl": {"present": True, "findings": [EVIL]},
    }
    page = render_html(report)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    md = render_markdown(report)
    assert "\\<script\\>" in md and "\\*\\*x\\*\\*" in md and "\\| y" in md


def test_demo_no_serve_ingests_and_prints(tmp_path, capsys):
    db = tmp_path / "demo.duckdb"
    assert main(["demo", "--db", str(db), "--no-serve"]) == 0
    lines = capsys.readouterr().out.splitlines()
    sets = sorted(d.name for d in SAMPLES.iterdir() if d.is_dir())
    # one line per run (its headline), then the store; the reports are one command away
    assert len(lines) == len(sets) + 1 and lines[-1].startswith(f"store: {db}")
    assert sorted(line.split(":")[0] for line in lines[:-1]) == sets
    fr_op = next(line for line in lines if line.startswith("fr_op: "))
    # sample_traces/fr_op/ground_truth.json: rank 1 calls all_reduce where the others all_gather
    assert "rank 1 called all-reduce where ranks 0, 2, 3 called all-gather" in fr_op
    assert main(["runs", "--db", str(db), "--format", "json"]) == 0
    runs = {r["run"] for r in json.loads(capsys.readouterr().out)}
    assert runs == set(sets)
