"""Process groups of CPU (gloo) traces inferred for matching, on real runs made by
sample_traces/generate_mesh.py (tests/data/mesh/): a call is never matched with another group's.

The truth is read from the traces by plain Python: each rank's `distributedInfo.pg_config` (the
groups it belongs to, with their ranks) and its `gloo:*` events. In the 2-D mesh (dp 2 x tp 2)
the tensor-parallel all-reduces carry activations, `Input Dims [[32, 128]]` (batch 32, hidden
128), and the data-parallel all-reduces carry the parameters' gradient shards (every other
shape), so each call's group is known from its shape and its rank's pg_config."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
from conftest import DATA

from commwall.analysis.db import open_db, run_id
from commwall.cli.main import main

MESH = DATA / "mesh"
DP2_TP2 = MESH / "dp2_tp2"
TP_SHAPE = [[32, 128]]  # the generator's batch x hidden: the TP all-reduces' activations


def _trace(path):
    return json.loads(gzip.decompress(path.read_bytes()))


def mesh_truth() -> dict:
    """Per rank: its groups by pg_desc (`mesh_dp`, `mesh_tp`) with their pg_name and ranks, and
    the number of gloo all-reduces of each group's shape."""
    out = {}
    for path in sorted(DP2_TP2.glob("rank*.pt.trace.json.gz")):
        t = _trace(path)
        rank = t["distributedInfo"]["rank"]
        groups = {g["pg_desc"]: (g["pg_name"], sorted(g["ranks"])) for g in
                  t["distributedInfo"]["pg_config"]}  # fmt: skip
        calls = [e for e in t["traceEvents"] if e.get("name") == "gloo:all_reduce"]
        n_tp = sum(e["args"]["Input Dims"] == TP_SHAPE for e in calls)
        out[rank] = {"groups": groups, "tp_calls": n_tp, "dp_calls": len(calls) - n_tp}
    return out


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("mesh") / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "mesh", "--quiet", str(DP2_TP2)]) == 0
    con = open_db(db)
    yield con, run_id(con, "mesh")
    con.close()


def test_the_truth_is_a_2d_mesh():
    truth = mesh_truth()
    # rank 0's pg_config: {"pg_name": "1", "pg_desc": "mesh_dp", ..., "ranks": [0, 2]},
    # {"pg_name": "3", "pg_desc": "mesh_tp", ..., "ranks": [0, 1]}
    assert truth[0]["groups"]["mesh_dp"] == ("1", [0, 2])
    assert truth[0]["groups"]["mesh_tp"] == ("3", [0, 1])
    gt = json.loads((DP2_TP2 / "ground_truth.json").read_text())
    steps = len(gt["steps"])
    for r in truth.values():
        assert r["tp_calls"] == gt["tp_allreduces_per_step"] * steps
        assert r["dp_calls"] == gt["dp_allreduces_per_step"] * steps


def test_each_lane_takes_its_own_group(mesh):
    con, rid = mesh
    truth = mesh_truth()
    rows = con.execute(
        "SELECT rank, pg_name, pg_desc, group_size, n_calls, unmatched_reason FROM call_groups(?)",
        [rid],
    ).fetchall()
    assert len(rows) == 8  # two lanes (gloo thread pools) on each of the 4 ranks
    for rank, pg_name, desc, size, n_calls, reason in rows:
        assert reason is None
        assert pg_name == truth[rank]["groups"][desc][0]
        assert size == len(truth[rank]["groups"][desc][1])
        key = "tp_calls" if desc == "mesh_tp" else "dp_calls"
        assert n_calls == truth[rank][key]


def test_no_instance_mixes_groups(mesh):
    con, rid = mesh
    truth = mesh_truth()
    members = {name: set(ranks) for r in truth.values() for name, ranks in r["groups"].values()}
    rows = con.execute(
        "SELECT ik, pg_name, list(rank ORDER BY rank) FROM collective_matches(?) GROUP BY ik, "
        "pg_name",
        [rid],
    ).fetchall()
    per_group = Counter()
    for _, pg_name, ranks in rows:
        assert set(ranks) == members[pg_name], (pg_name, ranks)  # complete, and nobody else
        per_group[pg_name] += 1
    # each TP group matches its ranks' TP calls, each DP group its ranks' DP calls
    tp0 = truth[0]["groups"]["mesh_tp"][0]
    dp0 = truth[0]["groups"]["mesh_dp"][0]
    assert per_group[tp0] == truth[0]["tp_calls"]
    assert per_group[dp0] == truth[0]["dp_calls"]
    assert sum(per_group.values()) == sum(r["tp_calls"] + r["dp_calls"] for r in truth.values()) / 2


def test_matched_calls_overlap_in_time(mesh):
    """Every instance is causal (all ranks share one host clock): matched as one world group
    by order, 41 of the 51 instances of this set were not."""
    con, rid = mesh
    bad = con.execute(
        "SELECT count(*) FILTER (WHERE NOT causal), count(*) FROM collective_instances(?)", [rid]
    ).fetchone()
    assert bad[0] == 0 and bad[1] > 0


def test_the_matching_section_counts_no_unmatched(mesh):
    from commwall.analysis.collectives.instances import collectives_section

    con, rid = mesh
    c = collectives_section(con, rid)
    assert c["matching"]["incomplete"] == 0
    assert c["groups"]["unmatched_calls"] == 0
    truth = mesh_truth()
    expected = sorted({(name, tuple(ranks)) for r in truth.values() for name, ranks in
                       r["groups"].values() if len(ranks) < 4})  # fmt: skip
    got = sorted((g["pg_name"], tuple(g["ranks"])) for g in c["groups"]["inferred"])
    assert got == expected


@pytest.mark.parametrize("name", ["fsdp4", "moe4"])
def test_one_group_runs_keep_the_world(tmp_path, name):
    """A run whose ranks list only the default group: nothing inferred, every call matched in
    the world group, as before; every rank's gloo call count reaches the instances."""
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "r", "--quiet", str(MESH / name)]) == 0
    counts = {}
    for path in sorted((MESH / name).glob("rank*.pt.trace.json.gz")):
        t = _trace(path)
        assert [g["pg_desc"] for g in t["distributedInfo"]["pg_config"]] == ["default_pg"]
        counts[t["distributedInfo"]["rank"]] = sum(
            e.get("name", "").startswith("gloo:") for e in t["traceEvents"]
        )
    con = open_db(db)
    rid = run_id(con, "r")
    assert con.execute("SELECT count(*) FROM call_groups(?)", [rid]).fetchone()[0] == 0
    n, names, complete = con.execute(
        "SELECT count(*), list(DISTINCT pg_name), bool_and(complete) FROM collective_instances(?)",
        [rid],
    ).fetchone()
    assert names == [None] and complete
    assert len(set(counts.values())) == 1 and n == next(iter(counts.values()))
    con.close()
