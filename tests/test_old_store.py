"""A store made before columns were added to the schema (collectives.peer, pg_ranks, in_splits,
out_splits; nccl_test_results.n_nodes), opened read-only: every report reads them as NULL and
gives the answer a store of today's schema gives (analysis/db.py fill_later_columns)."""

from __future__ import annotations

import json
import shutil

import duckdb
from conftest import SAMPLES

from commwall.analysis.db import LATER_COLUMNS
from commwall.cli.main import main


def report(db, run, capsys) -> dict:
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--run", run, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_store_without_the_later_columns_reports_as_before(tmp_path, capsys):
    new = tmp_path / "new.duckdb"
    for run in ("gloo_4rank_sleep", "dlrm_8rank"):
        assert main(["ingest", str(SAMPLES / run), "--db", str(new), "--run", run, "--quiet"]) == 0
    old = tmp_path / "old.duckdb"
    shutil.copy(new, old)
    con = duckdb.connect(str(old))
    for table, cols in LATER_COLUMNS.items():
        for col in cols:
            con.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {col}")
    con.close()
    for run in ("gloo_4rank_sleep", "dlrm_8rank"):
        want, got = report(new, run, capsys), report(old, run, capsys)
        assert got["diagnosis"]["headline"] == want["diagnosis"]["headline"]
        assert got["summary"] == want["summary"] and got["stragglers"] == want["stragglers"]
    con = duckdb.connect(str(old), read_only=True)  # nothing was written to the old store
    cols = {r[0] for r in con.execute("DESCRIBE collectives").fetchall()}
    con.close()
    assert not cols & set(LATER_COLUMNS["collectives"])
