"""The nodes of an nccl-tests table: distinct hosts after `on` in its device lines, stored per
row as `n_nodes` and read back by the fabric tables (analysis/fabric/tables.py). Figures read
from the real files of tests/data/nccl_tests and tests/data/nccl (notices there) by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA, analysis_store

from commwall.analysis.fabric.tables import fabric_tables
from commwall.ingest.formats.nccl_log import parse
from commwall.ingest.formats.nccl_log.nccl_tests import _device_host

TESTS = DATA / "nccl_tests"
P4D = next((DATA / "nccl").glob("006_*.log.gz"))


def nodes(path: Path) -> dict[int, set[tuple[int | None, int | None]]]:
    """table number → the (n_ranks, n_nodes) of its rows."""
    out: dict[int, set[tuple[int | None, int | None]]] = {}
    for r in parse(path).tables["nccl_test_results"].to_pylist():
        out.setdefault(r["table_no"], set()).add((r["n_ranks"], r["n_nodes"]))
    return out


@pytest.mark.parametrize(
    "name,tables,ranks,n_nodes",
    [
        # lines 4–11: `#   Rank  0 Pid 112424 on localhost device  0 [0x00] A100-SXM4-40GB`
        # ... `#   Rank  7 Pid 112424 on localhost device  7 [0x00] A100-SXM4-40GB`: one host
        ("superbench_a100x8_nvswitch_allreduce.log", 1, 8, 1),
        # lines 6–15: `#  Rank  0 Group  0 Pid 2614280 on cnode3-002 device  0 ...` to
        # `#  Rank  9 Group  0 Pid 1594597 on cnode3-011 device  0 ...`: cnode3-002 … -011
        ("xxrjun_h100_10node_G1.log", 5, 10, 10),
        # lines 6–25: two ranks on each of cnode3-002 … cnode3-011
        # (`#  Rank  1 Group  0 Pid 2614268 on cnode3-002 device  1 [0000:c3:00] ...`)
        ("xxrjun_h100_10node_G2.log", 5, 20, 10),
        # lines 6–9: `#  Rank  0 Group  0 Pid 4175036 on cnode3-002 device  0 ...` to
        # `#  Rank  3 Group  0 Pid 4175039 on cnode3-002 device  3 ...`: one host
        ("xxrjun_h100x4_1node_cnode3-002.log", 5, 4, 1),
    ],
)
def test_nodes_from_the_device_lines(name, tables, ranks, n_nodes):
    got = nodes(TESTS / name)
    assert got == {t: {(ranks, n_nodes)} for t in range(1, tables + 1)}


def test_launcher_tagged_device_lines():
    # lines 14–29: `[1,0]<stdout>:#   Rank  0 Pid     25 on nccl-tests-efa-16-worker-0 device
    # 0 [0x10] A100-SXM4-40GB` … `Rank 15 Pid     40 on nccl-tests-efa-16-worker-1 device  7`
    assert nodes(P4D) == {1: {(16, 2)}}


def test_no_device_lines_no_nodes():
    # the awsome table prints no `# Using devices` block (its first line is the header)
    assert nodes(TESTS / "awsome_2x_p4de_a100x16_efa_all_reduce.log") == {1: {(None, None)}}


def test_host_word():
    assert _device_host("#  Rank  3 Group  0 Pid  64904 on  mew0 device  1 [0000:65:00] X") == (
        "mew0"
    )
    assert _device_host("#  Rank  3 Pid 1 device 1 [0x00] X") is None
    assert _device_host("#  Rank  3 Pid 1 on device 1 [0x00] X") is None


def test_the_store_keeps_the_nodes(tmp_path):
    # the G2 file alone, no --nodes: the fabric tables know 20 ranks on 10 nodes, 2 per node
    run = tmp_path / "g2"
    run.mkdir()
    (run / "g2.log").write_bytes((TESTS / "xxrjun_h100_10node_G2.log").read_bytes())
    con = analysis_store(tmp_path / "s.duckdb", (run,))
    try:
        tables = fabric_tables(con, 1)
        assert len(tables) == 5
        assert {(t.n_ranks, t.n_nodes, t.gpus_per_node) for t in tables} == {(20, 10, 2)}
    finally:
        con.close()
