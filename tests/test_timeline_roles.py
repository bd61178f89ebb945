"""The Timeline page names each collective's process-group role in words (AppTest: no server, no
browser). The run is the real dp 2 x tp 2 mesh of tests/data/mesh/dp2_tp2; which ranks form
the tensor-parallel and the data-parallel groups is the generator's ground_truth.json."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from apptest_support import fresh_caches, open_app  # noqa: F401 (an autouse fixture)
from conftest import DATA

from commwall.cli.main import main

MESH = DATA / "mesh" / "dp2_tp2"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("roles") / "s.duckdb"
    assert main(["ingest", "--db", str(path), "--run", "mesh", "--quiet", str(MESH)]) == 0
    return path


def test_collectives_are_named_with_their_groups_role(db, tmp_path, monkeypatch):
    truth = json.loads((MESH / "ground_truth.json").read_text())
    at = open_app(db, monkeypatch, tmp_path, "mesh", "timeline")
    chart = next(c for c in at.get("vega_lite_chart") if "busy with" in c.proto.spec)
    spec = json.loads(chart.proto.spec)
    sets = [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in chart.proto.datasets]
    calls = next(d for d in sets if "instance" in d.columns)
    words = {"TP": "tensor parallel", "DP": "data parallel"}
    # every call's bar names its group's role beside its op; the ranks that share an instance
    # are the ranks of a group of that role (the generator's groups)
    groups = {tuple(sorted(g["ranks"])): words[g["role"]] for g in truth["groups"]}
    for _, one in calls.groupby("ik"):
        (label,) = set(one["op"])
        assert label == f"allreduce · {groups[tuple(sorted(one['rank']))]}"
    per_step = {
        "tensor parallel": truth["tp_allreduces_per_step"],
        "data parallel": truth["dp_allreduces_per_step"],
    }
    for role, n in per_step.items():  # per step, each rank's calls of each role
        mine = calls[calls["op"].str.endswith(role)]
        assert set(mine.groupby("rank").size()) == {n}
    # the calls' colours, and so the legend, are these words (op and role)
    colours = [layer["encoding"]["color"]["field"] for layer in spec["layer"][:2]]
    assert colours == ["kind", "op"]
    # the table below names the role in a column of its own
    table = next(d.value for d in at.dataframe if "instance" in d.value.columns)
    assert set(table["role"]) == set(words.values())
    assert set(table["op"]) == {"allreduce"}
