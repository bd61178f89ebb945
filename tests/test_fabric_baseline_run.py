"""A run measured against ANOTHER run's nccl-tests tables (`commwall report --baseline RUN`,
analysis/fabric/baseline.py) and the caveat when the tables measured other hardware.

The training run: the synthetic generator's 8-rank GPU traces on one host (tests/
synthetic_traces.py: its transfer times are the ground truth, its GPU "NVIDIA H100"), with no
nccl-tests table. The baseline run: the real 8 × A100 NVSwitch all-reduce table alone
(tests/data/nccl_tests/superbench_a100x8_nvswitch_allreduce.log). Expected figures: the
generator's arrays and the table's lines read by hand (quoted)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import DATA
from synthetic_traces import Scenario, simulate, write_kineto
from test_fabric_baseline import truth

from commwall.analysis.api import Store
from commwall.analysis.db import RunNotFound, load_modules, open_db
from commwall.analysis.fabric.baseline import fabric_caveat, fabric_check, fabric_sentence
from commwall.analysis.fabric.tables import Table, runs_with_tables
from commwall.analysis.report import cache as report_cache
from commwall.analysis.report import run_cache
from commwall.analysis.report.build import build_report
from commwall.cli.main import main
from commwall.ingest import discover, store

TABLE = DATA / "nccl_tests" / "superbench_a100x8_nvswitch_allreduce.log"
# superbench_a100x8_nvswitch_allreduce.log line 43 (out-of-place time and bus bandwidth):
# `    67108864      16777216     float     sum    584.5  114.81  200.91    N/A ...`
US_64MIB, BUSBW_64MIB = 584.5, 200.91
# line 42: `    33554432       8388608     float     sum    374.3   89.65  156.89    N/A ...`
US_32MIB, BUSBW_32MIB = 374.3, 156.89


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Store with run "train" (traces, no table) and run "bench" (the A100 table only)."""
    tmp = tmp_path_factory.mktemp("two")
    sim = simulate(Scenario(hosts=1, ranks_per_host=8, steps=2, collectives_per_step=12,
                            busbw_GBps=20.0, alpha_us=10.0))  # fmt: skip
    write_kineto(sim, tmp / "train")
    (tmp / "bench").mkdir()
    shutil.copy(TABLE, tmp / "bench")
    db = tmp / "s.duckdb"
    w = store.connect(db)
    for name in ("train", "bench"):
        store.ingest(w, name, discover.expand([str(tmp / name)]))
    w.close()
    return sim, db


def test_the_run_against_another_runs_table(two_runs):
    sim, db = two_runs
    con = open_db(db)
    try:
        assert runs_with_tables(con) == ["bench"]
        alone = build_report(con, "train", keep_going=False)["fabric"]
        assert alone is not None and not alone["present"]
        assert "no nccl-tests table in this run" in (alone["reason"] or "")
        assert alone["baseline_run"] is None
        report = build_report(con, "train", keep_going=False, baseline="bench")
    finally:
        con.close()
    f = report["fabric"]
    assert f is not None and f["present"]
    assert f["baseline_run"] == "bench" and f["source"] == "nccl-tests tables of run bench"
    got = {(c["op"], c["size_bytes"]): c for c in f["classes"]}
    for size, us, busbw in ((64 << 20, US_64MIB, BUSBW_64MIB), (32 << 20, US_32MIB, BUSBW_32MIB)):
        c = got[("allreduce", size)]
        assert c["baseline"] == "superbench_a100x8_nvswitch_allreduce.log#1"
        assert c["baseline_basis"] == "nccl-tests of the same op"
        assert c["baseline_time_ms"] == pytest.approx(us / 1e3)
        # the table's printed bus bandwidth at that size, to the rounding of the printed time
        # (584.5 µs to ±0.05: 1e-4 of it)
        assert c["baseline_busbw_GBps"] == pytest.approx(busbw, rel=1e-4)
        train = truth(sim)[("allreduce", size)][1]
        assert c["ratio"] == pytest.approx(train / (1.75 * size / (us * 1e3)), rel=1e-5)
    # the verdict names the baseline run; the A100 table against the generator's H100
    assert "in nccl-tests of run bench" in (fabric_sentence(report) or "")
    assert f["caveat"] == (
        "The nccl-tests table is from 8 × A100 but the run ran on H100: compare with care."
    )
    assert f["sentence"] is not None and f["sentence"].endswith(f["caveat"])
    check = fabric_check(dict(report))
    assert check is not None and check["evidence"].endswith(f["caveat"])
    from commwall.dashboard.export import fabric_rows

    rows = fabric_rows(report)
    assert isinstance(rows, list)
    assert rows[0]["priced from"] == "superbench_a100x8_nvswitch_allreduce.log#1 (run bench)"


def test_api_and_cli(two_runs, capsys):
    _, db = two_runs
    with Store(db) as s:
        assert s.fabric_runs() == ["bench"]
        section = s.run("train").fabric_section("bench")
        assert section["present"] and section["baseline_run"] == "bench"
        assert s.run("train").fabric_section("train")["baseline_run"] is None
        with pytest.raises(RunNotFound):
            s.run("train").fabric_section("nope")
    assert main(["report", "--db", str(db), "--run", "train", "--baseline", "bench",
                 "--format", "json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    top = out["fabric"]["classes"][0]
    assert (top["op"], top["size_bytes"]) == ("allreduce", 64 << 20)
    assert top["baseline_busbw_GBps"] == pytest.approx(BUSBW_64MIB, rel=1e-4)
    assert main(["report", "--db", str(db), "--run", "train", "--baseline", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_the_kept_report_is_keyed_by_the_baseline(two_runs, monkeypatch):
    _, db = two_runs
    monkeypatch.setattr(report_cache, "ENABLED", True)
    monkeypatch.setenv(run_cache.ENV, "1")
    con = load_modules(store.connect(db, read_only=True))
    try:
        rid, base = 1, 2
        assert report_cache.fingerprint(con, rid) != report_cache.fingerprint(con, rid, base)
        build_report(con, "train", keep=True)
        build_report(con, "train", keep=True, baseline="bench")
        kept = sorted(p.name for p in Path(f"{db}.cache").glob("report-run*.json"))
        # one per baseline: keeping one does not remove the other
        assert [k.split("-")[1] for k in kept] == ["run1", "run1b2"]
        plain, against = report_cache.load(con, rid)[0], report_cache.load(con, rid, base)[0]
        assert plain is not None and against is not None
        assert not plain["fabric"]["present"] and against["fabric"]["baseline_run"] == "bench"
    finally:
        con.close()


def table(gpu: str | None, ranks: int | None, nodes: int | None) -> Table:
    return Table("t.log", 1, 1, "allreduce", "header", ranks, "devices", nodes, gpu,
                 (1024, 2048), (10.0, 11.0), (None, None))  # fmt: skip


# fabric_caveat, table-driven: (table GPU, ranks, nodes), (run GPUs, run nodes, class ranks) →
# the sentence, or None when nothing known differs.
CAVEATS = [
    (("A100-SXM4-40GB", 8, 1), (["NVIDIA H100 80GB HBM3"], 1, 8),
     "The nccl-tests table is from 8 × A100 but the run ran on H100: compare with care."),
    # another memory size of the same GPU is the same GPU
    (("A100-SXM4-40GB", 8, 1), (["NVIDIA A100-SXM4-80GB"], 1, 8), None),
    # the run's GPU unknown: nothing said of it
    (("A100-SXM4-40GB", 8, 1), ([], 1, 8), None),
    (("A100-SXM4-40GB", 8, 1), ([], None, 8), None),
    # NVLink in one node against a run across 4 nodes of 32 ranks
    (("NVIDIA H100 80GB HBM3", 8, 1), (["NVIDIA H100 80GB HBM3"], 4, 32),
     "The nccl-tests table is from 8 × H100 on 1 node but the run ran across 4 nodes with 32 "
     "ranks: compare with care."),
    # 80 ranks on 10 nodes against 64 on 8: not marked
    (("NVIDIA H100 80GB HBM3", 80, 10), (["NVIDIA H100 80GB HBM3"], 8, 64), None),
    (("NVIDIA H100 PCIe", 4, 1), (["NVIDIA H100 80GB HBM3"], 1, 4),
     "The nccl-tests table is from 4 × H100 PCIe but the run ran on H100: compare with care."),
    # a table without a GPU name (EFA log) and a run of another size
    ((None, 16, 2), (["NVIDIA H100 80GB HBM3"], 2, 4),
     "The nccl-tests table is from 16 ranks but the run ran with 4 ranks: compare with care."),
]  # fmt: skip


@pytest.mark.parametrize("tab,run,want", CAVEATS)
def test_fabric_caveat(tab, run, want):
    assert fabric_caveat(table(*tab), *run) == want


def test_export_prices_from_another_run(two_runs, capsys):
    _, db = two_runs
    base = ["export", "--db", str(db), "--run", "train", "--format", "md", "--out", "-"]
    assert main(base) == 0
    assert "no nccl-tests table in this run" in capsys.readouterr().out
    assert main([*base, "--baseline", "bench"]) == 0
    doc = capsys.readouterr().out
    # the 64 MiB all-reduce class's row: its baseline bus bandwidth is line 43's figure
    row = next(ln for ln in doc.splitlines() if "| 67108864 |" in ln and "all-reduce" in ln)
    cells = [c.strip().replace("\\", "") for c in row.strip("|").split("|")]  # md escapes
    assert float(cells[4]) == pytest.approx(BUSBW_64MIB, rel=1e-4)
    assert cells[6] == "superbench_a100x8_nvswitch_allreduce.log#1 (run bench)"
    assert main([*base[:-4], "--format", "perfetto", "--out", "-", "--baseline", "bench"]) == 2
    assert "not a timeline" in capsys.readouterr().err
