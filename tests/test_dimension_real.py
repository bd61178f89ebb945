"""The step by dimension on real runs over gloo (tests/data/tp, tests/data/mesh, made by
sample_traces/generate_tp.py and generate_mesh.py). The truth is read from the traces by plain
Python (the main thread's blocking waits) or taken from the generators' ground_truth.json (the
groups' roles, the expert routing)."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import DATA
from test_tensor_parallel_real import trace_truth as tp_waits

from commwall.analysis.db import open_db, run_id
from commwall.analysis.report.session import run_session
from commwall.analysis.steps.dimension import dimension_sentence, dimensions_section
from commwall.analysis.steps.summary import decomposition_section
from commwall.cli.main import main

SETS = {
    "tp": DATA / "tp" / "gloo_2rank_tp",
    "mesh": DATA / "mesh" / "dp2_tp2",
    "fsdp": DATA / "mesh" / "fsdp4",
    "moe": DATA / "mesh" / "moe4",
}


@pytest.fixture(scope="module")
def sections(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("dims") / "s.duckdb")
    for name, path in SETS.items():
        assert main(["ingest", "--db", db, "--run", name, "--quiet", str(path)]) == 0
    con = open_db(db)
    out = {}
    for name in SETS:
        rid = run_id(con, name)
        with run_session(con, rid):
            out[name] = (dimensions_section(con, rid), decomposition_section(con, rid)["run"])
    con.close()
    return out


@pytest.mark.parametrize("name", list(SETS))
def test_the_dimensions_add_up_to_the_exposed_communication(sections, name):
    dims, run = sections[name]
    exposed = run["exposed_transfer_ms"] + run["exposed_wait_ms"]
    assert exposed > 0
    assert sum(r["exposed_ms"] for r in dims["run"]) == pytest.approx(exposed, rel=1e-9)
    assert sum(r["exposed_wait_ms"] for r in dims["run"]) == pytest.approx(
        run["exposed_wait_ms"], rel=1e-9, abs=1e-12
    )
    assert sum(r["share_of_exposed"] for r in dims["run"]) == pytest.approx(1.0)


def test_tensor_parallel_is_the_main_threads_waits(sections):
    dims, _ = sections["tp"]
    wait = statistics.mean(tp_waits()["wait_ms"])  # union of wait_tensor per step, by hand
    tp = {r["dimension"]: r for r in dims["run"]}["TP"]
    assert dims["groups"][0]["role"] == "TP" and dims["groups"][0]["source"] == "structure"
    # the main thread's waits are all exposed and all tensor parallel; the rest of TP's exposed
    # time is the gloo transfer running while the main thread does nothing else
    assert tp["exposed_ms"] == pytest.approx(wait, rel=0.05)
    assert tp["share_of_exposed"] > 0.99
    text = dimension_sentence({"dimensions": dims})
    assert text is not None and text.startswith("tensor-parallel all-reduces are")


def test_the_2d_mesh_splits_into_tp_and_dp_by_group_name(sections):
    dims, _ = sections["mesh"]
    truth = json.loads((SETS["mesh"] / "ground_truth.json").read_text())
    roles = {g["pg_desc"]: g["role"] for g in dims["groups"]}
    assert roles == {"mesh_dp": "DP", "mesh_tp": "TP"}
    assert {g["role"] for g in truth["groups"]} == {"DP", "TP"}
    got = {r["dimension"]: r["exposed_ms"] for r in dims["run"]}
    assert got["TP"] > 0 and got["DP"] > 0
    assert got.get("unknown", 0) < 0.01 * (got["TP"] + got["DP"])


def test_fsdp_shows_its_gathers_and_reduce_scatters(sections):
    dims, run = sections["fsdp"]
    truth = json.loads((SETS["fsdp"] / "ground_truth.json").read_text())
    assert [g["role"] for g in truth["groups"]] == ["FSDP"]
    assert [(g["role"], g["source"]) for g in dims["groups"]] == [("FSDP", "structure")]
    assert [r["dimension"] for r in dims["run"]] == ["FSDP"]
    f = dims["fsdp"]
    assert f["allgather_exposed_ms"] > 0 and f["reduce_scatter_exposed_ms"] > 0
    assert f["allgather_exposed_ms"] + f["reduce_scatter_exposed_ms"] == pytest.approx(
        run["exposed_transfer_ms"] + run["exposed_wait_ms"]
    )


def test_expert_parallel_imbalance_matches_the_routing(sections):
    dims, _ = sections["moe"]
    truth = json.loads((SETS["moe"] / "ground_truth.json").read_text())
    assert [r["dimension"] for r in dims["run"]] == ["EP"]
    c = {int(k): v for k, v in truth["send_counts"].items()}
    n, steps = truth["world_size"], len(truth["steps"])
    row = truth["generator_args"]["hidden"] * 4  # float32 tokens of `hidden` elements
    # per step rank i sends j: the counts (one int64 each), its tokens (c[i][j] rows), the
    # expert's output back (c[j][i]), and in backward the same two again: 2 (c[i][j] + c[j][i])
    want = {(i, j): steps * (8 + 2 * (c[i][j] + c[j][i]) * row)
            for i in range(n) for j in range(n) if i != j}  # fmt: skip
    ep = dims["ep"]
    assert ep["available"]
    assert {(p["src"], p["dst"]): p["bytes"] for p in ep["pairs"]} == want
    received = {j: sum(v for (_, d), v in want.items() if d == j) for j in range(n)}
    assert ep["top_receiver"] == truth["hot_rank"] == max(received, key=received.get)
    assert ep["pair_max_over_mean"] == pytest.approx(max(want.values()) / statistics.mean(
        want.values()))  # fmt: skip
    assert ep["top_receiver_over_mean"] == pytest.approx(
        received[1] / statistics.mean(received.values())
    )
