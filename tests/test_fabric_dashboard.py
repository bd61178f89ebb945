"""The Model page shows a run against its fabric: the table of classes and the chart, with
human labels (Streamlit's AppTest; the run: the generator's 8-rank GPU traces at 20 GB/s
with the real 8 × A100 NVSwitch all-reduce table, tests/data/nccl_tests)."""

from __future__ import annotations

import shutil

import streamlit as st
from conftest import DATA, ROOT
from streamlit.testing.v1 import AppTest
from synthetic_traces import Scenario, simulate, write_kineto

from commwall.dashboard import nav
from commwall.dashboard.database import DB_ENV, UPLOAD_ENV
from commwall.dashboard.fabric_chart import fabric_frame
from commwall.ingest import discover, store

APP = str(ROOT / "dashboard" / "app.py")


def test_model_page_shows_the_run_against_nccl_tests(tmp_path, monkeypatch):
    sim = simulate(Scenario(hosts=1, ranks_per_host=8, steps=2, collectives_per_step=12,
                            busbw_GBps=20.0, alpha_us=10.0))  # fmt: skip
    run = tmp_path / "run"
    write_kineto(sim, run)
    shutil.copy(DATA / "nccl_tests" / "superbench_a100x8_nvswitch_allreduce.log", run)
    db = tmp_path / "s.duckdb"
    con = store.connect(db)
    store.ingest(con, "fabric run", discover.expand([str(run)]))
    con.close()
    st.cache_data.clear()
    st.cache_resource.clear()
    monkeypatch.setenv(DB_ENV, str(db))
    monkeypatch.setenv(UPLOAD_ENV, str(tmp_path / "uploads"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["run"] = "fabric run"
    at.run()
    at.switch_page(nav.path("model")).run()
    assert not at.exception, at.exception
    heads = [s.value for s in at.subheader]
    assert "The run against nccl-tests on its fabric" in heads
    df = next(d.value for d in at.dataframe if "training ÷ nccl-tests" in d.value.columns)
    # 64 MiB all-reduce first (the most transfer time); the all-gather and reduce-scatter
    # priced from the all-reduce table, as the last column says
    first = df.iloc[0]
    assert (first["collective"], first["message size"]) == ("all-reduce", "64 MiB")
    assert any("carried to allgather" in x for x in df["priced from"])
    assert all("_" not in c for c in df.columns)  # human labels
    shown = [m.value.replace("\\", "") for m in at.markdown]  # md() escapes markup characters
    assert any("64 MiB all-reduce buckets" in m for m in shown)


def test_chart_frame_has_both_sources():
    section = {
        "tables": [{"op": "allreduce", "n_ranks": 8,
                    "curve": [{"size_bytes": 1024, "busbw_GBps": 1.5},
                              {"size_bytes": 2048, "busbw_GBps": 2.5}]}],
        "classes": [{"op": "reduce_scatter", "n_ranks": 8, "size_bytes": 2048,
                     "busbw_GBps": 1.0}],
    }  # fmt: skip
    df = fabric_frame(section)
    assert list(df["source"]) == ["nccl-tests", "nccl-tests", "training"]
    assert list(df["series"]) == ["nccl-tests all-reduce (8 ranks)"] * 2 + [
        "training reduce-scatter (8 ranks)"
    ]


def test_model_page_measures_the_run_against_another_runs_tables(tmp_path, monkeypatch):
    # "train": the generator's traces alone; "bench": the real A100 all-reduce table alone
    sim = simulate(Scenario(hosts=1, ranks_per_host=8, steps=2, collectives_per_step=12,
                            busbw_GBps=20.0, alpha_us=10.0))  # fmt: skip
    write_kineto(sim, tmp_path / "train")
    (tmp_path / "bench").mkdir()
    shutil.copy(
        DATA / "nccl_tests" / "superbench_a100x8_nvswitch_allreduce.log", tmp_path / "bench"
    )
    db = tmp_path / "s.duckdb"
    con = store.connect(db)
    for name in ("train", "bench"):
        store.ingest(con, name, discover.expand([str(tmp_path / name)]))
    con.close()
    st.cache_data.clear()
    st.cache_resource.clear()
    monkeypatch.setenv(DB_ENV, str(db))
    monkeypatch.setenv(UPLOAD_ENV, str(tmp_path / "uploads"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["run"] = "train"
    at.run()
    at.switch_page(nav.path("model")).run()
    assert not at.exception, at.exception
    box = next(b for b in at.selectbox if b.label == "Baseline (nccl-tests) run")
    assert box.options == ["train (this run)", "bench"] and box.value == "train"
    assert "The run against nccl-tests on its fabric" not in [s.value for s in at.subheader]
    box.set_value("bench").run()
    assert not at.exception, at.exception
    assert "The run against nccl-tests on its fabric" in [s.value for s in at.subheader]
    df = next(d.value for d in at.dataframe if "training ÷ nccl-tests" in d.value.columns)
    assert (df.iloc[0]["collective"], df.iloc[0]["message size"]) == ("all-reduce", "64 MiB")
    shown = [m.value.replace("\\", "") for m in at.markdown]
    assert any("of run bench" in m and "compare with care" in m for m in shown)
    # the Export page prices the post-mortem from the run chosen here, and says so in its command
    at.switch_page(nav.path("export")).run()
    assert not at.exception, at.exception
    picker = next(b for b in at.selectbox if b.label.startswith("Collectives priced from"))
    assert picker.value == "bench"
    assert any("--baseline bench" in c.value for c in at.code)
