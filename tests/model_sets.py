"""Real trace sets with a generator's ground_truth.json, ingested for the model's tests."""

from __future__ import annotations

import json
from pathlib import Path

from commwall.analysis import db
from commwall.ingest import store


def ingest_set(d: Path, tmp: Path):
    """(connection, run id, ground truth) of the Kineto set in folder `d`, stored under `tmp`;
    the caller closes the connection."""
    path = tmp / "s.duckdb"
    con = store.connect(path)
    store.ingest(con, d.name, sorted(d.glob("rank*.pt.trace.json.gz")))
    con.close()
    con = db.open_db(path)
    truth = json.loads((d / "ground_truth.json").read_text())
    return con, con.execute("SELECT run_id FROM runs").fetchone()[0], truth
