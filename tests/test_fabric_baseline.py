"""A run measured against its fabric (analysis/fabric/baseline.py, the report's `fabric`
section): GPU traces of the synthetic generator (tests/synthetic_traces.py, whose transfer times
are its ground truth) ingested into one run with real nccl-tests tables of 8 × A100 over NVSwitch
(tests/data/nccl_tests, notices there). Expected figures: the generator's own arrays and the
tables' lines read by hand (quoted)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, analysis_store
from synthetic_traces import ELEM, Scenario, Sim, msg_elems, simulate, write_kineto

from commwall.analysis.fabric.baseline import (
    RATIO_LIMIT,
    fabric_baseline,
    fabric_check,
    fabric_sentence,
)
from commwall.analysis.report import checklist
from commwall.analysis.report.build import build_report
from commwall.analysis.report.shape import FabricBaseline
from commwall.cli.text_report import render_text

TESTS = DATA / "nccl_tests"
A100 = "superbench_a100x8_nvswitch_{}.log"
# out-of-place times (µs) read by hand from the A100 tables:
# allreduce.log line 43: `67108864  16777216  float  sum  584.5  114.81  200.91  N/A ...`
# allreduce.log line 42: `33554432  8388608  float  sum  374.3  89.65  156.89  N/A ...`
# allgather.log line 43: `67108864  2097152  float  379.7  176.74  154.65  N/A ...`
# reducescatter.log line 43: `67108864  2097152  float  sum  356.1  188.45  164.89  N/A ...`
TABLE_US = {
    ("allreduce", 64 << 20): 584.5,
    ("allreduce", 32 << 20): 374.3,
    ("allgather", 64 << 20): 379.7,
    ("reduce_scatter", 64 << 20): 356.1,
}
FACTOR = {"allreduce": 2 * 7 / 8, "allgather": 7 / 8, "reduce_scatter": 7 / 8}


def truth(sim: Sim) -> dict[tuple[str, int], tuple[int, float]]:
    """(op, bytes) → (calls, median bus bandwidth GB/s) from the generator's true times: the
    transfer of call k is the median rank's end minus the last arrival."""
    by: dict[tuple[str, int], list[float]] = {}
    n = sim.scn.world
    for k, op in enumerate(sim.ops):
        size = msg_elems(op, int(sim.nelems[k]), n)[2] * ELEM
        xfer_ns = float(np.median(sim.end[:, k])) - float(sim.arrive[:, k].max())
        by.setdefault((op, size), []).append(FACTOR[op] * size / xfer_ns)  # B/ns = GB/s
    return {key: (len(v), float(np.median(v))) for key, v in by.items()}


def make_run(tmp_path: Path, busbw: float, tables: tuple[str, ...]):
    sim = simulate(Scenario(hosts=1, ranks_per_host=8, steps=2, collectives_per_step=12,
                            busbw_GBps=busbw, alpha_us=10.0))  # fmt: skip
    root = tmp_path / "run"
    write_kineto(sim, root)
    for t in tables:
        shutil.copy(TESTS / A100.format(t), root)
    return sim, analysis_store(tmp_path / "s.duckdb", (root,))


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    """Training at 20 GB/s bus bandwidth against the A100 tables of three ops."""
    sim, con = make_run(
        tmp_path_factory.mktemp("slow"), 20.0, ("allreduce", "allgather", "reducescatter")
    )
    yield sim, con
    con.close()


def test_each_class_against_the_table_of_its_op(slow_run):
    sim, con = slow_run
    section = fabric_baseline(con, 1)
    assert section["present"] and section["n_classes"] == 12  # 3 ops × 4 sizes
    got = {(c["op"], c["size_bytes"]): c for c in section["classes"]}
    for key, (calls, busbw) in truth(sim).items():
        c = got[key]
        assert c["n_calls"] == calls == 2
        # the store keeps the transfer in whole ns (±0.5 ns of ≥ 190 µs)
        assert c["busbw_GBps"] == pytest.approx(busbw, rel=2e-5)
        assert c["baseline_basis"] == "nccl-tests of the same op" and not c["extrapolated"]
        if key in TABLE_US:  # a measured size of the table: its own figure
            op, size = key
            base = FACTOR[op] * size / (TABLE_US[key] * 1e3)
            assert c["baseline_busbw_GBps"] == pytest.approx(base, rel=1e-9)
            assert c["ratio"] == pytest.approx(busbw / base, rel=1e-5)
    # the class that costs the run the most transfer: the 64 MiB all-reduce, ~20 / 200.9 GB/s
    top = section["classes"][0]
    assert (top["op"], top["size_bytes"]) == ("allreduce", 64 << 20)
    assert top["ratio"] < RATIO_LIMIT and section["status"] == "attention"


def test_the_verdict_in_words(slow_run):
    sim, con = slow_run
    section = fabric_baseline(con, 1)
    sentence = fabric_sentence({"fabric": section})
    assert sentence is not None and len(sentence.split()) <= 40
    busbw = truth(sim)[("allreduce", 64 << 20)][1]
    base = 1.75 * (64 << 20) / 584.5e3
    assert sentence.startswith(
        f"The 64 MiB all-reduce buckets ran at {busbw:.3g} GB/s bus bandwidth in training "
        f"against {base:.3g} GB/s for that size in nccl-tests on this cluster "
        f"({100 * busbw / base:.0f}%): the transfer is slow inside training"
    )
    check = fabric_check({"fabric": section})
    assert check is not None and check["status"] == "attention"
    assert check["evidence"].startswith(sentence)


def test_report_text_and_checklist(slow_run):
    _, con = slow_run
    from test_report_types import problems

    report = build_report(con, "run")
    assert report["fabric"]["present"]
    assert problems(report["fabric"], FabricBaseline, "fabric") == []  # the declared shape
    # the diagnosis says it: the brief's "links" point and the paragraph (the generator's
    # 20 GB/s against the table's 200.92 GB/s at 64 MiB, line 43)
    links = next(p["text"] for p in report["diagnosis"]["brief"] if p["topic"] == "links")
    assert "64 MiB all-reduce" in links and "201 GB/s" in links
    assert links in report["diagnosis"]["paragraph"]
    item = next(i for i in report["checklist"] if i["key"] == "fabric_baseline")
    assert item["status"] == "attention" and "64 MiB all-reduce" in item["evidence"]
    text = render_text(report, lambda df: df.to_string(index=False))
    assert "== Collectives against nccl-tests on this fabric" in text
    assert "superbench_a100x8_nvswitch_allreduce.log#1" in text
    # the post-mortem's table: the 64 MiB all-reduce first, its ratio as a percentage
    from commwall.dashboard.export import fabric_rows

    first = fabric_rows(report)[0]
    assert (first["op"], first["size (B)"]) == ("all-reduce", "67108864")
    assert first["training ÷ nccl-tests"] == f"{100 * report['fabric']['classes'][0]['ratio']:.1f}%"


def test_an_op_without_a_table_is_priced_from_all_reduce(tmp_path):
    # only the all-reduce table: an all-gather of 64 MiB on 8 ranks puts 7/8·S on the links per
    # rank, as an all-reduce of 32 MiB does (2·7/8·S/2): line 42's 374.3 µs
    sim, con = make_run(tmp_path, 20.0, ("allreduce",))
    try:
        c = next(
            c for c in fabric_baseline(con, 1)["classes"]
            if (c["op"], c["size_bytes"]) == ("allgather", 64 << 20)
        )  # fmt: skip
        assert c["baseline_basis"] == "nccl-tests all-reduce, carried to allgather"
        assert c["baseline_time_ms"] == pytest.approx(0.3743)
        base = 7 / 8 * (64 << 20) / 374.3e3
        assert c["baseline_busbw_GBps"] == pytest.approx(base)
        assert c["ratio"] == pytest.approx(truth(sim)[("allgather", 64 << 20)][1] / base)
    finally:
        con.close()


def test_a_run_that_gets_what_the_fabric_gives(tmp_path):
    # 250 GB/s in the generator: the 64 MiB all-reduce's transfer is 10 µs + 1.75·64 MiB / 250
    # GB/s = 479.8 µs, faster than nccl-tests' 584.5 µs at that size
    sim, con = make_run(tmp_path, 250.0, ("allreduce", "allgather", "reducescatter"))
    try:
        section = fabric_baseline(con, 1)
        assert section["status"] == "ok"
        top = section["classes"][0]
        assert top["ratio"] == pytest.approx(
            truth(sim)[("allreduce", 64 << 20)][1] / (1.75 * (64 << 20) / 584.5e3), rel=1e-6
        )
        assert "training gets what the fabric gives" in (fabric_sentence({"fabric": section}) or "")
    finally:
        con.close()


def test_no_baseline(tmp_path):
    sim, con = make_run(tmp_path, 20.0, ())
    try:
        section = fabric_baseline(con, 1)
        assert not section["present"] and "no nccl-tests table" in (section["reason"] or "")
        report = {"fabric": section}
        assert fabric_sentence(report) is None and fabric_check(report) is None
        items = {i["key"]: i for i in checklist.evaluate(report)}
        assert items["fabric_baseline"]["status"] == "not_observable"
    finally:
        con.close()


# fabric_classes (analysis/sql/fabric_baseline.sql), table-driven: scenario → the classes the
# generator made (op and bytes of every call, its true transfer), one row per (op, size).
CLASSES_CASES = [
    # hosts, ranks per host, steps, collectives per step, clock offsets (µs) per host
    (1, 8, 2, 12, ()),
    (2, 4, 3, 6, (0.0, 1500.0)),
    (4, 2, 1, 5, (0.0, -300.0, 200.0, 900.0)),
]


@pytest.mark.parametrize("hosts,per_host,steps,per_step,offsets", CLASSES_CASES)
def test_fabric_classes(tmp_path, hosts, per_host, steps, per_step, offsets):
    sim = simulate(Scenario(hosts=hosts, ranks_per_host=per_host, steps=steps,
                            collectives_per_step=per_step, clock_offsets_us=offsets))  # fmt: skip
    write_kineto(sim, tmp_path / "r")
    con = analysis_store(tmp_path / "s.duckdb", (tmp_path / "r",))
    rid = 1
    n = sim.scn.world
    want: dict[tuple[str, int], list[float]] = {}
    for k, op in enumerate(sim.ops):
        size = msg_elems(op, int(sim.nelems[k]), n)[2] * ELEM
        want.setdefault((op, size), []).append(
            float(np.median(sim.end[:, k])) - float(sim.arrive[:, k].max())
        )
    rows = con.execute("SELECT * FROM fabric_classes(?)", [rid]).fetchall()
    # one host: the store's transfer is the truth to the whole ns; across hosts the clocks are
    # aligned by a fit whose error is within the generator's end jitter
    tol = 1.0 if hosts == 1 else float(sim.scn.end_jitter_ns)
    assert len(rows) == len(want)
    totals = [r[5] for r in rows]
    assert totals == sorted(totals, reverse=True)  # largest summed transfer first
    for op, size, ranks, calls, med, total, busbw in rows:
        xfers = want[(op, size)]
        assert (ranks, calls) == (n, len(xfers))
        assert med == pytest.approx(np.median(xfers), abs=tol)
        assert total == pytest.approx(sum(xfers), abs=tol * len(xfers))
        expect = np.median([FACTOR_N(op, n) * size / x for x in xfers])
        assert busbw == pytest.approx(expect, rel=tol / min(xfers) + 1e-5)
    con.close()


def FACTOR_N(op: str, n: int) -> float:  # noqa: N802 (nccl-tests' factor, by hand)
    return 2 * (n - 1) / n if op == "allreduce" else (n - 1) / n
