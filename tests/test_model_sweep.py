"""Real gloo all-reduce size sweeps (tests/data/model/gloo_sweep_*, made by
benchmarks/gloo_sweep.py): every round holds the generator's sizes in its order, the held-out
error keeps a round together, and where the time grows with the size the calibrated fit beats
the size-blind level, which the test recomputes on its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from model_sets import ingest_set

from commwall.analysis.model.calibrate import usable
from commwall.analysis.model.section import model_section
from commwall.analysis.report.session import run_session

DATA = Path(__file__).parent / "data" / "model"
SETS = ["gloo_sweep_2rank", "gloo_sweep_3rank"]


@pytest.fixture(scope="module", params=SETS)
def run(request, tmp_path_factory):
    con, rid, truth = ingest_set(DATA / request.param, tmp_path_factory.mktemp("sweep"))
    yield con, rid, truth
    con.close()


def _allreduces(con, rid):
    df = con.execute("SELECT * FROM collective_instances(?)", [rid]).df()
    return usable(df).sort_values("first_start_ns", kind="stable")


def test_every_round_holds_the_generators_sizes_in_order(run):
    con, rid, truth = run
    u = _allreduces(con, rid)
    assert set(u["n"]) == {truth["world_size"]}
    # ProfilerStep#1 ... #rounds, one round each (the generator's profiler schedule)
    assert sorted(u["step"].unique()) == list(range(1, truth["rounds"] + 1))
    for r, sizes in enumerate(truth["bytes"], start=1):
        assert u.loc[u["step"] == r, "bytes"].astype(int).tolist() == sizes


def test_fit_beats_the_size_blind_level_held_out_by_round(run):
    con, rid, truth = run
    with run_session(con, rid):  # as the report computes it: the run's tables once
        (f,) = model_section(con, rid)["fit"]["per_op"]
    assert f["heldout_method"] == "leave-one-step-out"
    # the baseline recomputed here: each round's times predicted by the median time of the
    # other rounds
    u = _allreduces(con, rid)
    t, step = u["time_s"].to_numpy(), u["step"].to_numpy()
    errors = np.concatenate(
        [np.abs(np.median(t[step != r]) - t[step == r]) / t[step == r] for r in np.unique(step)]
    )
    assert f["heldout_median_ape_size_blind"] == pytest.approx(np.median(errors))
    # sizes span 4 B to 16 MiB and an isolated all-reduce's time grows with them
    assert f["heldout_median_ape"] < f["heldout_median_ape_size_blind"]
