"""nccl-tests result tables read from real logs (tests/data/nccl, notices beside them), against
rows read from the raw files by hand; each fact quotes its line.

* 021 (RoCE, 2 nodes × 1 V100, a build that prints `run(), common.cu:NNN, ` before its `#`
  lines): `all_gather_perf` then `all_reduce_perf`, 28 sizes each, rows on lines of their own.
* 026 (2 × A100 PCIe, one process): `all_reduce_perf` 8 MiB to 8 GiB; NCCL's COLL lines are
  interleaved with the table, so each row is in three pieces: its head starts line 334 and has
  an NCCL line glued to it (`      -1mew0:65704:65704 [1] NCCL INFO ...`), the out-of-place
  figures start line 400 (an NCCL line glued again), the in-place ones are line 466.
* 013 (4 nodes × 8 RTX 3090, NCCL 2.12 era nccl-tests without a `root` column): one 64-byte
  all-reduce per table; the redop is glued to the host name (`sumoneflow-27:433602:...`).
* 001 (EFA, 64 V100): the old layout (`error` columns, no test name anywhere): the op is told
  from bus ÷ algorithm bandwidth, 5.96 / 3.03 = 1.967 ≈ 2·63/64 (all-reduce).
"""

from __future__ import annotations

import gzip

import pytest
from conftest import DATA, analysis_store

from commwall.analysis.report import checklist
from commwall.analysis.report.build import build_report
from commwall.dashboard.nccl_text import render_nccl
from commwall.ingest.formats.nccl_log import parse


def _log(prefix: str):
    (path,) = (DATA / "nccl").glob(f"{prefix}_*.log.gz")
    return path


def _lines(prefix: str) -> list[str]:
    return gzip.decompress(_log(prefix).read_bytes()).decode("utf-8", "replace").splitlines()


def _rows(prefix: str) -> list[dict]:
    return parse(_log(prefix)).tables["nccl_test_results"].to_pylist()


def test_a_build_that_prefixes_its_comment_lines():
    lines = _lines("021")
    assert lines[7].strip() == "./build/all_gather_perf -b 8 -e 1G -f 2 -g 1"
    assert (
        lines[111].split()
        == "1048576 131072 float none -1 287.3 3.65 1.83 0 299.1 3.51 1.75 0".split()
    )
    assert (
        lines[244].split()
        == "1048576 262144 float sum -1 486.7 2.15 2.15 0 484.7 2.16 2.16 0".split()
    )
    assert lines[126].startswith("run(), common.cu:1175, # Avg bus bandwidth    : 0.849624")
    rows = _rows("021")
    assert len(rows) == 56 and {r["table_no"] for r in rows} == {1, 2}
    (gather,) = [r for r in rows if r["line_no"] == 112]
    assert gather["test"] == "all_gather" and gather["redop"] == "none" and gather["root"] == -1
    assert gather["n_ranks"] == 2 and gather["gpu"] == "Tesla V100-SXM2-16GB"
    assert (gather["size_bytes"], gather["count"], gather["dtype"]) == (1048576, 131072, "float")
    assert (gather["oop_time_us"], gather["oop_algbw_gbs"], gather["oop_busbw_gbs"]) == (
        287.3,
        3.65,
        1.83,
    )
    assert (gather["ip_time_us"], gather["ip_algbw_gbs"], gather["ip_busbw_gbs"]) == (
        299.1,
        3.51,
        1.75,
    )
    assert gather["check_kind"] == "wrong" and gather["oop_wrong"] == 0 == gather["ip_wrong"]
    assert gather["avg_busbw"] == 0.849624 and gather["wrong_values"] == 0
    (reduce,) = [r for r in rows if r["line_no"] == 245]
    assert reduce["test"] == "all_reduce" and reduce["n_ranks"] == 2  # its own device list
    assert reduce["avg_busbw"] == 0.888172


def test_rows_in_pieces_between_nccl_lines():
    lines = _lines("026")
    assert lines[333].split()[:5] == ["8388608", "2097152", "float", "sum", "-1mew0:65704:65704"]
    assert lines[399].split()[:4] == ["314.7", "26.66", "26.66", "0mew0:65704:65704"]
    assert lines[465].split() == ["310.8", "26.99", "26.99", "0"]
    assert lines[1729].split()[:3] == ["300866", "28.55", "28.55"]
    assert lines[1795].split() == ["300304", "28.60", "28.60", "0"]
    rows = _rows("026")
    assert [r["size_bytes"] for r in rows] == [8388608 << k for k in range(11)]
    first, last = rows[0], rows[-1]
    assert first["line_no"] == 334 and first["root"] == -1 and first["test"] == "all_reduce"
    assert (first["oop_time_us"], first["oop_busbw_gbs"]) == (314.7, 26.66)
    assert (first["ip_time_us"], first["ip_busbw_gbs"]) == (310.8, 26.99)
    assert (last["oop_time_us"], last["oop_busbw_gbs"]) == (300866, 28.55)
    assert (last["ip_time_us"], last["ip_busbw_gbs"]) == (300304, 28.60)
    assert all(r["n_ranks"] == 2 and r["gpu"] == "NVIDIA A100 80GB PCIe" for r in rows)


def test_a_redop_glued_to_the_next_line_and_no_root_column():
    lines = _lines("013")
    assert lines[40].split()[:4] == ["64", "16", "float", "sumoneflow-27:433602:433862"]
    assert lines[235].split() == ["413.6", "0.00", "0.00", "2e-07"]
    rows = _rows("013")
    first = rows[0]
    assert (first["line_no"], first["size_bytes"], first["redop"], first["root"]) == (
        41,
        64,
        "sum",
        None,
    )
    assert first["check_kind"] == "error" and first["n_ranks"] == 32
    assert (first["oop_time_us"], first["oop_busbw_gbs"], first["oop_wrong"]) == (413.6, 0.0, 2e-07)
    assert first["ip_time_us"] is None  # the excerpt never printed it
    assert first["avg_busbw"] == 0.000299816


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Reports of 021 (two named tables) and 001 (one unnamed table), each its own run."""
    out = {}
    for prefix in ("021", "001"):
        tmp = tmp_path_factory.mktemp(f"r{prefix}")
        (tmp / "d").mkdir()
        (tmp / "d" / _log(prefix).name).write_bytes(_log(prefix).read_bytes())
        con = analysis_store(tmp / "s.duckdb", (tmp / "d",))
        out[prefix] = build_report(con, "d", keep_going=False)
        con.close()
    return out


def test_each_table_summed_up(reports):
    gather, reduce = reports["021"]["nccl"]["tests"]
    # line 112: 1.83 GB/s out-of-place at 1 MiB is the all-gather's highest bus bandwidth
    assert (gather["op"], gather["op_basis"]) == ("allgather", "name")
    assert (gather["peak_busbw_gbs"], gather["peak_bytes"]) == (1.83, 1048576)
    # line 245: 2.16 GB/s in-place; the 1 GiB row (line 258) reached 1.75
    assert (reduce["op"], reduce["peak_busbw_gbs"], reduce["peak_bytes"]) == (
        "allreduce",
        2.16,
        1048576,
    )
    assert (reduce["max_bytes"], reduce["largest_busbw_gbs"]) == (1 << 30, 1.75)
    assert reduce["where"]["line"] == 228 and reduce["where"]["file"].endswith(_log("021").name)
    assert reduce["curve"][0] == {"bytes": 8, "busbw_gbs": 0.0} and len(reduce["curve"]) == 28
    (old,) = reports["001"]["nccl"]["tests"]
    assert old["test"] is None and (old["op"], old["op_basis"]) == ("allreduce", "bandwidth ratio")
    assert old["n_ranks"] == 64 and old["bw_ratio"] == pytest.approx(1.97, abs=0.01)
    # lines 2561-2562: 5.96 then 5.99 GB/s; 5.99 at 128 MiB is the highest
    assert (old["peak_busbw_gbs"], old["peak_bytes"]) == (5.99, 134217728)
    assert old["avg_busbw"] == 1.5023


def test_the_text_and_the_checklist(reports):
    text = render_nccl(reports["021"]["nccl"], lambda df: df.to_string())
    assert (
        "all_reduce_perf on 2 ranks, Tesla V100-SXM2-16GB: bus bandwidth peaks at 2.16 GB/s "
        "(1 MiB messages), 1.75 GB/s at the largest size, 1 GiB; 14.79 µs a call at 8 B" in text
    )
    (item,) = [i for i in reports["021"]["checklist"] if i["key"] == "nccl_tests"]
    assert item["status"] == checklist.OK and "2 nccl-tests table(s)" in item["evidence"]
    assert not any("WRONG" in f for f in reports["021"]["nccl"]["findings"])
