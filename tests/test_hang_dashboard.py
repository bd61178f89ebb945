"""The Hang page through Streamlit's AppTest, the `commwall hang` command, the report's `hang`
key, its checklist item and its text rendering, on the real hung gloo runs of sample_traces."""

from __future__ import annotations

import html
import json

import pytest
from conftest import SAMPLES
from dashboard_support import ingest_dir, report_of
from test_dashboard_apptest import app, fresh_caches, table, texts, upload  # noqa: F401 (fixture)

from commwall.cli.main import main
from commwall.dashboard import nav
from commwall.dashboard.ui import md

TRUTH = json.loads((SAMPLES / "fr_skip" / "ground_truth.json").read_text())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """fr_skip (dumps and Kineto traces), fr_op (dumps), and fr_skip's traces alone."""
    d = tmp_path_factory.mktemp("hangapp")
    path = d / "s.duckdb"
    ingest_dir(path, "skip", SAMPLES / "fr_skip")
    ingest_dir(path, "op", SAMPLES / "fr_op")
    traces = d / "traces"
    traces.mkdir()
    for f in (SAMPLES / "fr_skip").glob("*.pt.trace.json.gz"):
        (traces / f.name).write_bytes(f.read_bytes())
    ingest_dir(path, "traces_only", traces)
    ingest_dir(path, "dumps_only", SAMPLES / "fr_skip_pickle")
    return path


def test_hang_page_shows_the_verdict_and_the_culprit(store, tmp_path, monkeypatch, caplog):
    verdict = report_of(store, "skip")["hang"]["verdict"]
    at = app(store, monkeypatch, tmp_path, run="skip", page="hang")
    # the chart's data has no list column that the chart cache cannot hash (a log line each)
    assert not [r for r in caplog.records if "unhashable" in r.getMessage()]
    assert texts(at.error) == [md(verdict)]
    f = table(at, "culprit ranks", "other ranks")
    assert list(f["culprit ranks"]) == [str(TRUTH["culprit_rank"])]
    assert list(f["seq"]) == [TRUTH["hang_seq"]]
    t = table(at, "seq", "trace_dur_ms")
    assert set(t["rank"]) == set(range(TRUTH["world_size"]))


def test_stragglers_page_of_a_hung_run_says_its_figures_hold_the_hang(store, tmp_path, monkeypatch):
    """fr_skip's traces end inside the hung all_gather: the page warns before its verdict; the
    same traces without the dumps (traces_only) get no warning."""
    at = app(store, monkeypatch, tmp_path, run="skip", page="stragglers")
    assert any("include the wait for the hung collective" in t for t in texts(at.error))
    at = app(store, monkeypatch, tmp_path, run="traces_only", page="stragglers")
    assert not any("hung collective" in t for t in texts(at.error))


def test_overview_of_dumps_alone_leads_with_the_hang(store, tmp_path, monkeypatch, capsys):
    """Four pickled dumps and no trace (fr_skip_pickle): the Overview says the job hung and who
    never entered the collective (its ground truth) before saying step metrics need traces."""
    truth = json.loads((SAMPLES / "fr_skip_pickle" / "ground_truth.json").read_text())
    dumps = len(list((SAMPLES / "fr_skip_pickle").glob("rank*.pkl.gz")))
    at = app(store, monkeypatch, tmp_path, run="dumps_only", page="overview")
    # the answer in the box names the culprit, the class below it
    (box,) = texts(at.error)
    assert box.startswith(f"**{md('The job hung')}") and f"rank {truth['culprit_rank']}" in box
    # the class the answer falls in titles the whole diagnosis
    assert any(
        "Hung: a collective never completed" in e.label.replace("\\", "") for e in at.expander
    )
    why = " ".join(texts(at.markdown))
    assert f"rank {truth['culprit_rank']} never entered it" in why
    assert f"seq {truth['hang_seq']}" in why
    caption = " ".join(texts(at.caption))
    assert f"no traced rank · {dumps} Flight Recorder dumps" in caption and "no traces" in caption
    assert f"files: {dumps} Flight Recorder dumps" in caption  # in words, not format names
    assert main(["report", "--db", str(store), "--run", "dumps_only"]) == 0
    out = capsys.readouterr().out
    assert f"ranks: none traced, {dumps} with a Flight Recorder dump" in out


def test_hang_page_without_dumps_says_what_to_upload(store, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="traces_only", page="hang")
    assert "Flight Recorder evidence" in at.info[0].value


def test_cli_json_text_and_report(store, capsys):
    assert main(["hang", "--db", str(store), "--run", "op", "--format", "json"]) == 0
    s = json.loads(capsys.readouterr().out)
    cause = s["groups"][0]["cause"]
    assert (cause["kind"], cause["culprit_ranks"]) == ("op", [TRUTH["culprit_rank"]])
    assert main(["hang", "--db", str(store), "--run", "op"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == s["verdict"]
    assert main(["report", "--db", str(store), "--run", "op", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hang"]["verdict"] == s["verdict"]
    item = next(i for i in report["checklist"] if i["key"] == "hang")
    assert (item["status"], item["evidence"]) == ("attention", s["verdict"])
    assert main(["report", "--db", str(store), "--run", "op"]) == 0
    text = capsys.readouterr().out
    assert f"== Hang (Flight Recorder)\n{s['verdict']}\n" in text
    assert main(["hang", "--db", str(store), "--run", "nope"]) == 2


def test_checklist_item_without_dumps(store):
    r = report_of(store, "traces_only")
    assert not r["hang"]["present"]
    item = next(i for i in r["checklist"] if i["key"] == "hang")
    assert item["status"] == "not_observable"


def test_postmortem_export_has_the_hang_section(store, tmp_path):
    verdict = report_of(store, "skip")["hang"]["verdict"]
    html_file, md_file = tmp_path / "p.html", tmp_path / "p.md"
    assert main(["export", "--db", str(store), "--run", "skip", "--out", str(html_file)]) == 0
    page = html_file.read_text()
    assert "<h2 id='hang'>Hang (Flight Recorder)</h2>" in page and html.escape(verdict) in page
    assert main(["export", "--db", str(store), "--run", "skip", "--out", str(md_file)]) == 0
    text = md_file.read_text()
    assert "## Hang (Flight Recorder)" in text and "never entered it" in text


def test_dumps_uploaded_on_the_dashboard_keep_their_rank(tmp_path, monkeypatch, tmp_db):
    at = app(tmp_db, monkeypatch, tmp_path)
    dumps = sorted((SAMPLES / "fr_skip_pickle").glob("rank*.pkl.gz"))
    at = upload(at, "hung", [(p.name, p.read_bytes()) for p in dumps])
    assert texts(at.success) == ["Stored run hung (4 files)."]
    at.switch_page(nav.path("hang")).run()
    assert not at.exception, at.exception
    f = table(at, "culprit ranks", "other ranks")
    assert list(f["culprit ranks"]) == [str(TRUTH["culprit_rank"])]


def test_model_page_of_a_hung_run_warns_and_has_no_link_what_if(store, tmp_path, monkeypatch):
    """fr_skip's all-reduces before the hang all move 1,024 floats: one message size, so the
    fit has no bandwidth (β) and a link what-if would move an infinite bandwidth. The page says
    so instead of drawing an empty curve, and warns that the prediction is for a step that does
    not hang."""
    at = app(store, monkeypatch, tmp_path, run="skip", page="model")
    assert not at.exception, at.exception
    assert any(w.value.startswith("The job hung") for w in at.warning)
    assert not [s for s in at.select_slider if (s.key or "").startswith("wi_link")]
    assert any(c.value.startswith("Link bandwidth not fitted") for c in at.caption)


@pytest.fixture(scope="module")
def logs_store(tmp_path_factory):
    """Two real NCCL logs alone, no traces: 019 (ranks 1-7 died at communicator creation) and
    005 (272 `Call to ibv_open_device failed` warnings, nothing died)."""
    from nccl_real import real_logs

    from commwall.ingest import store as ingest_store

    path = tmp_path_factory.mktemp("logsapp") / "s.duckdb"
    con = ingest_store.connect(path)
    for log in real_logs():
        if log.name[:3] in ("019", "005"):
            assert ingest_store.ingest(con, log.name[:3], [log.path]).committed
    con.close()
    return path


def test_overview_of_logs_alone_says_who_died_or_what_the_logs_found(
    logs_store, tmp_path, monkeypatch
):
    """019: `7:   what():  NCCL error in: .../NCCLUtils.cpp:77, invalid usage` (line 4376) and
    the same for tags 1-6, each followed two lines below by `NET/IB : Requested properties for
    vNic 8, only 8 vNics have been created`; 005: `misc/ibvwrap.cc:212 Call to ibv_open_device
    failed` (line 379) and no crash."""
    at = app(logs_store, monkeypatch, tmp_path, run="019", page="overview")
    (box,) = texts(at.error)
    # 019's lines 4376 on: `7:   what():  NCCL error in: ...` and the same for tags 1-6
    assert (
        box
        == f"**{md('The job died: ranks 1–7 stopped on an error of their own — the NCCL section quotes the first error.')}**"
    )
    assert any(
        "Died: ranks stopped on an error of their own" in e.label.replace("\\", "")
        for e in at.expander
    )
    why = " ".join(texts(at.markdown))
    assert "ranks 1-7 died of NCCL error in" in why.replace("\\", "")
    assert "only 8 vNics have been created" in why.replace("\\", "")
    at = app(logs_store, monkeypatch, tmp_path, run="005", page="overview")
    assert not at.error
    said = " ".join(texts(at.markdown)).replace("\\", "")
    assert "What the NCCL logs say: NCCL warnings: 272" in said
    assert "Call to ibv_open_device failed" in said


def test_collectives_page_draws_no_hung_instance_as_a_transfer(store, tmp_path, monkeypatch):
    """fr_skip: rank 1 never joined seq 6's all_gather (ground truth), so ranks 0, 2 and 3 sat in
    it until the 3 s timeout. The charts used to draw it as a 3,000 ms transfer at about 3e-6
    GB/s, beside a per-op table that leaves it out; now neither chart draws it, and the caption
    says how many were left out."""
    from test_dashboard_apptest import chart_data, chart_title, charts

    at = app(store, monkeypatch, tmp_path, run="skip", page="collectives")
    timeout_ms = TRUTH["timeout_s"] * 1e3
    titles = [chart_title(at, i) for i in range(len(charts(at)))]
    transfer = chart_data(at, titles.index("Transfer time by message size (ms)"))[1]
    assert len(transfer) and transfer["transfer_ms"].max() < timeout_ms / 10
    assert not any(TRUTH["expected_op"].replace("_", "") == op and ms > timeout_ms / 2
                   for op, ms in zip(transfer["op"], transfer["transfer_ms"], strict=True))  # fmt: skip
    assert any("never joined by a rank the run traced" in t for t in texts(at.caption))
