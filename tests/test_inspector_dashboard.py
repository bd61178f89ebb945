"""The NCCL Inspector page through Streamlit's AppTest, and the post-mortem's Inspector section:
numbers checked against the generator's truth (sample_traces/generate_inspector.py)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from apptest_support import fresh_caches, open_app  # noqa: F401 (an autouse fixture)
from conftest import DLRM
from dashboard_support import ingest_dir, report_of

from commwall.dashboard.export import render_html, render_markdown
from commwall.sample_traces.generate_inspector import US_PER_MIN, JobSpec, write_job, write_prom

SPEC = JobSpec(hosts=4, gpus=2, minutes=40, slow_rank=3, slow_from_min=20.0, nic_host=2,
               nic_from_min=10.0, verbose=True, ring_size=8, stall_rank=5,
               stall_minutes=(30.0, 34.0))  # fmt: skip
HEADING = "Over the whole run (NCCL Inspector)"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("insp_app")
    truth = write_job(d / "job", SPEC)
    (d / "job" / "ground_truth.json").unlink(missing_ok=True)
    path = d / "s.duckdb"
    ingest_dir(path, "job", d / "job")
    ingest_dir(path, "dlrm", DLRM)
    return path, truth


def app(db, monkeypatch, tmp_path, run):
    return open_app(db, monkeypatch, tmp_path, run, "inspector", timeout=180)


def _datasets(chart) -> list[pd.DataFrame]:
    return [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in chart.proto.datasets]


def _plain(values) -> list[str]:
    return [v.replace("\\", "") for v in values]


def test_the_page_shows_the_generated_job(store, monkeypatch, tmp_path):
    path, truth = store
    at = app(path, monkeypatch, tmp_path, "job")
    # the caption: the records the generator wrote
    (cap,) = [c for c in _plain(x.value for x in at.caption) if c[:1].isdigit()]
    assert cap.startswith(f"{truth.n_coll_records:,} collective, {truth.n_p2p_records:,} "
                          "point-to-point")  # fmt: skip
    text = "\n".join(_plain(m.value for m in at.markdown))
    slow_host = truth.ranks[SPEC.slow_rank]["host"]
    assert f"Rank {SPEC.slow_rank} on host {slow_host} was last in" in text
    assert f"Host h{SPEC.nic_host:02d} is in every communicator whose bandwidth fell" in text
    lost = sum(n for per in truth.dropped.values() for n in per.values())
    assert f"({lost:,} collectives," in text  # truth.dropped: collective records lost
    # the communicator first offered is one whose bandwidth fell or that has a straggler: the
    # DP one (every rank) first
    dp = next(cid for cid, c in truth.comms.items() if c["name"] == "DP")
    box = at.selectbox[0]
    assert box.label == "Communicator" and box.value == dp
    assert set(box.options) == {f"{c['name']} ({cid}, {len(c['members'])} ranks)"
                                for cid, c in truth.comms.items()}  # fmt: skip
    # the tables: the straggler's row names the generator's slow rank and its host
    tables = [t.value for t in at.dataframe]
    stragglers = next(t for t in tables if "last in" in t.columns)
    row = stragglers[stragglers["communicator"] == "DP"].iloc[0]
    assert (row["rank"], row["host"]) == (SPEC.slow_rank, slow_host)
    assert row["from (UTC)"] == "00:20 UTC"  # START_US is midnight; slow from minute 20
    losses = next(t for t in tables if "collectives lost" in t.columns)
    assert int(losses["collectives lost"].sum()) == lost
    # two charts: bandwidth over time with its change points, and who was last
    charts = at.get("vega_lite_chart")
    assert len(charts) == 2
    lines, rules = (_datasets(charts[0]) + [None])[:2]
    if "change" in lines.columns:
        lines, rules = rules, lines
    # DP: one series (all-reduce of 1.5 GiB) over the 40 minutes; one change point, where the
    # NIC of its host h02 degrades (minute 10), from 480 to 210 GB/s (± the 2 % jitter)
    assert lines["series"].nunique() == 1 and len(lines) == SPEC.minutes
    assert len(rules) == 1
    assert rules["time"].iloc[0] == pd.Timestamp(SPEC.start_us + 10 * US_PER_MIN, unit="us")
    assert "fell from 48" in rules["change"].iloc[0] or "fell from 47" in rules["change"].iloc[0]
    (grid,) = _datasets(charts[1])
    slow = grid[grid["who"] == f"rank {SPEC.slow_rank} ({slow_host})"]
    after = slow[slow["time"] >= pd.Timestamp(SPEC.start_us + 20 * US_PER_MIN, unit="us")]
    assert len(after) == 20 and (after["share"] == 1.0).all()  # last in every instance
    # no snake_case or Python literal in what the page says
    shown = text + "\n".join(_plain(x.value for x in at.caption))
    assert "None" not in shown and "shortest_execution" not in shown


def test_a_run_without_inspector_output_says_what_to_upload(store, monkeypatch, tmp_path):
    path, _ = store
    at = app(path, monkeypatch, tmp_path, "dlrm")
    (info,) = [i.value for i in at.info]
    assert info.startswith("**NCCL Inspector output** is not available for this run.")
    assert "Upload NCCL Inspector output" in info
    assert not at.get("vega_lite_chart")


def test_the_postmortem_has_the_inspector_section_only_when_present(store):
    path, truth = store
    job = report_of(path, "job")
    dlrm = report_of(path, "dlrm")
    html_doc = render_html(job, charts=False)
    md_doc = render_markdown(job)
    assert HEADING in html_doc and f"## {HEADING}" in md_doc
    slow_host = truth.ranks[SPEC.slow_rank]["host"]
    for doc in (html_doc, md_doc):
        assert f"Rank {SPEC.slow_rank} on host {slow_host} was last in" in doc.replace("\\", "")
        assert "00:10 UTC" in doc  # the NIC degrades at minute 10
    assert HEADING not in render_html(dlrm, charts=False)
    assert HEADING not in render_markdown(dlrm)
    # the section is not also dumped generically under its key
    assert "<h2 id='inspector'>Inspector</h2>" not in html_doc


def test_a_prometheus_only_run_shows_its_buckets(tmp_path, monkeypatch):
    spec = JobSpec(hosts=2, gpus=2, minutes=3)
    written = write_prom(tmp_path / "prom", spec)
    path = tmp_path / "s.duckdb"
    ingest_dir(path, "prom", tmp_path / "prom")
    at = app(path, monkeypatch, tmp_path, "prom")
    (cap,) = [c.value for c in at.caption if "Prometheus" in c.value]
    assert "Prometheus textfiles only" in cap.replace("\\", "")
    (buckets,) = [t.value for t in at.dataframe]
    dp = buckets[buckets["communicator"] == "DP"].iloc[0]
    # every rank wrote one DP all-reduce bucket: the least is the smallest value written
    values = [
        v for f in written.values() for k, v in f.items() if k[:3] == ("bus", "DP", "AllReduce")
    ]
    assert dp["GPUs"] == len(values) == spec.hosts * spec.gpus
    assert dp["least (GB/s)"] == pytest.approx(min(values), rel=1e-3)
