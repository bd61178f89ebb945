"""The pipeline on the dashboard's Collectives page (AppTest: no server, no browser): one step's
stages along time, in stage order, with their compute, sends, receives and waiting, and the
per-stage table. The run is the real 4-stage 1F1B pipeline of tests/data/pp (slow stage 2);
the waiting and the calls are checked against the traces read by plain Python
(test_pipeline_real) and the generator's ground truth, the table against the report."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from apptest_support import fresh_caches, open_app  # noqa: F401 (an autouse fixture)
from test_pipeline_real import PP, truth, waits_ms

from commwall.analysis.api import Store
from commwall.cli.main import main
from commwall.dashboard.pipeline_chart import PARTS, stage_label

NAME = "gloo_4stage_1f1b_slow"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("pp_dash") / "s.duckdb"
    assert main(["ingest", "--db", str(db), "--run", "pp", "--quiet", str(PP / NAME)]) == 0
    with Store(str(db)) as s:
        report = s.run("pp").report()
    return db, report


def app(db, monkeypatch, tmp_path):
    return open_app(db, monkeypatch, tmp_path, "pp", "collectives")


def pipeline_chart(at):
    drawn = []
    for c in at.get("vega_lite_chart"):
        spec = json.loads(c.proto.spec)
        if "each stage" in str(spec.get("title")):
            data = pa.ipc.open_stream(c.proto.datasets[0].data.data).read_all().to_pandas()
            drawn.append((spec, data))
    assert len(drawn) == 1, "the pipeline chart is drawn once"
    return drawn[0]


def test_the_pipeline_chart_shows_each_stage_along_the_step(store, tmp_path, monkeypatch):
    db, report = store
    t = truth(NAME)
    at = app(db, monkeypatch, tmp_path)
    assert "Pipeline" in [h.value for h in at.subheader]
    step = next(w for w in at.selectbox if (w.key or "").startswith("pipeline_step:")).value
    assert step in t["steps"]
    spec, data = pipeline_chart(at)
    chain = report["pipeline"]["pipelines"][0]["ranks"]
    assert chain == list(range(t["stages"]))  # stage s is rank s (the generator's plan)
    rows = [stage_label(s, r) for s, r in enumerate(chain)]
    # rows in stage order, every stage drawn, parts in words
    assert spec["encoding"]["y"]["sort"] == rows
    assert set(data["stage"]) == set(rows)
    assert set(data["part"]) <= set(PARTS.values())
    assert "recv_wait" not in json.dumps(spec) and "waiting" not in set(data["part"])
    # each stage's sends and receives of the step: the generator's plan (one bar per matched
    # call's part after its wait; a send or receive that waited for all of its time has none)
    plan = {int(r): p for r, p in t["p2p_per_step"].items()}
    for stage, label in enumerate(rows):
        mine = data[data["stage"] == label]
        sends = sum(1 for op, _, _ in plan[stage] if op == "send")
        recvs = sum(1 for op, _, _ in plan[stage] if op == "recv")
        assert (mine["part"] == PARTS["send"]).sum() <= sends
        assert (mine["part"] == PARTS["receive"]).sum() <= recvs
        assert (mine["part"] == PARTS["send"]).sum() + (mine["part"] == PARTS["receive"]).sum() > 0
        # the stage's waiting in the step: the traces' own (plain Python), to the µs
        waiting = mine.loc[mine["part"] == PARTS["waiting"], "ms"].sum()
        assert waiting == pytest.approx(waits_ms(NAME).get((stage, step), 0.0), abs=0.01)
        assert (mine["ms"] >= 0).all()
    # the slow stage computes the most in the step, as the generator made it
    compute = data[data["part"] == PARTS["compute"]].groupby("stage")["ms"].sum()
    assert compute.idxmax() == rows[t["slow_stage"]]


def test_the_stage_table_is_the_reports(store, tmp_path, monkeypatch):
    db, report = store
    at = app(db, monkeypatch, tmp_path)
    stages = report["pipeline"]["pipelines"][0]["stages"]
    shown = next(
        d.value for d in at.dataframe if "Waiting for a neighbour (ms per step)" in d.value.columns
    )
    assert list(shown["Stage"]) == [s["stage"] for s in stages]
    assert list(shown["Rank"]) == [s["rank"] for s in stages]
    # tables show 3 significant figures
    for col, key in (
        ("Compute (ms per step)", "compute_ms"),
        ("Waiting for a neighbour (ms per step)", "wait_ms"),
        ("Receiving (ms per step)", "transfer_ms"),
    ):
        assert list(shown[col]) == pytest.approx([s[key] for s in stages], rel=5e-3)
    assert not any("_ms" in c for c in shown.columns)
    captions = " ".join(c.value for c in at.caption)
    assert "bubble" in captions


def test_the_pipeline_whatifs_are_the_reports(store, tmp_path, monkeypatch):
    """The pipeline's step as measured, with its stages balanced and with twice the
    micro-batches (replayed and by the formula), as the report gives them, in words."""
    db, report = store
    chain = report["pipeline"]["pipelines"][0]
    at = app(db, monkeypatch, tmp_path)
    shown = next(d.value for d in at.dataframe if "Step (ms)" in d.value.columns)
    want = {
        "As measured": chain["step_ms"],
        "Stages balanced (replayed)": chain["balanced_step_ms"],
        "Twice the micro-batches (replayed)": chain["micro_batches_2m_step_ms"],
        "Twice the micro-batches (bubble formula)": chain["micro_batches_2m_formula_step_ms"],
    }
    want = {k: x for k, x in want.items() if x is not None}
    assert "Twice the micro-batches (replayed)" in want  # the 1F1B run replays it
    assert dict(zip(shown["Pipeline"], shown["Step (ms)"], strict=True)) == pytest.approx(
        want, rel=5e-3
    )


def test_the_post_mortem_holds_the_pipeline_and_the_dimensions(store):
    """The post-mortem (HTML and Markdown) gives each stage of the pipeline the generator
    made, the slow stage computing the most, the pipeline's what-ifs and the step by
    dimension with its pipeline part."""
    from commwall.dashboard.export import render_html
    from commwall.dashboard.export_content import dimension_rows, pipeline_rows
    from commwall.dashboard.export_markdown import render_markdown

    _, report = store
    t = truth(NAME)
    rows = pipeline_rows(report)
    assert isinstance(rows, list)
    stages = [r for r in rows if r["stage"] != "step"]
    assert [r["rank"] for r in stages] == list(range(t["stages"]))
    slow = max(stages, key=lambda r: float(r["compute (ms per step)"]))
    assert slow["stage"] == t["slow_stage"]
    (whatifs,) = [r for r in rows if r["stage"] == "step"]
    assert (
        "replayed" in whatifs["receiving (ms)"]
        and "balanced" in whatifs["waiting for a neighbour (ms)"]
    )
    dims = dimension_rows(report)
    assert isinstance(dims, list) and any("ipeline" in str(r["dimension"]) for r in dims)
    md, html = render_markdown(report), render_html(report, charts=False)
    for doc in (md, html):
        assert "Pipeline" in doc and "The step by parallelism dimension" in doc
        assert "micro_batches" not in doc and "balanced_step_ms" not in doc
