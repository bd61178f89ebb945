"""A pp 2 x dp 2 mesh of GPU 1F1B pipelines with batched isend / irecv and a slow stage
(tests/gpu_pipeline_traces.py), against the generator's truth by construction: two pipelines
(one per replica), each stage's compute and waiting, the gradient all-reduces of same-stage
ranks as DP and the pipelines' waiting as PP in the step by dimension, the unchanged replay,
and the replay with twice the micro-batches against the same mesh generated with 2m
micro-batches of half the work."""

from __future__ import annotations

import gpu_pipeline_traces as gp
import pytest
from test_pipeline_gpu import MORE_TOLERANCE, ingest

from commwall.analysis.db import open_db, run_id
from commwall.analysis.report.pipeline import pipeline_section
from commwall.analysis.report.session import run_session
from commwall.analysis.steps.dimension import dimensions_section

JOB = {"p": 2, "dp": 2, "schedule": "1f1b", "batched": True, "slow": 1}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    db, pipes = ingest({"mesh": JOB}, tmp_path_factory.mktemp("gpu_pp_dp"))
    con = open_db(db)
    rid = run_id(con, "mesh")
    with run_session(con, rid):
        yield pipes["mesh"], pipeline_section(con, rid), dimensions_section(con, rid)
    con.close()


def test_one_pipeline_per_replica(run):
    pipe, sec, _ = run
    assert sorted(p["ranks"] for p in sec["pipelines"]) == [[0, 2], [1, 3]]
    for p in sec["pipelines"]:
        assert p["slowest_stage"] == 1 and p["micro_batches"] == pipe.m
        for st in p["stages"]:
            assert st["compute_ms"] == round(pipe.compute_ns(st["rank"]) / 1e6, 3)
            assert st["wait_ms"] == round(pipe.wait_ns(st["rank"]) / 1e6, 3)


def test_pipeline_waiting_is_pp_and_the_gradient_all_reduce_dp(run):
    pipe, _, dims = run
    roles = {g["pg_desc"]: g["role"] for g in dims["groups"]}
    assert roles["mesh_pp"] == "PP" and roles["mesh_dp"] == "DP"
    pp = {x["rank"]: x["exposed_wait_ms"] for x in dims["ranks"] if x["dimension"] == "PP"}
    assert pp == pytest.approx({r: pipe.wait_ns(r) / 1e6 for r in range(pipe.world)}, abs=1e-6)
    dp = {x["rank"] for x in dims["ranks"] if x["dimension"] == "DP"}
    assert dp == set(range(pipe.world))


def test_the_replay_unchanged_and_with_twice_the_micro_batches(run):
    pipe, sec, _ = run
    twice = gp.build(gp.Pipe(**{**JOB, "m": 2 * pipe.m, "scale": 0.5}))
    for p in sec["pipelines"]:
        assert p["step_ms"] == pytest.approx(pipe.step_ns() / 1e6, rel=0.05)
        assert p["micro_batches_2m_step_ms"] == pytest.approx(
            twice.step_ns() / 1e6, rel=MORE_TOLERANCE
        )
