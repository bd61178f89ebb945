"""Real nccl-tests output of A100 and H100 clusters (tests/data/nccl_tests/, and the p4d table
after the NCCL log 006): every table read, alone or inside a log, whatever its layout and
launcher tags, with its op named and how; each figure asserted here was read from the file by
hand, the line quoted."""

from __future__ import annotations

import json

import pytest
from conftest import DATA

from commwall.cli.main import main

TESTS = DATA / "nccl_tests"
P4D = next((DATA / "nccl").glob("006_*.log.gz"))


def tables(tmp_path, path, capsys) -> list[dict]:
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "t", "--quiet", "--no-prepare", str(path)]) == 0
    capsys.readouterr()
    assert main(["nccl", "--db", db, "--run", "t", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["tests"]


def test_every_table_is_read(tmp_path, capsys):
    # five tables per xxrjun file (`# Collective test starting: <op>_perf`), one elsewhere
    expected = {p.name: 5 if p.name.startswith("xxrjun") else 1 for p in TESTS.glob("*.log")}
    db = str(tmp_path / "all.duckdb")
    assert main(["ingest", "--db", db, "--run", "t", "--quiet", "--no-prepare", str(TESTS)]) == 0
    capsys.readouterr()
    assert main(["nccl", "--db", db, "--run", "t", "--format", "json"]) == 0
    found: dict[str, int] = {}
    for t in json.loads(capsys.readouterr().out)["tests"]:
        name = t["where"]["file"].rsplit("/", 1)[-1]
        found[name] = found.get(name, 0) + 1
        assert t["op"] is not None, name
    assert found == expected


@pytest.mark.parametrize(
    ("name", "op", "basis"),
    [
        # old layout, no op printed: `#  size  count  type  redop  time  algbw  busbw  error`
        ("superbench_a100x8_nvswitch_allreduce.log", "allreduce", "bandwidth ratio"),
        ("superbench_a100x8_nvswitch_reducescatter.log", "reduce_scatter", "bandwidth ratio"),
        # `#  size  count  type  root  time ...`: a root and busbw = algbw
        ("superbench_a100x8_nvswitch_broadcast.log", "broadcast", "bandwidth ratio"),
        # `#  size  count  type  redop  root  time ...`
        ("superbench_a100x8_nvswitch_reduce.log", "reduce", "bandwidth ratio"),
        # no reduction, busbw = algbw x 7/8: an all-gather or an all-to-all; the name tells
        ("superbench_a100x8_nvswitch_allgather.log", "allgather", "file name"),
        ("superbench_a100x8_nvswitch_alltoall.log", "alltoall", "file name"),
        # every line tagged `0: ` by srun, no device lines: the name tells
        ("awsome_2x_p4de_a100x16_efa_all_reduce.log", "allreduce", "file name"),
    ],
)
def test_the_op_of_a_table_without_a_name(tmp_path, capsys, name, op, basis):
    (t,) = tables(tmp_path, TESTS / name, capsys)
    assert (t["test"], t["op"], t["op_basis"]) == (None, op, basis)


def test_old_alltoall_rows_without_a_reduction(tmp_path, capsys):
    # its header names a `redop` column its rows leave blank; line 49:
    # `  8589934592     268435456   float            33508  256.36  224.31    N/A    33234
    #  258.47  226.16    N/A`
    (t,) = tables(tmp_path, TESTS / "superbench_a100x8_nvswitch_alltoall.log", capsys)
    assert t["n_ranks"] == 8 and t["gpu"] == "A100-SXM4-40GB"
    assert t["max_bytes"] == 8589934592 and t["largest_busbw_gbs"] == pytest.approx(226.16)
    assert t["redop"] is None


def test_srun_tagged_table(tmp_path, capsys):
    # `0:   2147483648  536870912  float  sum  -1  51406  41.78  78.33  0  51406  41.77  78.33  0`
    # and `0:   8   2   float   sum   -1   164.3   0.00   0.00   0   163.3   0.00   0.00   0`
    (t,) = tables(tmp_path, TESTS / "awsome_2x_p4de_a100x16_efa_all_reduce.log", capsys)
    assert t["peak_busbw_gbs"] == pytest.approx(78.33) and t["peak_bytes"] == 2147483648
    assert t["min_bytes"] == 8 and t["smallest_time_us"] == pytest.approx(163.3)
    assert t["sizes"] == 29  # 8 B to 2 GiB, x2


def test_openmpi_tagged_table_after_an_nccl_log(tmp_path, capsys):
    # line 564: `[1,0]<stdout>:           8             2   float     sum    179.1    0.00
    # 0.00  2e-07    176.3    0.00    0.00  1e-07`; line 593: `[1,0]<stdout>:  4294967296
    # 1073741824   float     sum   183834   23.36   43.81  5e-07   184216   23.31   43.72  5e-07`
    (t,) = tables(tmp_path, P4D, capsys)
    assert t["where"]["line"] == 564 and t["op"] == "allreduce"
    assert t["smallest_time_us"] == pytest.approx(176.3)
    assert t["largest_busbw_gbs"] == pytest.approx(43.81)
