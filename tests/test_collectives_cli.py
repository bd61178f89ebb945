"""`commwall collectives` in process: every view and format on the DLRM set, errors."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from conftest import DLRM

from commwall.cli.main import main


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "s.duckdb"
    assert main(["ingest", str(DLRM / "*.gz"), "--db", str(path), "--run", "dlrm", "--quiet"]) == 0
    return str(path)


def run(capsys, *args):
    code = main(["collectives", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_instances_json(db, capsys):
    code, out, _ = run(capsys, "--db", db, "--run", "dlrm", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 8
    assert {"op", "instance", "n_ranks", "last_rank", "transfer_ns", "busbw_GBps"} <= set(rows[0])
    assert [r["last_rank"] for r in rows].count(7) == 5


def test_instances_text_and_op_filter(db, capsys):
    code, out, _ = run(capsys, "--db", db, "--run", "dlrm", "--op", "allreduce")
    lines = out.strip().splitlines()
    assert code == 0 and lines[0].split()[:3] == ["op", "pg_name", "instance"]
    assert len(lines) == 4 and all(line.split()[0] == "allreduce" for line in lines[1:])


@pytest.mark.parametrize("view,n", [("ranks", 64), ("ops", 2), ("clock", 8), ("problems", 0)])
def test_views_csv(db, capsys, view, n):
    code, out, _ = run(capsys, "--db", db, "--run", "dlrm", "--view", view, "--format", "csv")
    assert code == 0
    df = pd.read_csv(io.StringIO(out)) if out.strip() else pd.DataFrame()
    assert len(df) == n
    if view == "ranks":
        assert df.groupby(["op", "instance"])["is_last"].sum().eq(1).all()


def test_errors(db, capsys, tmp_path):
    code, _, err = run(capsys, "--db", db, "--run", "nope")
    assert code == 2 and "no run named 'nope'" in err
    code, _, err = run(capsys, "--db", str(tmp_path / "missing.duckdb"), "--run", "x")
    assert code == 2 and "no such database" in err
