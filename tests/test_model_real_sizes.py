"""Real gloo runs whose DDP buckets span several message sizes (sample_traces/gloo_*_sizes,
made by sample_traces/generate_gloo.py --bucket-mb 0.001): the matched instances carry the
sizes DDP reports in ground_truth.json, and the model section reports held-out error for them
instead of crashing or claiming a calibration it does not have."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import SAMPLES

from analysis import db
from analysis.model.calibrate import usable
from analysis.model.section import model_section
from ingest import store

SETS = ["gloo_2rank_sizes", "gloo_3rank_sizes"]


@pytest.fixture(scope="module", params=SETS)
def run(request, tmp_path_factory):
    d = SAMPLES / request.param
    path = tmp_path_factory.mktemp("r") / "s.duckdb"
    con = store.connect(path)
    store.ingest(con, request.param, sorted(d.glob("rank*.pt.trace.json.gz")))
    con.close()
    con = db.open_db(path)
    truth = json.loads((d / "ground_truth.json").read_text())
    return con, con.execute("SELECT run_id FROM runs").fetchone()[0], truth


def test_instances_carry_the_bucket_sizes_ddp_reported(run):
    con, rid, truth = run
    u = usable(con.execute("SELECT * FROM collective_instances(?)", [rid]).df())
    assert set(u["n"]) == {truth["world_size"]}
    per_step = Counter(4 * n for n in truth["bucket_numel"])  # float32 gradients, 4 B each
    for step in truth["steps"]:
        assert Counter(u.loc[u["step"] == step, "bytes"].astype(int)) == per_step


def test_model_reports_held_out_error(run):
    con, rid, truth = run
    m = model_section(con, rid)
    (f,) = m["fit"]["per_op"]
    assert f["op"] == "allreduce" and f["n"] == len(truth["steps"]) * len(truth["bucket_numel"])
    assert f["heldout_method"] == ("leave-one-out" if f["n"] <= 60 else "10-fold")
    assert f["heldout_n"] == f["n"]
    # the status follows the held-out median error and the 15 % line
    if f["heldout_median_ape"] <= 0.15:
        assert f["status"] == "calibrated"
    else:
        pct = 100 * f["heldout_median_ape"]
        assert f["status"] == f"fit too uncertain: held-out median error {pct:.1f} %"
    assert m["status"] == f["status"]
