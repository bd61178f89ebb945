"""`commwall model`: the calculator on the command line (in-process)."""

from __future__ import annotations

import json

import pytest

from commwall.cli.main import main

BASE = ["model", "--params", "7e9", "--dtype", "bf16", "--gpus", "8", "--link", "400Gbps"]


def run_json(capsys, *extra):
    assert main([*BASE, *extra, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_pure_bandwidth_figures(capsys):
    r = run_json(capsys, "--alpha", "0us", "--bucket", "0", "--compute-ms", "3.5")
    assert r["gradient_bytes"] == 14e9
    assert r["allreduce_ms"]["ring"] == pytest.approx(490.0)
    assert r["allreduce_ms"]["tree"] == pytest.approx(560.0)
    assert r["allreduce_ms"]["nccl"] == pytest.approx(510.70, abs=0.005)
    assert "hierarchical" not in r["allreduce_ms"]  # one GPU per node: every hop is the NIC
    assert r["step"]["step_ms"] == pytest.approx(493.5)
    assert r["step"]["verdict"] == "communication wall"
    assert r["min_link_GBps"] == pytest.approx(1.75 * 14 / (3.5e-3 / 9), rel=1e-6)


def test_defaults_count_latency_per_ddp_bucket(capsys):
    r = run_json(capsys)
    assert r["collectives_per_step"] == 535
    ring = r["algorithms"]["ring"]
    assert ring["bandwidth_ms"] == pytest.approx(490.0)
    assert ring["latency_ms"] == pytest.approx(535 * 14 * 14e-3)  # 14 steps × 14 µs each
    assert r["step"] is None


def test_gpus_per_node_brings_in_nvlink_algorithms(capsys):
    r = run_json(capsys, "--gpus", "64", "--gpus-per-node", "8", "--nvlink", "900GB/s")
    assert {"hierarchical", "nvls"} <= set(r["allreduce_ms"])
    assert r["inputs"]["nvlink_GBps"] == 450.0


def test_what_if_flags(capsys):
    one = run_json(capsys, "--compute-ms", "100", "--overlap", "0.5")
    four = run_json(capsys, "--compute-ms", "100", "--overlap", "0.5", "--grad-accum", "4")
    assert four["step"]["tau_comp_ms"] == pytest.approx(400)
    assert four["step"]["comm_overhead"] < one["step"]["comm_overhead"]
    half = run_json(capsys, "--compression", "2")
    assert half["algorithms"]["ring"]["bandwidth_ms"] == pytest.approx(245.0)


def test_text_output(capsys):
    assert main([*BASE, "--compute-ms", "3.5", "--bucket", "0", "--alpha", "0us"]) == 0
    out = capsys.readouterr().out
    assert "14.00 GB (13.04 GiB)" in out
    assert "490.000" in out and "560.000" in out
    assert "verdict: communication wall" in out


@pytest.mark.parametrize("flag", [["--link", "400G"], ["--params", "seven"], ["--dtype", "fp12"]])
def test_bad_units_are_errors(capsys, flag):
    argv = BASE + flag
    assert main(argv) == 2
    assert "commwall: error:" in capsys.readouterr().err


def test_what_if_on_a_stored_run(capsys, tmp_path):
    """`--db --run`: the dashboard's knobs on the calibrated run. Doubling the compression
    halves the bytes on the wire, so the what-if's τ_comm cannot exceed the model's."""
    from conftest import DLRM

    from commwall.ingest import store

    con = store.connect(tmp_path / "d.duckdb")
    store.ingest(con, "dlrm", sorted(DLRM.glob("*.gz")))
    con.close()
    args = ["model", "--db", str(tmp_path / "d.duckdb"), "--run", "dlrm", "--format", "json"]
    assert main([*args, "--compression", "2", "--link-peak", "NVLink2"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["knobs"]["compression"] == {"run": 1.0, "what_if": 2.0}
    assert r["what_if"]["tau_comm_ms"] < r["model"]["tau_comm_ms"]
    assert r["measured"]["link"] == "NVLink2" and r["measured"]["peak_busbw_GBps"] == 150.0
    assert set(r["fit_status"]) == {"allreduce/8", "alltoall/8"}
    assert main([*args, "--link-peak", "warp drive"]) == 2
    assert "--link-peak 'warp drive'" in capsys.readouterr().err
