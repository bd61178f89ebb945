"""The replay's what-ifs by parallelism dimension on the real mesh runs over gloo (tests/data/mesh,
made by sample_traces/generate_mesh.py; tests/data/tp, generate_tp.py): tensor-parallel
communication 2x faster, experts balanced, and the unchanged replay against the measured step.
Truth: the generators' ground_truth.json (groups, collectives per step, the experts' routing),
the ProfilerStep durations read from the traces by plain Python, and a hand-made store."""

from __future__ import annotations

import gzip
import json
import statistics
from collections import defaultdict

import pytest
from conftest import DATA
from test_decomposition_sql import TWO, store_with

from commwall.analysis.db import open_db, run_id
from commwall.analysis.replay.dimensions import EXPERTS_BALANCED, dimension_whatifs, tp_key
from commwall.analysis.replay.engine import WhatIf, _load, job_step, replay, replay_section
from commwall.analysis.report.session import run_session
from commwall.analysis.steps.dimension import dimensions_section
from commwall.cli.main import main

MESH = DATA / "mesh"
SETS = {
    "dp2_tp2": MESH / "dp2_tp2",
    "fsdp4": MESH / "fsdp4",
    "fsdp4_straggler2": MESH / "fsdp4_straggler2",
    "moe4": MESH / "moe4",
    "tp": DATA / "tp" / "gloo_2rank_tp",
}
#: The what-if each set's dimension offers, and that dimension.
OFFERED = {"dp2_tp2": (tp_key(), "TP"), "tp": (tp_key(), "TP"), "moe4": (EXPERTS_BALANCED, "EP")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Per set: the replay section, the dimensions section and the what-ifs by dimension."""
    db = str(tmp_path_factory.mktemp("whatif_dims") / "s.duckdb")
    for name, path in SETS.items():
        assert main(["ingest", "--db", db, "--run", name, "--quiet", str(path)]) == 0
    con = open_db(db)
    out = {}
    for name in SETS:
        rid = run_id(con, name)
        with run_session(con, rid):
            steps = _load(con, rid)
            out[name] = (
                replay_section(con, rid),
                dimensions_section(con, rid),
                {w.key: w for w in dimension_whatifs(con, rid, steps)},
            )
    con.close()
    return out


def job_step_ms(path) -> float:
    """The job's step from the traces by hand: per step the longest ProfilerStep#N window over
    the ranks, then the median over steps (ms)."""
    per_step: dict[int, list[float]] = defaultdict(list)
    for f in sorted(path.glob("rank*.pt.trace.json.gz")):
        for e in json.loads(gzip.decompress(f.read_bytes()))["traceEvents"]:
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"):
                per_step[int(e["name"].split("#")[1])].append(e["dur"] / 1000)
    return statistics.median(max(v) for v in per_step.values())


@pytest.mark.parametrize("name", list(SETS))
def test_the_unchanged_replay_reproduces_the_run(runs, name):
    rep, _, _ = runs[name]
    assert rep["available"]
    assert abs(rep["replay_error"]) <= 0.05
    # the measured step is the traces' own: a step's window runs on to the next step's start,
    # a few µs past its ProfilerStep annotation's end (analysis/sql/steps.sql): the tolerance
    assert rep["measured_step_ms"] == pytest.approx(job_step_ms(SETS[name]), rel=0.01)
    assert rep["replayed_step_ms"] == pytest.approx(rep["measured_step_ms"], rel=0.05)


@pytest.mark.parametrize("name", list(SETS))
def test_a_dimension_whatif_appears_where_the_run_has_the_dimension(runs, name):
    rep, dims, offered = runs[name]
    keys = {w["key"] for w in rep["whatifs"]}
    want = OFFERED.get(name)
    assert set(offered) == ({want[0]} if want else set())
    assert keys & {tp_key(), EXPERTS_BALANCED} == set(offered)
    if not want:
        return
    key, dim = want
    w = next(w for w in rep["whatifs"] if w["key"] == key)
    exposed = next(r["exposed_ms"] for r in dims["run"] if r["dimension"] == dim)
    # a saving, never more than the dimension's exposed communication
    assert 0 <= w["saving_ms"] <= exposed
    assert w["step_ms"] == pytest.approx(rep["replayed_step_ms"] - w["saving_ms"])


def test_tensor_parallel_whatif_halves_the_tp_groups_instances(runs):
    truth = json.loads((SETS["dp2_tp2"] / "ground_truth.json").read_text())
    tp_groups = [g for g in truth["groups"] if g["role"] == "TP"]
    w = runs["dp2_tp2"][2][tp_key()]
    # every TP all-reduce of every step in each TP group, and nothing else: 5 x 3 x 2 = 30
    assert len(w.instance_scale) == (
        truth["tp_allreduces_per_step"] * len(truth["steps"]) * len(tp_groups)
    )
    assert {f for _, f in w.instance_scale} == {0.5}
    # on the 1-D tensor-parallel run every collective is TP: the same as all transfer 2x faster
    rep = runs["tp"][0]
    saving = {w["key"]: w["saving_ms"] for w in rep["whatifs"]}
    assert saving[tp_key()] == pytest.approx(saving["transfer_2x"])


def test_experts_balanced_scales_by_mean_over_max_pair(runs):
    truth = json.loads((SETS["moe4"] / "ground_truth.json").read_text())
    counts = {int(r): c for r, c in truth["send_counts"].items()}
    # the tokens each rank sends each other rank (a rank's own tokens stay): dispatch
    pairs = [c[d] for s, c in counts.items() for d in range(len(c)) if d != s]
    routed = statistics.mean(pairs) / max(pairs)  # 64 / 142
    # the combine sends them back (rank d returns counts[s][d] to s): the same pairs
    back = [counts[s][d] for d in counts for s in counts if s != d]
    assert sorted(back) == sorted(pairs)
    w = runs["moe4"][2][EXPERTS_BALANCED]
    factors = sorted({round(f, 9) for _, f in w.instance_scale})
    # the routed all-to-alls, and the even ones (the count exchange: no split sizes)
    assert factors == [pytest.approx(routed), 1.0]


# -- by hand: store TWO of test_decomposition_sql (one instance, transfer T = 20, step 100) -----
BY_HAND = [
    # the instance's transfer scaled like "transfer 2x faster": E = 40 + 10, ends at 90
    ("its instance halved", lambda ik: WhatIf("d", "d", instance_scale=((ik, 0.5),)), 90),
    # another instance's factor changes nothing
    ("another instance", lambda ik: WhatIf("d", "d", instance_scale=((ik + 1, 0.0),)), 100),
    # on top of transfer_scale: 20 x 0.5 x 0.5 = 5, ends at 85
    ("with transfer_scale",
     lambda ik: WhatIf("d", "d", transfer_scale=0.5, instance_scale=((ik, 0.5),)), 85),
]  # fmt: skip


@pytest.mark.parametrize("case,make,expected", BY_HAND, ids=[c[0] for c in BY_HAND])
def test_instance_scale_by_hand(case, make, expected):
    steps = _load(store_with(TWO), 1)
    (ik,) = steps.inst_key.tolist()
    assert job_step(replay(steps, make(ik)), "replayed_ns") == expected
