"""Ground truth on real traces: the injected gloo stragglers (compute and sleep) are named and
classified, no other rank is; on the one-step DLRM set rank 7 causes the most waiting but one step
of 8 collectives is too little evidence to call it a persistent straggler; the report keys."""

from __future__ import annotations

import json
from contextlib import ExitStack

import pytest
from conftest import DLRM, SAMPLES, analysis_store
from kineto_truth import arrivals, collective_starts

from commwall.analysis.collectives.instances import collectives_section
from commwall.analysis.collectives.stragglers import (
    straggler_ranks,
    straggler_steps,
    stragglers_section,
)
from commwall.analysis.db import run_id
from commwall.analysis.policy import STRAGGLER_MIN_T
from commwall.analysis.report.build import SECTIONS
from commwall.analysis.report.session import run_session

SETS = (DLRM, SAMPLES / "gloo_4rank_compute", SAMPLES / "gloo_4rank_sleep")


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    c = analysis_store(tmp_path_factory.mktemp("real") / "store.duckdb", SETS)
    # every run's intermediate tables computed once for the module, as a report does (the
    # macros answer the same inside a session: tests/test_analysis_session.py)
    with ExitStack() as sessions:
        for d in SETS:
            sessions.enter_context(run_session(c, run_id(c, d.name)))
        yield c
    c.close()


GLOO = [("gloo_4rank_compute", "compute"), ("gloo_4rank_sleep", "other")]  # set, expected kind


def gloo_arrivals(name: str) -> dict[int, dict]:
    """Per rank, arrivals read from the raw traces: the gloo:all_reduce calls matched by order
    (one host, one clock: no alignment needed), by plain Python (tests/kineto_truth.py)."""
    starts = {r: collective_starts(SAMPLES / name / f"rank{r}.pt.trace.json.gz", "^gloo:")
              for r in range(4)}  # fmt: skip
    return arrivals(starts)


@pytest.mark.parametrize("name,kind", GLOO, ids=[g[0] for g in GLOO])
def test_gloo_straggler_named_and_classified(con, name, kind):
    truth = json.loads((SAMPLES / name / "ground_truth.json").read_text())
    n_last = {r: a["n_last"] for r, a in gloo_arrivals(name).items()}
    df = straggler_ranks(con, run_id(con, name)).set_index("rank")
    assert df.index[df["flagged"]].tolist() == [truth["straggler_rank"]]
    s = df.loc[truth["straggler_rank"]]
    assert s["kind"] == kind and s["host"] == "vm"
    assert df["n_last"].to_dict() == n_last and df["n_instances"].eq(48).all()
    assert s["late_fraction"] > 0.6 and df.drop(index=2)["late_fraction"].max() < 0.15
    # it makes the others wait, and waits least itself
    assert df["caused_ns"].idxmax() == 2 and df["wait_ns"].idxmin() == 2
    assert s["cost_share"] > 0.3 and df.drop(index=2)["cost_share"].max() < 0.1
    # it causes most of the waiting in every step: its mean share over the 6 steps is far above
    # the fair 1/4, consistently (t at least the policy line)
    assert s["mean_share"] > 0.6 and s["consistency_t"] >= STRAGGLER_MIN_T
    assert df.drop(index=2)["consistency_t"].max() < 0
    # flagged in some steps on that step's figures alone (8 instances per step)
    assert s["steps_flagged"] >= 2 and s["n_steps"] == len(truth["steps"])


def test_compute_evidence_separates_the_two_gloo_stragglers(con):
    comp = straggler_ranks(con, run_id(con, "gloo_4rank_compute")).set_index("rank")
    sleep = straggler_ranks(con, run_id(con, "gloo_4rank_sleep")).set_index("rank")
    # extra matmuls: ~40 ms more operator work per step; sleep: none
    assert comp.loc[2, "compute_excess_ns"] > 30e6 and comp.loc[2, "compute_score"] > 3.5
    assert sleep.loc[2, "compute_ratio"] < 1.2 and sleep.loc[2, "compute_score"] < 3.5
    # the compute straggler's extra work exceeds half its delay; the sleeper's does not
    assert comp.loc[2, "compute_excess_ns"] >= 0.5 * comp.loc[2, "delay_ns"]
    assert sleep.loc[2, "compute_excess_ns"] < 0.5 * sleep.loc[2, "delay_ns"]


def test_dlrm_rank_7_causes_most_waiting(con):
    df = straggler_ranks(con, run_id(con, "dlrm_8rank")).set_index("rank")
    # one step: the units are its 8 instances; rank 7 is last in 5 but its share of each
    # instance's waiting varies too much for t to reach the policy line, so nobody is flagged
    assert df.index[df["flagged"]].tolist() == []
    r7 = df.loc[7]
    assert (r7["n_last"], r7["n_instances"], r7["n_units"]) == (5, 8, 8)
    assert 0 < r7["consistency_t"] < STRAGGLER_MIN_T and df["mean_share"].idxmax() == 7
    assert df["caused_ns"].idxmax() == 7 and df["wait_ns"].idxmin() == 7
    # the same figures from the raw files: NCCL kernels matched by order, wait = last start −
    # own start, excess = median lateness − median; raw clocks (the code aligns them on ends,
    # which moves arrivals by less than the traces' 1 µs resolution)
    truth = arrivals(
        {
            int(p.name.split("_")[0].removeprefix("worker")): collective_starts(p, "nccl", "kernel")
            for p in DLRM.glob("*.gz")
        }
    )[7]
    assert truth["n_last"] == 5
    assert r7["wait_ns"] == pytest.approx(truth["wait_ns"], abs=2_000)
    assert r7["excess_ns"] == pytest.approx(truth["excess_ns"], abs=1_000)
    steps = straggler_steps(con, run_id(con, "dlrm_8rank"))
    assert steps["step"].unique().tolist() == [10]
    assert steps.loc[steps["flagged"], "rank"].tolist() == []


def test_report_keys(con):
    assert SECTIONS["stragglers"] is stragglers_section
    assert SECTIONS["collectives"] is collectives_section
    rid = run_id(con, "gloo_4rank_sleep")
    rep = {"stragglers": stragglers_section(con, rid), "collectives": collectives_section(con, rid)}
    s = rep["stragglers"]
    assert s["flagged"] == [2]
    assert s["verdict"].startswith(
        "straggler: rank 2 (host vm), late without doing more operator work"
    )
    assert {"rank", "score", "late_fraction", "wait_caused_ms", "host"} <= set(s["ranks"][0])
    assert [r["rank"] for r in s["ranks"]] == [0, 1, 2, 3]
    total_wait = sum(r["wait_ms"] for r in s["ranks"])
    assert sum(r["wait_caused_ms"] for r in s["ranks"]) == pytest.approx(total_wait, abs=0.01)
    assert s["ranks"][2]["wait_caused_ms"] > 0.7 * total_wait
    assert [st["step"] for st in s["steps"]] == list(range(2, 8))
    c = rep["collectives"]
    (ar,) = c["ops"]
    assert (ar["op"], ar["count"]) == ("allreduce", 48)
    assert ar["transfer_ms_median"] > 0 and ar["busbw_GBps_median"] == pytest.approx(
        ar["algbw_GBps_median"] * 1.5, rel=0.3
    )
    assert c["matching"] == {"instances": 48, "by_key": {"order": 48}, "incomplete": 0,
                             "size_mismatch": 0, "op_mismatch": 0, "op_mismatch_checked": 0}  # fmt: skip
    assert c["clock"]["n_violations"] == 0 and c["clock"]["domains"][0]["host"] == "vm"
    json.dumps(rep)  # JSON-able as it is


def test_dlrm_report_verdict(con):
    s = stragglers_section(con, run_id(con, "dlrm_8rank"))
    assert s["flagged"] == []
    assert "rank 7" in s["verdict"] and "5/8" in s["verdict"]
    # beside the mean share per instance, rank 7's share of all the waiting, the diagnosis's
    # figure: its wait_caused over the sum of every rank's (the charges add up to the total wait)
    caused = {r["rank"]: r["wait_caused_ms"] for r in s["ranks"]}
    total_share = 100 * caused[7] / sum(caused.values())
    assert f"({total_share:.0f}% of all the waiting;" in s["verdict"]
    # the same share is the report's share_of_wait, the one the diagnosis quotes
    shares = {r["rank"]: r["share_of_wait"] for r in s["ranks"]}
    assert shares[7] == pytest.approx(total_share / 100, rel=1e-12)
    assert sum(shares.values()) == pytest.approx(1.0)
