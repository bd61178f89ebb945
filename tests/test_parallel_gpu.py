"""FSDP and expert-parallel jobs on GPU traces in the modern layout (tests/gpu_parallel_traces.py:
FSDP2's `_allgather_base` / `_reduce_scatter_base` in a `mesh_dp_shard` group, with and without
a compute straggler; a mixture of experts' `all_to_all` in a `mesh_ep` group with one rank
receiving HOT_FACTOR x the tokens), against the generator's truth by construction: every
call's group, the instances matched within it with each rank's wait, the roles, the step by
dimension (FSDP's gathers and reduce-scatters apart; the all-to-alls' bytes per rank pair and
the top receiver), the straggler flagged and named in the headline, and the unchanged replay."""

from __future__ import annotations

import json
from collections import Counter

import gpu_parallel_traces as gpt
import pytest
from test_dimension_gpu import truth as sweep

from commwall.analysis.db import open_db, run_id
from commwall.analysis.report.build import build_report
from commwall.cli.main import main

#: name -> the job (4 ranks each).
JOBS = {
    "fsdp": lambda: gpt.Fsdp(),
    "fsdp_slow": lambda: gpt.Fsdp(slow=2),
    "moe": lambda: gpt.Moe(hot=1),
}
#: The rank each job's diagnosis should name (None: no straggler).
LATE = {"fsdp": None, "fsdp_slow": 2, "moe": 1}
ROLE = {"fsdp": ("mesh_dp_shard", "FSDP"), "fsdp_slow": ("mesh_dp_shard", "FSDP"),
        "moe": ("mesh_ep", "EP")}  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu_parallel")
    db = str(d / "s.duckdb")
    jobs = {}
    for name, make in JOBS.items():
        jobs[name] = gpt.build(make())
        gpt.write(jobs[name], d / name)
        args = ["ingest", "--db", db, "--run", name, "--quiet", "--no-prepare", str(d / name)]
        assert main(args) == 0
    con = open_db(db)
    out = {}
    for name, job in jobs.items():
        rid = run_id(con, name)
        out[name] = {
            "job": job,
            "report": build_report(con, name, keep_going=False),
            "calls": con.execute(
                "SELECT rank, op, name, pg_name, pg_desc, pg_ranks, out_bytes FROM collectives "
                "WHERE run_id = ?",
                [rid],
            ).fetchall(),
            "instances": con.execute(
                "SELECT pg_name, op, instance, list(rank ORDER BY rank), "
                "list((rank, raw_ts, wait_ns)) FROM collective_ranks(?) GROUP BY ALL",
                [rid],
            ).fetchall(),
        }
    yield out
    con.close()


def _calls(job: gpt.Job) -> list[tuple[int, gpt.Item, int]]:
    """(rank, item, absolute start) of every call of every step."""
    return [(r, it, job.step_start(k) + it.start)  # type: ignore[operator]
            for r in job.programs for k in range(job.steps) for it in job.colls(r)]  # fmt: skip


@pytest.mark.parametrize("name", JOBS)
def test_every_call_carries_its_group(runs, name):
    r = runs[name]
    job = r["job"]
    want = Counter(
        (rank, it.kind, gpt.KERNEL[it.kind], job.pg_name, job.pg_desc, json.dumps(list(range(4))))
        for rank, it, _ in _calls(job)
    )
    got = Counter(tuple(c[:6]) for c in r["calls"])
    assert got == want


@pytest.mark.parametrize("name", JOBS)
def test_instances_are_matched_within_the_group_with_each_ranks_wait(runs, name):
    r = runs[name]
    job = r["job"]
    n_calls = len(job.colls(0)) * job.steps
    assert len(r["instances"]) == n_calls
    truth = {(rank, ts): it.wait for rank, it, ts in _calls(job)}
    seen = {}
    for pg, _, _, ranks, rows in r["instances"]:
        assert pg == job.pg_name and ranks == list(range(job.world))
        seen.update({(rank, ts): wait for rank, ts, wait in rows})
    assert seen == truth
    # by hand: the FSDP straggler's peers wait for it in the reduce-scatter of the last layer,
    # 200 µs (its backward of layer 2 ends at 1060 µs, theirs at 860 µs)
    if name == "fsdp_slow":
        rs2 = next(it for it in job.programs[0] if it.name == "rs2")
        assert rs2.wait == 200_000


@pytest.mark.parametrize("name", JOBS)
def test_the_role_comes_from_the_group_name(runs, name):
    dims = runs[name]["report"]["dimensions"]
    desc, role = ROLE[name]
    roles = {(g["pg_desc"], g["role"], g["source"]) for g in dims["groups"]}
    assert roles == {(desc, role, "name")}
    assert dims["dimensions"] == [role]


@pytest.mark.parametrize("name", JOBS)
def test_the_step_by_dimension_equals_the_schedule(runs, name):
    r = runs[name]
    job, dims = r["job"], r["report"]["dimensions"]
    want = sweep(job)  # per rank: (key, 'transfer' | 'wait') -> ns per step
    dim = ROLE[name][1]
    for rank in range(job.world):
        (mine,) = [x for x in dims["ranks"] if x["rank"] == rank]
        assert mine["dimension"] == dim
        for part in ("transfer", "wait"):
            total = sum(v for (_, p), v in want[rank].items() if p == part)
            assert mine[f"exposed_{part}_ms"] * 1e6 == pytest.approx(total, abs=1), (rank, part)
    if dim != "FSDP":
        assert dims["fsdp"] is None
        return
    for key, word in (("FSDP all-gather", "allgather"), ("FSDP reduce-scatter", "reduce_scatter")):
        mean = {p: sum(want[k].get((key, p), 0.0) for k in want) / job.world
                for p in ("transfer", "wait")}  # fmt: skip
        assert dims["fsdp"][f"{word}_exposed_ms"] * 1e6 == pytest.approx(sum(mean.values()), abs=1)
        assert dims["fsdp"][f"{word}_exposed_wait_ms"] * 1e6 == pytest.approx(mean["wait"], abs=1)
    if name == "fsdp":  # by hand: exposed are the first all-gathers of forward [0, 30) µs and
        # of backward [330, 360), and the last reduce-scatter [960, 1000) before the optimizer;
        # the others run behind a layer's compute (prefetched, or the next layer's backward)
        assert dims["fsdp"]["allgather_exposed_ms"] == pytest.approx(0.060, abs=1e-6)
        assert dims["fsdp"]["reduce_scatter_exposed_ms"] == pytest.approx(0.040, abs=1e-6)


def test_the_all_to_alls_bytes_per_rank_pair_and_the_top_receiver(runs):
    r = runs["moe"]
    job, ep = r["job"], r["report"]["dimensions"]["ep"]
    assert ep["available"] and ep["n_calls"] == len(job.colls(0)) * job.steps * job.world
    pairs = job.pair_bytes()
    assert {(p["src"], p["dst"]): p["bytes"] for p in ep["pairs"]} == pairs
    received = {d: sum(v for (_, dd), v in pairs.items() if dd == d) for d in range(job.world)}
    assert ep["received_bytes"] == {str(k): v for k, v in received.items()}
    mean = sum(received.values()) / job.world
    assert ep["top_receiver"] == job.hot
    assert ep["top_receiver_over_mean"] == pytest.approx(received[job.hot] / mean)
    # by hand: a dispatch alone gives the hot rank 3 x 9 x 128 rows from the others and every
    # other rank 3 x 128: 3x the mean; with the combine sending every row back, 30 / 18
    rows = {d: sum(job.rows(s, d) for s in range(job.world) if s != d) for d in range(job.world)}
    assert rows[job.hot] / (sum(rows.values()) / job.world) == 3
    assert ep["top_receiver_over_mean"] == pytest.approx(30 / 18)
    # the hot rank's all-to-alls carry the most bytes
    out = Counter()
    for rank, *_, nbytes in r["calls"]:
        out[rank] += nbytes
    assert max(out, key=out.get) == job.hot


@pytest.mark.parametrize("name", JOBS)
def test_the_straggler_is_flagged_and_named(runs, name):
    rep, job = runs[name]["report"], runs[name]["job"]
    st = rep["stragglers"]
    late = LATE[name]
    assert st["flagged"] == ([] if late is None else [late])
    if late is None:
        return
    ranks = {x["rank"]: x for x in st["ranks"]}
    assert ranks[late]["kind"] == "compute"
    for rank in range(job.world):  # the run's total wait of each rank
        assert ranks[rank]["wait_ms"] * 1e6 == pytest.approx(job.wait_ns(rank) * job.steps, abs=1)
    assert f"rank {late}" in rep["diagnosis"]["headline"].lower()


@pytest.mark.parametrize("name", JOBS)
def test_the_unchanged_replay_reproduces_the_step(runs, name):
    rep, job = runs[name]["report"], runs[name]["job"]
    replay = rep["replay"]
    truth = job.step_ns() / 1e6
    assert replay["available"]
    assert replay["measured_step_ms"] == pytest.approx(truth, rel=1e-6)
    assert replay["replayed_step_ms"] == pytest.approx(truth, rel=0.05)
