"""Real gloo runs whose DDP buckets span several message sizes (sample_traces/gloo_*_sizes,
made by sample_traces/generate_gloo.py --bucket-mb 0.001): the matched instances carry the
sizes DDP reports in ground_truth.json, and the model section reports held-out error for them
instead of crashing or claiming a calibration it does not have."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import SAMPLES
from model_sets import ingest_set

from commwall.analysis.model.calibrate import usable
from commwall.analysis.model.section import model_section

SETS = ["gloo_2rank_sizes", "gloo_3rank_sizes"]


@pytest.fixture(scope="module", params=SETS)
def run(request, tmp_path_factory):
    return ingest_set(SAMPLES / request.param, tmp_path_factory.mktemp("r"))


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
    # every instance lies in one of the generator's recorded steps (6 or 8 of them), and a
    # step is held out whole
    assert f["heldout_method"] == "leave-one-step-out"
    assert f["heldout_n"] == f["n"]
    # the status follows the held-out median error, the 15 % line and the size-blind level
    pct = 100 * f["heldout_median_ape"]
    level = f["heldout_median_ape_size_blind"]
    if f["heldout_median_ape"] > 0.15:
        assert f["status"] == f"fit too uncertain: held-out median error {pct:.1f} %"
    elif level < f["heldout_median_ape"]:
        assert f["status"].endswith(f"no better than the size-blind level ({100 * level:.1f} %)")
    else:
        assert f["status"] == "calibrated"
    assert m["status"] == f["status"]
