"""Calibration on a run: pure functions over matched collectives, and the report's `model`
section on a synthetic run whose α and bus bandwidth are planted (tests/synthetic_traces.py).
Sections and scenarios of a run are computed as the report computes them: in a session of the
run (its intermediate tables once)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import synthetic_traces as syn
from conftest import DLRM, memory_store

from commwall.analysis import db
from commwall.analysis.model.calibrate import calibrated_scenario, fit_ops, per_step, usable
from commwall.analysis.model.hardware import NVLINK4, nvlink_of
from commwall.analysis.model.scenario import comm_time
from commwall.analysis.model.section import (
    NOT_CALIBRATED,
    model_section,
    run_scenario,
    topology_facts,
)
from commwall.analysis.report.build import SECTIONS
from commwall.analysis.report.session import run_session
from commwall.ingest import store

ALPHA_US, BUSBW_GBPS = 10.0, 100.0


def section_of(con, rid: int) -> dict:
    """The model section of run `rid`, in a session of the run (as the report builds it)."""
    with run_session(con, rid):
        return model_section(con, rid)


def scenario_of(con, rid: int):
    """run_scenario of run `rid`, in a session of the run."""
    with run_session(con, rid):
        return run_scenario(con, rid)


def rows(*instances):
    """collective_instances-like rows: (op, n, bytes, transfer_ns, step[, size_mismatch])."""
    cols = ["op", "group_size", "bytes", "transfer_ns", "step", "size_mismatch"]
    df = pd.DataFrame([(*r, False)[:6] for r in instances], columns=cols)
    return df.assign(n_ranks=df["group_size"])


def test_usable_rows():
    df = rows(
        ("allreduce", 8, 1e6, 1000, 1),
        ("allreduce", 8, None, 1000, 1),  # size unknown
        ("allreduce", 8, 1e6, 0, 1),  # no transfer time
        ("barrier", 8, 0, 1000, 1),  # not fitted
        ("allreduce", 1, 1e6, 1000, 1),  # one rank
        ("allreduce", 8, 1e6, 1000, 1, True),  # ranks disagree on the size
    )
    u = usable(df)
    assert len(u) == 1 and u["time_s"].iloc[0] == pytest.approx(1e-6)


def test_per_step_counts_allreduce_equivalents():
    df = rows(
        ("allreduce", 4, 100.0, 10, 1),
        ("allreduce", 4, 300.0, 30, 1),
        ("allgather", 4, 200.0, 10, 1),
        ("reduce_scatter", 4, 200.0, 10, 1),
        ("allreduce", 4, 400.0, 40, 2),
        ("allreduce", 4, 999.0, 99, None),  # before the first step: dropped
    )
    p = per_step(df)
    assert p["scope"] == "steps" and p["n_steps"] == 2
    assert p["bytes_per_step"] == {"allreduce": 400.0, "allgather": 200.0, "reduce_scatter": 200.0}
    # step 1: 400 + ½·200 + ½·200 = 600 B in 3 equivalents; step 2: 400 B in 1 → medians
    assert p["allreduce_equivalent_bytes"] == 500.0
    assert p["allreduce_equivalent_count"] == 2.0
    assert p["transfer_s"] == pytest.approx(((10 + 30 + 10 + 10) + 40) / 2 * 1e-9)
    assert per_step(df.assign(step=None))["scope"] == "whole trace"


def test_calibrated_scenario_reproduces_the_fit():
    sizes = [2.0**k for k in range(10, 27)] * 2
    # t = 14·α + 1.75·S/B with α = 5 µs per hop, B = 40 GB/s
    df = rows(*(("allreduce", 8, s, 14 * 5e3 + 1.75 * s / 40, 1) for s in sizes))
    link = fit_ops(df)[0].links[0]
    assert link.alpha_s == pytest.approx(5e-6) and link.bandwidth_Bps == pytest.approx(40e9)
    s = calibrated_scenario(link, per_step(df), compute_s=0.01, eta=0.5)
    assert s.topology.n_gpus == 8 and s.eta == 0.5
    expected = len(sizes) * 14 * 5e-6 + 1.75 * sum(sizes) / 40e9
    assert comm_time(s) == pytest.approx(expected, rel=1e-9)


@pytest.fixture(scope="module")
def sim():
    """One synthetic run: 2 hosts × 4 ranks, 3 ops, 2 KB … 64 MB messages, α = 10 µs per
    collective, busbw 100 GB/s."""
    old = syn.NELEMS
    syn.NELEMS = (1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 22, 1 << 25)
    try:
        return syn.simulate(
            syn.Scenario(steps=4, collectives_per_step=18, alpha_us=ALPHA_US, busbw_GBps=BUSBW_GBPS)
        )
    finally:
        syn.NELEMS = old


@pytest.fixture(scope="module")
def synthetic_store(sim):
    """A store holding the synthetic run `sim` (run 1) and a run without collectives (2)."""
    con = memory_store()
    con.execute("INSERT INTO runs (run_id, name) VALUES (1, 'syn'), (2, 'empty')")
    for name, table in syn.store_tables(sim).items():
        con.register("t", table)
        con.execute(f"INSERT INTO {name} BY NAME SELECT 1 AS run_id, 0 AS file_id, * FROM t")
        con.unregister("t")
    con.execute("INSERT INTO ranks (run_id, rank, host) VALUES (2, 0, 'a'), (2, 1, 'b')")
    return con


@pytest.fixture(scope="module")
def section(synthetic_store):
    """The synthetic run's model section."""
    return section_of(synthetic_store, 1)


def test_section_recovers_planted_alpha_and_busbw(section):
    m = section
    assert m["status"] == "calibrated"
    assert {f["op"] for f in m["fit"]["per_op"]} == {"allreduce", "allgather", "reduce_scatter"}
    for f in m["fit"]["per_op"]:
        assert f["n_ranks"] == 8 and f["alpha_identifiable"]
        # end jitter of 0–500 ns per rank adds ~250 ns to every transfer
        assert f["latency_us"] == pytest.approx(ALPHA_US, abs=0.5)
        assert f["beta_GBps"] == pytest.approx(BUSBW_GBPS, rel=0.01)
        assert f["achieved_busbw_GBps"] < BUSBW_GBPS
    assert m["fit"]["alpha_us"] == pytest.approx(m["fit"]["latency_us"] / 14)  # all-reduce


def sim_truth(sim) -> dict:
    """The measured figures from the simulation's own timeline: per (rank, step) compute and
    collective kernels run one after the other (no overlap: η = 0); a step's window runs from
    its first kernel to the next step's first kernel (the last: to its host end, 10 µs after
    its last collective, see synthetic_traces._steps_of); means over (rank, step), the run
    summary's aggregation (analysis/sql/summary.sql). The
    all-reduce bus bandwidth is factor·ΣS / Σ(α + factor·S/B), before the end jitter."""
    cps, n_steps = sim.scn.collectives_per_step, sim.scn.steps
    comp, comm, window = [], [], []
    for p in range(sim.scn.world):
        for s in range(n_steps):
            ks = range(s * cps, (s + 1) * cps)
            comp.append(sim.compute_dur[p, ks].sum())
            comm.append((sim.end[p, ks] - sim.arrive[p, ks]).sum())
            last = sim.end[p, ks[-1]] + 10_000
            nxt = sim.compute_start[p, ks[-1] + 1] if s + 1 < n_steps else last
            window.append(nxt - sim.compute_start[p, ks[0]])
    sizes = [
        syn.msg_elems(op, int(e), sim.scn.world)[2] * syn.ELEM
        for op, e in zip(sim.ops, sim.nelems, strict=True)
        if op == "allreduce"
    ]
    f = 2 * (sim.scn.world - 1) / sim.scn.world
    xfer = sum(ALPHA_US * 1e3 + f * b / BUSBW_GBPS for b in sizes)  # ns
    return {
        "step_ms": float(np.mean(window)) / 1e6,
        "tau_comp_ms": float(np.mean(comp)) / 1e6,
        "tau_comm_ms": float(np.mean(comm)) / 1e6,
        "busbw_GBps": f * sum(sizes) / xfer,
    }


def test_section_measures_the_run(section, sim):
    m = section
    measured, predicted = m["measured"], m["predicted"]
    assert (measured["n_ranks"], measured["n_nodes"], measured["gpus_per_node"]) == (8, 2, 4)
    assert measured["scope"] == "steps"
    truth = sim_truth(sim)
    for key in ("step_ms", "tau_comp_ms", "tau_comm_ms"):
        assert measured[key] == pytest.approx(truth[key], rel=1e-9), key
    # 0–500 ns of end jitter on ~70 µs … 1.2 ms transfers lowers it by well under 0.5 %
    assert measured["busbw_GBps"] == pytest.approx(truth["busbw_GBps"], rel=0.005)
    assert measured["busbw_GBps"] < truth["busbw_GBps"]
    # no overlap, and exposed communication ≈ 19 % of the step: far above the 10 % target
    assert measured["eta"] == 0.0 and truth["tau_comm_ms"] / truth["step_ms"] > 0.15
    assert measured["verdict"] == "communication wall"
    # the fitted ring predicts the step's transfer time
    assert predicted["tau_comm_ms"] == pytest.approx(measured["transfer_ms"], rel=0.05)
    assert predicted["bytes_per_step"] == measured["bytes_per_step"]
    assert predicted["verdict"] in ("compute-bound", "communication wall")


def test_run_scenario_for_what_ifs(synthetic_store, section):
    s = scenario_of(synthetic_store, 1)
    m = section
    assert s.compute_s * 1e3 == pytest.approx(m["measured"]["tau_comp_ms"])
    assert comm_time(s) * 1e3 == pytest.approx(m["predicted"]["tau_comm_ms"], rel=1e-9)
    assert scenario_of(synthetic_store, 2) is None


def test_not_calibrated_without_collectives(synthetic_store):
    m = section_of(synthetic_store, 2)
    assert m["status"] == NOT_CALIBRATED and m["predicted"] is None and m["fit"] is None
    assert m["measured"]["n_nodes"] == 2


def test_not_calibrated_without_the_matching_macro():
    con = memory_store()
    con.execute("DROP MACRO TABLE collective_instances")
    con.execute(f"RESET VARIABLE {db.LOADED}")  # load_modules' list is stale now: use the catalog
    con.execute("INSERT INTO runs (run_id, name) VALUES (1, 'r')")
    assert section_of(con, 1)["status"] == NOT_CALIBRATED


def test_too_few_instances():
    con = memory_store()
    con.execute("INSERT INTO runs (run_id, name) VALUES (1, 'r')")
    con.execute(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, op, pg_name, group_size,"
        " in_nelems, out_nelems, in_bytes, out_bytes, dtype) VALUES"
        " (1, 0, 0, 1000, 500, 'allreduce', '0', 2, 8, 8, 32, 32, 'float'),"
        " (1, 0, 1, 1100, 400, 'allreduce', '0', 2, 8, 8, 32, 32, 'float')"
    )
    # one instance of one op: the reason is that op's
    assert section_of(con, 1)["status"] == "not calibrated: 1 usable instance(s), need 2"


def test_report_has_the_model_section(section):
    assert SECTIONS["model"] is model_section
    assert set(section) == {"status", "predicted", "measured", "fit", "nccl_model"}
    assert set(section["fit"]) >= {"alpha_us", "beta_GBps"}


def test_peak_link_is_known_only_for_sxm_hopper():
    assert nvlink_of("NVIDIA H100 80GB HBM3") is NVLINK4
    assert NVLINK4.line_Bps == 450e9
    for name in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL", "Tesla V100-SXM2-32GB", None):
        assert nvlink_of(name) is None


def test_topology_from_nccl_log_when_not_every_rank_was_traced():
    con = memory_store()
    con.execute("INSERT INTO runs (run_id, name) VALUES (1, 'r')")
    con.execute(
        "INSERT INTO ranks (run_id, rank, host, world_size) VALUES (1, 0, 'a', 16), (1, 1, 'a', 16)"
    )
    facts = topology_facts(con, 1)
    assert (facts["n_ranks"], facts["n_nodes"], facts["topology_source"]) == (16, None, None)
    con.execute(
        "INSERT INTO nccl_communicators (run_id, file_id, proc, comm, nranks, n_nodes, local_ranks)"
        " VALUES (1, 0, 0, '0xa', 16, 2, 8)"
    )
    facts = topology_facts(con, 1)
    assert (facts["n_nodes"], facts["gpus_per_node"], facts["topology_source"]) == (
        2,
        8,
        "NCCL log",
    )


def test_every_collective_kind_is_predicted(section, tmp_path):
    """The synthetic run is all all-reduce: nothing left out. DLRM's embedding all-to-alls
    (real trace) are predicted with their own fit, beside the all-reduces."""
    assert section["predicted"]["not_modelled"] == {}
    con = store.connect(tmp_path / "d.duckdb")
    store.ingest(con, "dlrm", sorted(DLRM.glob("*.gz")))
    con.close()
    con = db.open_db(tmp_path / "d.duckdb")
    m = section_of(con, con.execute("SELECT run_id FROM runs").fetchone()[0])
    by_op = m["measured"]["collectives_per_step_by_op"]
    assert set(by_op) == {"allreduce", "alltoall"}
    assert m["predicted"]["not_modelled"] == {}
    assert set(m["predicted"]["transfer_ms_by_op"]) == {"allreduce", "alltoall"}
    assert by_op["alltoall"] >= 1
