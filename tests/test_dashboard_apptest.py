"""Every dashboard page through Streamlit's AppTest: no server, no browser; the numbers shown
are checked against the report dict."""

from __future__ import annotations

import json
import re
import shutil
import statistics

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
import streamlit as st
from apptest_support import open_app
from conftest import DLRM, ROOT, SAMPLES
from dashboard_support import ingest_dir, overview_metrics, report_of, upload_files
from kineto_truth import gpu_steps
from nccl_log_gen import Job, make_log
from synthetic_traces import Scenario, insert_run, simulate

from commwall.analysis.api import Store
from commwall.analysis.compare.pair import compare
from commwall.analysis.db import load_modules, run_id
from commwall.analysis.model import whatif
from commwall.analysis.model.section import run_scenario
from commwall.analysis.report.checklist import evaluate
from commwall.analysis.report.session import run_session
from commwall.dashboard import nav
from commwall.dashboard.ui import fmt_ms, md
from commwall.ingest import store as ingest_store

#: Module-scoped stores that no test changes: Streamlit's caches of them (keyed by the store's
#: path and each run's fingerprint) are kept from one test to the next, but around the tests
#: that change a store (FRESH).
SHARED_STORES = {"store", "wide"}
FRESH = {"test_rename_and_delete"}


def clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()  # closes nothing: the dashboard holds no open connection


@pytest.fixture(scope="module", autouse=True)
def module_caches():
    """No cache of this module's stores is met before it or left after it."""
    clear_caches()
    yield
    clear_caches()


@pytest.fixture(autouse=True)
def fresh_caches(request):
    """Streamlit's caches cleared before and after each test that opens a store of its own,
    uploads or changes one (FRESH); kept across the tests that only read a shared
    store, whose every run is still computed once by the app from the store."""
    if SHARED_STORES & set(request.fixturenames) and request.function.__name__ not in FRESH:
        yield
        return
    clear_caches()
    yield
    clear_caches()


EVIL = "<img src=x onerror=alert(1)> **bold** [x](http://example.com) $x$ :red[r]"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """DLRM, a gloo run, and DLRM with a synthetic NCCL log (TCP fallback, warnings)."""
    d = tmp_path_factory.mktemp("apptest")
    path = d / "s.duckdb"
    ingest_dir(path, "dlrm", DLRM)
    ingest_dir(path, "gloo", SAMPLES / "gloo_4rank_compute")
    both = d / "with_log"
    shutil.copytree(DLRM, both)
    make_log(Job(nodes=2, gpus=4, network="socket", gdr=False, warn_rank=3)).write(
        both / "nccl.log"
    )
    ingest_dir(path, "dlrm_nccl", both)
    return path


@pytest.fixture(scope="module")
def reports(store):
    return {r: report_of(store, r) for r in ("dlrm", "gloo", "dlrm_nccl")}


app = open_app


def widget(elements, name):
    """The widget whose key is `name` scoped to the run shown (`name:run:fingerprint`)."""
    return next(w for w in elements if (w.key or "").split(":")[0] == name)


def texts(elements):
    return [e.value for e in elements]


def table(at, *columns):
    """The first dataframe shown with all of `columns` (AppTest's dataframes carry no key)."""
    return next(d.value for d in at.dataframe if set(columns) <= set(d.value.columns))


# -- upload and runs ---------------------------------------------------------------------------


def upload(at, name, files, notes=""):
    at.text_input[0].input(name)  # the form's widgets (their keys change per stored run)
    at.text_area[0].input(notes)
    at.file_uploader[0].set_value([(n, b, "application/octet-stream") for n, b in files])
    next(b for b in at.button if b.label == "Store run").click()
    return at.run()


def test_upload_stores_a_run_with_per_file_progress(tmp_path, monkeypatch, tmp_db):
    at = app(tmp_db, monkeypatch, tmp_path)
    assert at.get("file_uploader") and "No runs yet." in texts(at.caption)
    at = upload(at, "dlrm upload", upload_files(DLRM), notes="first try")
    assert not at.exception, at.exception
    assert texts(at.success) == ["Stored run dlrm upload (8 files)."]
    per_file = at.dataframe[0].value
    assert list(per_file["status"]) == ["ingested"] * 8
    assert list(per_file["ranks"]) == [str(r) for r in range(8)]
    runs = table(at, "run", "files", "notes")
    assert list(runs["run"]) == ["dlrm upload"] and list(runs["notes"]) == ["first try"]
    assert list(runs["files"]) == [8] and list(runs["ranks"]) == [8]
    # the uploaded run is the one the other pages now show
    at.switch_page(nav.path("overview")).run()
    assert "dlrm upload" in at.header[0].value


def test_a_bad_file_is_named_and_nothing_is_stored(tmp_path, monkeypatch, tmp_db):
    at = app(tmp_db, monkeypatch, tmp_path)
    # a damaged file of a known format (a Kineto trace's gzip cut in half) stops the upload
    cut = upload_files(DLRM)[0][1]
    at = upload(
        at, "broken", [*upload_files(DLRM), ("rank9.pt.trace.json.gz", cut[: len(cut) // 2])]
    )
    assert not at.success
    errors = texts(at.error)
    assert errors[0].startswith("Nothing was stored.")
    assert any(e.startswith("rank9\\.pt\\.trace\\.json\\.gz: truncated gzip") for e in errors)
    assert list(at.dataframe[0].value["status"]) == ["parsed"] * 8 + ["failed"]
    assert "No runs yet." in texts(at.caption)


def test_rename_and_delete(store, tmp_path, monkeypatch):
    db = tmp_path / "copy.duckdb"
    shutil.copy(store, db)
    at = app(db, monkeypatch, tmp_path)
    at.selectbox(key="rename_from").select("gloo")
    at.text_input(key="rename_to").input("gloo after fix")
    next(b for b in at.button if b.label == "Rename").click()
    at.run()
    assert "gloo after fix" in list(table(at, "run", "files", "notes")["run"])
    assert at.session_state["run"] == "gloo after fix"
    at.selectbox(key="delete_run").select("gloo after fix")
    next(b for b in at.button if b.label == "Delete").click()
    at.run()
    assert texts(at.warning) == ["Tick the box to confirm."]
    at.checkbox(key="delete_sure").check()
    next(b for b in at.button if b.label == "Delete").click()
    at.run()
    assert list(table(at, "run", "files", "notes")["run"]) == ["dlrm", "dlrm_nccl"]


def test_run_names_and_trace_strings_are_never_markup(tmp_path, monkeypatch, tmp_db):
    at = app(tmp_db, monkeypatch, tmp_path)
    at = upload(at, EVIL, upload_files(SAMPLES / "gloo_4rank_sleep"))
    shown = texts(at.success)[0]
    assert shown == f"Stored run {md(EVIL)} (4 files)."
    assert not re.search(r"(?<!\\)[<>*\[\]()$:]", md(EVIL))  # every control character escaped
    at.switch_page(nav.path("overview")).run()
    assert "\\*\\*bold\\*\\*" in at.header[0].value and "**bold**" not in at.header[0].value


def test_no_page_uses_unsafe_html():
    sources = (ROOT / "dashboard").rglob("*.py")
    assert not [p for p in sources if re.search(r"unsafe_allow_html\s*=", p.read_text())]


@pytest.mark.parametrize("page", [k for k in nav.PAGES if k != "upload"])
def test_every_page_says_what_to_upload_on_an_empty_store(page, tmp_path, monkeypatch, tmp_db):
    at = app(tmp_db, monkeypatch, tmp_path, page=page)
    assert texts(at.info) == ["No runs in this store yet. Upload a run's traces first."]


# -- analysis pages ----------------------------------------------------------------------------


def test_overview_shows_the_report_numbers(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm", page="overview")
    s = reports["dlrm"]["summary"]
    shown = {m.label: m.value for m in at.metric}
    assert shown == overview_metrics(s)
    # the headline from the raw files by plain Python (tests/kineto_truth.py): the mean over the
    # eight ranks of the one step's window length, and η of the mean row
    truth = [gpu_steps(p)[10] for p in sorted(DLRM.glob("*.gz"))]
    step_ms = statistics.mean(t["step_ns"] for t in truth) / 1e6
    assert shown["Step time"] == f"{step_ms:.3g} ms" == "14.8 ms"  # 3 significant figures
    comp, comm, both = (statistics.mean(t[k] for t in truth) for k in ("compute_ns", "comm_ns",
                                                                       "both_ns"))  # fmt: skip
    assert shown["Overlap η"] == f"{both / min(comp, comm):.3f}"
    # the answer to "why" leads: a wall, but made of waiting and idle time, not bandwidth
    plain = [t.replace("\\", "") for t in texts(at.error) + texts(at.markdown)]
    # the answer in the box (rank 7 is late before its steps: its start delay, per the traces)
    assert plain[0].startswith("**An idle host sets the 14.8 ms step") and "rank 7" in plain[0]
    # then the brief points, the fixes ranked, and the whole diagnosis in an expander titled
    # with the class the step falls in
    assert any("Rank 7 causes 36% of the waiting" in t for t in plain)
    fixes = table(at, "Fix", "Step after", "Saving")
    assert fixes["Fix"].iloc[0].startswith("Idle gaps removed")
    assert any("Host-, input- or launch-bound" in e.label.replace("\\", "") for e in at.expander)
    why = next(t for t in plain if t.startswith("- **What dominates.** The idle host time"))
    assert "exposed communication is 5.9 ms (40%)" in why and "rank 7" in why
    # one item per topic, in the paragraph's order, with the culprit under "Who is late"
    items = [line.split("**")[1] for line in why.splitlines()]
    assert items == ["What dominates.", "Who is late.", "What-if replay.", "Largest fix.",
                     "Model."]  # fmt: skip
    assert "rank 7" in why.splitlines()[1]
    shown_table = table(at, "metric", "measured", "predicted")
    assert list(shown_table["measured"]) == list(shown.values())
    # the model (data volumes over link speed) predicts no wall: the paragraph says why they differ
    assert any(t.startswith("**Predicted** (α-β model): compute-bound") for t in plain)
    assert "predicts no wall" in why


def test_overview_splits_every_rank_and_step(store, reports, tmp_path, monkeypatch):
    """The stacked bars carry the decomposition: per rank and per step, the parts shown add up to
    the step window of the report (gloo: 4 ranks, 6 steps)."""
    at = app(store, monkeypatch, tmp_path, run="gloo", page="overview")
    dec = reports["gloo"]["decomposition"]
    spec, data = chart_data(at, 0)
    title = spec["title"] if isinstance(spec["title"], str) else spec["title"]["text"]
    assert title.startswith("Mean step per rank")
    per_rank = data.groupby("rank")["ms"].sum()
    want = {str(r["rank"]): r["step_ms"] for r in dec["ranks"]}
    assert per_rank.to_dict() == pytest.approx(want)
    _, data = chart_data(at, 1)
    assert sorted(data["step"].unique()) == sorted({str(r["step"]) for r in dec["steps"]})
    whatifs = table(at, "label", "step (ms)", "saving (ms)", "saving")
    assert list(whatifs["label"]) == [w["label"] for w in reports["gloo"]["replay"]["whatifs"]]


def charts(at):
    return at.get("vega_lite_chart")


def chart_data(at, i=0):
    """(Vega-Lite spec, first dataset as a DataFrame) of the i-th chart."""
    proto = charts(at)[i].proto
    data = pa.ipc.open_stream(proto.datasets[0].data.data).read_all().to_pandas()
    return json.loads(proto.spec), data


def chart_title(at, i):
    """The title of the i-th chart (a layered chart carries it on its first layer)."""
    spec, _ = chart_data(at, i)
    title = spec.get("title") or spec["layer"][0]["title"]
    return title["text"] if isinstance(title, dict) else title


def test_ranks_page_heatmaps_carry_the_step_metrics(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="gloo", page="ranks")
    # heatmaps of η, τ_comm, wait; no histograms of so few rank-steps
    n = len(reports["gloo"]["steps"])
    assert n < 50 and len(charts(at)) == 3
    titles = [chart_title(at, i) for i in range(3)]
    assert titles == [
        "Overlap η (fraction) per rank and step",
        "τ_comm (ms) per rank and step",
        "Wait for peers (ms) per rank and step",
    ]
    assert any(f"{n} rank-steps are too few for a histogram" in c.value for c in at.caption)
    spec, rows = chart_data(at, 0)
    got = dict(zip(zip(rows["rank"], rows["step"], strict=True), rows["eta"], strict=True))
    want = {(s["rank"], s["step"]): s["eta"] for s in reports["gloo"]["steps"]}
    assert got == pytest.approx(want)
    _, waits = chart_data(at, 2)  # the wait heatmap
    assert (waits["wait_ms"] >= 0).all() and waits["wait_ms"].notna().all()
    assert len(waits) == len(reports["gloo"]["steps"])


def test_timeline_links_collectives_across_ranks(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm", page="timeline")
    assert widget(at.selectbox, "timeline_step").value == 10
    assert widget(at.multiselect, "timeline_ranks").value == list(range(8))
    calls = table(at, "instance", "wait_ms")
    # DLRM names no process group (the empty column is not shown): op and instance name a call
    assert "pg_name" not in calls.columns
    per_call = calls.groupby(["op", "instance"])["rank"].nunique()
    assert len(calls) == 64 and per_call.eq(8).all() and "ik" not in calls.columns
    widget(at.multiselect, "timeline_ranks").set_value([0, 7]).run()
    assert len(table(at, "instance", "wait_ms")) == 16
    # the ranks chosen on one run are not the next run's: gloo's own default ranks are drawn
    at.session_state["run"] = "gloo"
    at.run()
    assert not at.exception, at.exception
    gloo_ranks = sorted({r["rank"] for r in reports["gloo"]["ranks"]})
    assert widget(at.multiselect, "timeline_ranks").value == gloo_ranks


def test_collectives_page_and_link_peak_feed_the_checklist(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm", page="collectives")
    ops = table(at, "op", "busbw_GBps_median")
    want = pd.DataFrame(reports["dlrm"]["collectives"]["ops"])
    assert list(ops["op"]) == list(want["op"])
    # tables show 3 significant figures
    assert list(ops["busbw_GBps_median"]) == pytest.approx(
        list(want["busbw_GBps_median"]), rel=5e-3
    )
    assert len(charts(at)) == 3  # size vs transfer time beside busbw, the step by dimension
    assert [chart_title(at, i) for i in range(3)] == [
        "Transfer time by message size (ms)",
        "Bus bandwidth by message size (GB/s)",
        "Exposed communication by parallelism dimension (ms per step)",
    ]
    for i in range(2):
        _, points = chart_data(at, i)
        assert len(points) == reports["dlrm"]["collectives"]["matching"]["instances"]
    protocols = table(at, "op", "protocol")
    assert set(protocols["protocol"]) == {"LL", "SIMPLE"}
    at.selectbox(key="peak_pick").select("InfiniBand HDR 200 Gb/s, per NIC").run()
    at.switch_page(nav.path("checklist")).run()
    items = evaluate(reports["dlrm"], 24.0)  # the HDR peak
    assert next(i for i in items if i["key"] == "busbw")["status"] != "not_observable"
    shown = [m.value for m in at.metric]
    counts = [
        str(sum(i["status"] == s for i in items))
        for s in ("attention", "ok", "not_observable", "not_applicable")
    ]
    assert shown == counts
    # back on Collectives the peak is still the one chosen, and the checklist keeps it
    at.switch_page(nav.path("collectives")).run()
    assert at.selectbox(key="peak_pick").value == "InfiniBand HDR 200 Gb/s, per NIC"
    at.switch_page(nav.path("checklist")).run()
    assert [m.value for m in at.metric] == counts


def test_stragglers_page(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm", page="stragglers")
    s = reports["dlrm"]["stragglers"]
    alert = texts(at.warning) + texts(at.success)
    answer, _, findings = s["verdict"].partition(": ")  # "<answer>: <finding>; <finding>"
    assert answer == "none"  # DLRM: no rank flagged, which the page says in words
    assert len(alert) == 1 and alert[0].startswith("**No straggler**")
    # two findings: the "; " inside the parentheses of the second is not a cut
    first, second = findings.split("; ", 1)
    assert (
        second.startswith("the most, rank 7") and "(36% of all the waiting; consistency " in second
    )
    assert [f"- {md(first)}", f"- {md(second)}"] == alert[0].splitlines()[1:]
    rows = table(at, "rank", "flagged", "wait_caused_ms")
    assert rows["rank"].iloc[0] == "7"  # the latest rank (highest score) first
    flagged = {str(r["rank"]): r["flagged"] for r in s["ranks"]}
    assert dict(zip(rows["rank"], rows["flagged"], strict=True)) == flagged
    by_rank = {str(r["rank"]): r["wait_caused_ms"] for r in s["ranks"]}
    assert dict(zip(rows["rank"], rows["wait_caused_ms"], strict=True)) == pytest.approx(
        by_rank, rel=5e-3
    )
    # the lateness the verdict quotes ("... ms later than the median rank") is in the table
    excess = {str(r["rank"]): r["excess_ms"] for r in s["ranks"]}
    assert dict(zip(rows["rank"], rows["excess_ms"], strict=True)) == pytest.approx(
        excess, rel=5e-3
    )
    # and the late start the diagnosis names (rank 7 starts ProfilerStep#10 7.5 ms after rank 1,
    # read from the raw traces in tests/test_late_start_real.py)
    start = {str(r["rank"]): r["start_delay_ms"] for r in s["ranks"]}
    assert dict(zip(rows["rank"], rows["start_delay_ms"], strict=True)) == pytest.approx(
        start, rel=5e-3
    )
    assert start["7"] == pytest.approx(7.513, abs=0.02)


def test_nccl_page_with_and_without_logs(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm", page="nccl")
    assert "NCCL information" in texts(at.info)[0]
    at = app(store, monkeypatch, tmp_path, run="dlrm_nccl", page="nccl")
    n = reports["dlrm_nccl"]["nccl"]
    shown = {m.label: m.value for m in at.metric}
    assert shown == {
        "NCCL": ", ".join(n["versions"]),
        "Inter-node network": "Socket",
        "GPU Direct RDMA": "not seen",
        "TCP fallback": "yes",
    }
    assert len(at.warning) == len(n["findings"])
    assert len(charts(at)) == 4  # 2 rings + 2 trees


def test_checklist_page_renders_the_report_section(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm_nccl", page="checklist")
    items = reports["dlrm_nccl"]["checklist"]
    shown = [m.value for m in at.metric]
    counts = [
        str(sum(i["status"] == s for i in items))
        for s in ("attention", "ok", "not_observable", "not_applicable")
    ]
    assert shown == counts
    md = " ".join(texts(at.markdown))
    for i in items:
        assert i["title"] in md
    assert "attention" in md and "TCP" in md


def test_compare_page_tiles_deltas_and_several_runs(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, page="compare")
    at.selectbox(key="compare_before").select("dlrm")
    at.multiselect(key="compare_after").set_value(["gloo", "dlrm_nccl"])
    at.run()
    assert not at.exception, at.exception
    # the DLRM set (8 GPU ranks, NCCL) against the 4-rank gloo run: said to be another job
    other = [w.replace("\\", "") for w in texts(at.warning) if "not the same job" in w]
    assert len(other) == 1 and other[0].startswith("gloo is not the same job as dlrm")
    assert "ranks: 8 → 4" in other[0] and "devices: gpu → cpu" in other[0]
    rows = table(at, "label", "dlrm", "gloo", "dlrm_nccl", "Δ gloo")
    want = compare(reports["dlrm"], reports["gloo"])
    # the page shows the exposed share in % (numbers only in each column), labelled so
    pct = {"exposed_comm_share"}
    assert list(rows["label"]) == [r["label"] + " (%)" * (r["metric"] in pct) for r in want]
    shown_share = rows[rows["label"].str.endswith("(%)")].iloc[0]
    assert shown_share["gloo"] == pytest.approx(
        100 * reports["gloo"]["summary"]["exposed_comm_share"], rel=5e-3
    )
    step = rows[rows["label"] == "step time (ms)"].iloc[0]
    assert step["Δ gloo"] == pytest.approx(
        reports["gloo"]["summary"]["step_ms"] - reports["dlrm"]["summary"]["step_ms"], rel=5e-3
    )
    # Tiles: one column per run, in order, each with its own run's values (5 tiles each).
    tiles = [m for m in at.metric if m.label == "step time"]
    # 3 significant figures: DLRM's 14.775 ms step reads 14.8 ms
    assert [float(t.value.removesuffix(" ms")) for t in tiles] == [
        pytest.approx(reports[r]["summary"]["step_ms"], rel=5e-3)
        for r in ("dlrm", "gloo", "dlrm_nccl")
    ]
    assert tiles[0].value == "14.8 ms"
    base, gloo, same = tiles
    assert base.delta == ""  # the baseline has no arrow
    d = reports["gloo"]["summary"]["step_ms"] - reports["dlrm"]["summary"]["step_ms"]
    assert float(gloo.delta.removesuffix(" ms")) == pytest.approx(d, rel=5e-3)
    assert same.delta == ""  # the same traces (plus a log): no change, no arrow
    share = [m for m in at.metric if m.label == "exposed share of step"]
    assert share[0].value == f"{100 * reports['dlrm']['summary']['exposed_comm_share']:.1f}%"
    # where the change went, gloo's mean rank-step against DLRM's, from the two reports
    went = next(m.value for m in at.markdown if m.value.startswith("**Where the change went:**"))
    mean = {r: pd.DataFrame(reports[r]["decomposition"]["steps"]).groupby("rank")["step_ms"]
            .mean().mean() for r in ("dlrm", "gloo")}  # fmt: skip
    assert md(f"changed by {mean['gloo'] - mean['dlrm']:+.3f} ms") in went
    shown_md = " ".join(texts(at.markdown))
    assert "Mann-Whitney" in " ".join(texts(at.caption)) and "gloo" in shown_md
    # each run's diagnosis and straggler verdict is there whole, as text (a table cell cut the
    # paragraph to its first line)
    for r in ("dlrm", "gloo", "dlrm_nccl"):
        assert md(reports[r]["diagnosis"]["paragraph"]) in shown_md, r
        assert md(reports[r]["stragglers"]["verdict"]) in shown_md, r
    assert not any("compare_diagnosis" in str(getattr(d, "key", "")) for d in at.dataframe)


def test_model_page_predicts_and_moves_with_the_sliders(store, reports, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm", page="model")
    model = reports["dlrm"]["model"]
    rows = table(at, "metric", "measured", "predicted").set_index("metric")
    assert rows.loc["step time", "predicted"] == fmt_ms(model["predicted"]["step_ms"])
    assert rows.loc["step time", "measured"] == fmt_ms(model["measured"]["step_ms"])
    assert rows.loc["verdict", "measured"] == model["measured"]["verdict"]
    # DLRM's embedding all-to-alls are predicted with their own fit: nothing is left out
    assert model["predicted"]["not_modelled"] == {}
    assert set(model["predicted"]["transfer_ms_by_op"]) == {"allreduce", "alltoall"}
    # its 3 all-reduces are too few for a held-out error: the page says the fit is not to be
    # acted on
    assert model["status"] == "not calibrated: 3 held-out predictions, need 4"
    assert [w.value for w in at.warning] == [
        f"Model status: {md(model['status'])}. The prediction and the what-ifs below rest on a "
        "fit whose held-out error is too large, or unknown, to act on."
    ]
    assert len(charts(at)) == len(whatif.KNOBS)  # one curve per knob, each with its own title
    assert len({chart_title(at, i) for i in range(len(whatif.KNOBS))}) == len(whatif.KNOBS)
    # untouched, the sliders predict what the report predicts, to the digit shown
    shown = {m.label: m.value for m in at.metric}
    assert shown["Predicted step time"] == fmt_ms(model["predicted"]["step_ms"])
    widget(at.slider, "wi_accum").set_value(8).run()
    s = whatif.with_knobs(data_scenario(store), {"grad_accum": 8})
    want = whatif.predicted(s, model["measured"]["idle_ms"])
    shown = {m.label: m.value for m in at.metric}
    assert shown["Predicted step time"] == fmt_ms(want["step_ms"])
    # 8 micro-batches per step: the fair comparison is the time of one
    assert shown["Time per micro-batch"] == fmt_ms(want["step_ms"] / 8)
    verdict = f"**Predicted verdict:** {md(want['verdict'])}."
    assert any(m.value.startswith(verdict) for m in at.markdown)
    # the next run's sliders start from its own figures, not from those set on this one
    at.session_state["run"] = "gloo"
    at.run()
    assert not at.exception, at.exception
    assert widget(at.slider, "wi_accum").value == 1
    shown = {m.label: m.value for m in at.metric}
    assert shown["Predicted step time"] == fmt_ms(reports["gloo"]["model"]["predicted"]["step_ms"])


def data_scenario(db):
    con = load_modules(duckdb.connect(str(db)))
    try:
        rid = run_id(con, "dlrm")
        with run_session(con, rid):  # the matching and clock fit computed once, as the page does
            return run_scenario(con, rid)
    finally:
        con.close()


def test_export_page_offers_the_document_and_the_timeline(store, tmp_path, monkeypatch):
    at = app(store, monkeypatch, tmp_path, run="dlrm", page="export")
    assert len(at.get("download_button")) == 3  # HTML, Markdown, Perfetto timeline
    at.selectbox(key="export_baseline").select("gloo").run()
    assert not at.exception, at.exception
    assert "--diff gloo" in at.code[0].value


@pytest.mark.parametrize("run", ["dlrm", "gloo", "dlrm_nccl"])
@pytest.mark.parametrize(
    "page", ["ranks", "timeline", "collectives", "stragglers", "model", "nccl"]
)
def test_every_chart_has_a_title_with_its_unit_and_something_to_draw(
    store, tmp_path, monkeypatch, run, page
):
    at = app(store, monkeypatch, tmp_path, run=run, page=page)
    for i in range(len(charts(at))):
        title = chart_title(at, i)
        # drawings of rank orders (rings, trees) have no unit; every plotted quantity has one
        assert title and ("(" in title or title.startswith(("Ring", "Tree"))), title
        _, rows = chart_data(at, i)
        assert len(rows) > 0, title


def test_a_run_stored_without_files_is_shown(tmp_path, monkeypatch):
    """A run whose rows were stored directly, with no file rows (how the scale benchmarks store
    1,024 ranks): the runs table sums no file sizes. Every page used to fail on its fingerprint
    (int of a missing byte count); the run has 0 files and 0 bytes, and its pages render."""
    db = tmp_path / "direct.duckdb"
    con = ingest_store.connect(db)
    insert_run(con, "direct", simulate(Scenario(hosts=1, ranks_per_host=4, straggler=2)))
    con.close()
    with Store(db) as s:
        row = s.runs().set_index("run").loc["direct"]
    assert (int(row["files"]), int(row["bytes"]), int(row["ranks"])) == (0, 0, 4)
    at = app(db, monkeypatch, tmp_path, run="direct")
    for key in ("overview", "stragglers", "export"):
        at.switch_page(nav.path(key)).run()
        assert not at.exception, (key, at.exception)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A 96-rank run (12 hosts of 8, rank 50 a straggler) stored as rows, and its report."""
    db = tmp_path_factory.mktemp("wide") / "wide.duckdb"
    con = ingest_store.connect(db)
    scn = Scenario(hosts=12, ranks_per_host=8, steps=3, collectives_per_step=4, straggler=50)
    insert_run(con, "wide", simulate(scn))
    con.close()
    with Store(db) as s:
        return db, s.run("wide").report()


def test_many_ranks_are_drawn_in_blocks_and_the_top_of_the_stragglers(wide, tmp_path, monkeypatch):
    """Above 80 ranks a chart row is a block of consecutive ranks: 96 ranks in 48 blocks of 2.
    The heatmap cell is the block's worst rank in that step, the Overview's bar the block's
    mean, both checked against the report's own per-rank figures; the Stragglers page draws
    the 40 highest scores and lists all 96 ranks."""
    db, rep = wide
    at = app(db, monkeypatch, tmp_path, run="wide", page="ranks")
    _, eta = chart_data(at, 0)  # the η heatmap: the lower η of the pair is the worse
    steps = pd.DataFrame(rep["steps"])
    assert eta["rank"].nunique() == 48 and list(eta["rank"].unique()[:2]) == ["0–1", "2–3"]
    for _, cell in eta.sample(10, random_state=0).iterrows():
        first = int(cell["rank"].split("–")[0])
        pair = steps[steps["rank"].isin([first, first + 1]) & (steps["step"] == cell["step"])]
        assert cell["eta"] == pytest.approx(pair["eta"].min())
        assert cell["worst_rank"] == pair.loc[pair["eta"].idxmin(), "rank"]

    at.switch_page(nav.path("overview")).run()
    _, bars = chart_data(at, 0)
    per_block = bars.groupby("rank")["ms"].sum()
    ranks = {r["rank"]: r["step_ms"] for r in rep["decomposition"]["ranks"]}
    assert len(per_block) == 48
    assert per_block["50–51"] == pytest.approx((ranks[50] + ranks[51]) / 2)

    at.switch_page(nav.path("stragglers")).run()
    _, bars = chart_data(at, 0)
    assert len(bars) == 40 and "50" in set(bars["rank"])  # the straggler among them
    assert len(table(at, "rank", "flagged", "wait_caused_ms")) == 96
    assert any("The 40 highest scores of 96 ranks" in c for c in texts(at.caption))


def test_nccl_page_shows_nccl_tests_tables(tmp_path, monkeypatch):
    """The real log 021 holds two nccl-tests tables (tests/test_nccl_tests_real.py reads them
    by hand): the page says what each reached and draws both curves, 28 sizes each."""
    (log,) = (ROOT / "tests" / "data" / "nccl").glob("021_*.log.gz")
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copy(log, d / log.name)
    path = tmp_path / "s.duckdb"
    ingest_dir(path, "tests", d)
    at = app(path, monkeypatch, tmp_path, run="tests", page="nccl")
    assert "nccl-tests results" in texts(at.subheader)
    shown = " ".join(texts(at.markdown))
    for said in ("all_gather_perf on 2 ranks", "peaks at 1.83 GB/s", "all_reduce_perf on 2 ranks",
                 "peaks at 2.16 GB/s"):  # fmt: skip
        assert md(said) in shown
    drawn = [chart_data(at, i) for i in range(len(charts(at)))]
    ((spec, data),) = [(s, d) for s, d in drawn if "Bus bandwidth by message size" in json.dumps(s)]
    assert len(data) == 56 and data["table"].nunique() == 2
    peak = data.loc[data["bytes"] == 1 << 20].set_index("table")["busbw_gbs"].to_dict()
    assert peak == {"1: all_gather": 1.83, "2: all_reduce": 2.16}  # lines 112 and 245 of the log
