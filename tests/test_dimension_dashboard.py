"""The step by dimension on the dashboard's Collectives page (AppTest: no server, no browser):
the bar's numbers are the report's, its labels are words, and the groups' roles are listed. The
run is the GPU dp x tp mesh of tests/gpu_mesh_traces.py, whose dimensions test_dimension_gpu.py
checks against the generator's schedule."""

from __future__ import annotations

import json

import gpu_mesh_traces as gm
import pyarrow as pa
import pytest
from apptest_support import fresh_caches, open_app  # noqa: F401 (an autouse fixture)

from commwall.analysis.api import Store
from commwall.analysis.steps.dimension import dimension_sentence
from commwall.cli.main import main
from commwall.dashboard.ui import md


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("dim_dash")
    gm.write(gm.build(gm.Mesh()), d / "traces")
    db = d / "s.duckdb"
    assert main(["ingest", "--db", str(db), "--run", "mesh", "--quiet", str(d / "traces")]) == 0
    with Store(str(db)) as s:
        report = s.run("mesh").report()
    return db, report


app = open_app


def test_collectives_page_shows_the_step_by_dimension(store, tmp_path, monkeypatch):
    db, report = store
    at = app(db, monkeypatch, tmp_path, "mesh", "collectives")
    assert "The step by dimension" in [h.value for h in at.subheader]
    drawn = []
    for c in at.get("vega_lite_chart"):
        spec = json.loads(c.proto.spec)
        title = spec.get("title")
        if "dimension" in str(title):
            data = pa.ipc.open_stream(c.proto.datasets[0].data.data).read_all().to_pandas()
            drawn.append((spec, data))
    assert len(drawn) == 1, "the dimension chart is drawn once"
    spec, data = drawn[0]
    # words, not keys: the dimensions' labels and the parts' words; the report's numbers
    want = {(f"{r['label']} ({r['dimension']})", part): r[key]
            for r in report["dimensions"]["run"]
            for key, part in (("exposed_transfer_ms", "transfer"),
                              ("exposed_wait_ms", "waiting for late ranks"))}  # fmt: skip
    got = {(d, p): ms for d, p, ms in zip(data["dimension"], data["part"], data["ms"], strict=True)}
    assert got == pytest.approx(want)
    assert "exposed_wait_ms" not in json.dumps(spec)
    captions = " ".join(c.value for c in at.caption)
    sentence = dimension_sentence(report)
    assert sentence is not None and md(sentence[0].upper() + sentence[1:]) in captions
    total = report["dimensions"]["exposed_comm_ms"]
    assert f"Together {total:.2f} ms per step" in captions
    groups = next(d.value for d in at.dataframe if "Role" in d.value.columns)
    assert sorted(groups["Role"]) == ["DP", "DP", "TP", "TP"]
    assert set(groups["Role from"]) == {"its name"}


def test_the_bar_adds_up_to_the_decomposition(store):
    _, report = store
    from commwall.dashboard.dimension_chart import dimension_frame

    df = dimension_frame(report["dimensions"]["run"])
    run = report["decomposition"]["run"]
    assert df["ms"].sum() == pytest.approx(run["exposed_transfer_ms"] + run["exposed_wait_ms"])
    assert set(df["part"]) == {"transfer", "waiting for late ranks"}
