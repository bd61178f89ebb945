"""nccl-tests tables: the reader on small made-up logs whose rows are known, the
`nccl_test_tables` macro on inline rows (table-driven), and what the checklist makes of them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from commwall.analysis.db import load_modules
from commwall.analysis.report import checklist
from commwall.ingest import store
from commwall.ingest.formats.nccl_log import parse

HEADER = """# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid  11 on nodeA device  0 [0x07] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  12 on nodeA device  1 [0x08] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  13 on nodeB device  0 [0x07] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
NCCL = "nodeA:11:11 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x1 recvbuff 0x2 count 2 datatype 7 op 0 root 0 comm 0x5 [nranks=3] stream 0x6"  # noqa: E501
TAIL = "# Out of bounds values : {oob} {word}\n# Avg bus bandwidth    : 1.5\n#\n"


def _parse(tmp_path, text: str) -> list[dict]:
    p = tmp_path / "tests.log"
    p.write_text(text)
    return parse(p).tables["nccl_test_results"].to_pylist()


def test_rows_whole_and_in_pieces(tmp_path):
    text = (
        "# Collective test starting: all_reduce_perf\n"
        + HEADER
        + "           8             2     float     sum      -1    10.00    0.00    0.00      0    11.00    0.00    0.00      0\n"  # noqa: E501
        # the next row in three pieces, NCCL lines glued to two of them, others in between
        + "          16             4     float     sum      -1" + NCCL + "\n"
        + NCCL + "\n"
        + "    12.50    1.28    1.71      0" + NCCL + "\n"
        + NCCL + "\n"
        + "    12.00    1.33    1.78      3\n"
        + TAIL.format(oob=3, word="FAILED")
    )  # fmt: skip
    rows = _parse(tmp_path, text)
    assert [r["size_bytes"] for r in rows] == [8, 16]
    a, b = rows
    assert (a["line_no"], b["line_no"]) == (12, 13)
    assert a["test"] == b["test"] == "all_reduce" and a["n_ranks"] == 3
    assert a["gpu"] == "NVIDIA H100 80GB HBM3" and a["root"] == -1
    assert (a["oop_time_us"], a["ip_time_us"]) == (10.0, 11.0)
    assert (b["oop_time_us"], b["oop_algbw_gbs"], b["oop_busbw_gbs"], b["oop_wrong"]) == (
        12.5,
        1.28,
        1.71,
        0,
    )
    assert (b["ip_time_us"], b["ip_algbw_gbs"], b["ip_busbw_gbs"], b["ip_wrong"]) == (
        12.0,
        1.33,
        1.78,
        3,
    )
    assert a["wrong_values"] == b["wrong_values"] == 3 and b["avg_busbw"] == 1.5


def test_not_checked_figures_and_a_row_cut_short(tmp_path):
    text = (
        HEADER
        + "           8             2     float     sum      -1    10.00    0.00    0.00    N/A    11.00    0.00    0.00    N/A\n"  # noqa: E501
        + "          16             4     float     sum      -1    12.50    1.28    1.71    N/A\n"
        + "          32             8     float     sum      -1    13.00    2.46    3.28    N/A    13.10    2.44    3.26    N/A\n"  # noqa: E501
    )  # fmt: skip
    a, b, c = _parse(tmp_path, text)
    assert a["oop_wrong"] is None and a["ip_time_us"] == 11.0 and a["test"] is None
    assert b["oop_busbw_gbs"] == 1.71 and b["ip_time_us"] is None  # its in-place half never came
    assert c["ip_busbw_gbs"] == 3.26 and c["wrong_values"] is None and c["avg_busbw"] is None


def test_numbers_outside_a_table_are_not_rows(tmp_path):
    text = (
        NCCL + "\n"
        + "          16             4     float     sum      -1    12.50    1.28    1.71      0\n"
        + HEADER + TAIL.format(oob=0, word="OK")
        + "          32             8     float     sum      -1    13.00    2.46    3.28      0\n"
    )  # fmt: skip
    assert _parse(tmp_path, text) == []


def test_nccl_tests_output_without_nccl_lines_is_a_log(tmp_path):
    text = (
        "# Collective test starting: all_gather_perf\n"
        + HEADER.replace("    root", "        ").replace("redop", "redop")
        + "          48             4     float    none      -1    10.00    0.00    0.00      0    10.00    0.00    0.00      0\n"  # noqa: E501
        + TAIL.format(oob=0, word="OK")
    )  # fmt: skip
    (row,) = _parse(tmp_path, text)
    assert (row["test"], row["redop"], row["size_bytes"]) == ("all_gather", "none", 48)
    p = tmp_path / "plain.log"
    p.write_text("training started\nloss 1.0\n")
    with pytest.raises(Exception, match="no NCCL log lines found"):
        parse(p)


# ---- the macro --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def con():
    c = load_modules(store.connect(":memory:"))
    c.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    c.execute("INSERT INTO files (file_id, run_id, path, sha256, format) VALUES (1, 1, 'a.log', 'x', 'nccl_log')")  # fmt: skip
    return c


def _table(con, rows: list[dict]) -> dict:
    con.execute("DELETE FROM nccl_test_results")
    rows = [{"run_id": 1, "file_id": 1, "table_no": 1, **r} for r in rows]
    keys = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist reads the first's keys
    data = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])
    con.register("_rows", data)
    con.execute("INSERT INTO nccl_test_results BY NAME SELECT * FROM _rows")
    con.unregister("_rows")
    cur = con.execute("SELECT * FROM nccl_test_tables(1)")
    names = [d[0] for d in cur.description]
    (row,) = cur.fetchall()
    return dict(zip(names, row, strict=True))


def _row(size: int, algbw: float, busbw: float, ip_busbw: float | None = None, **kw) -> dict:
    return {"line_no": size, "size_bytes": size, "oop_time_us": size / 1e3, "ip_time_us": size / 900,
            "oop_algbw_gbs": algbw, "oop_busbw_gbs": busbw,
            "ip_busbw_gbs": busbw if ip_busbw is None else ip_busbw, **kw}  # fmt: skip


# (rows, n_ranks, test, redop) -> (op, op_basis)
OPS = [
    ([_row(1 << 20, 1.0, 1.75)], 8, None, "sum", ("allreduce", "bandwidth ratio")),  # 2*7/8
    ([_row(1 << 20, 1.0, 0.875)], 8, None, "sum", (None, None)),  # (n-1)/n: not told apart
    ([_row(1 << 20, 1.0, 1.75)], 8, None, "none", (None, None)),  # no reduction: no all-reduce
    ([_row(1 << 20, 1.0, 1.0)], 2, None, "sum", (None, None)),  # 2 ranks: every factor is ~1
    ([_row(1 << 20, 0.05, 0.0875)], 8, None, "sum", (None, None)),  # too small to read a ratio
    ([_row(1 << 20, 1.0, 1.0)], 2, "all_reduce", "sum", ("allreduce", "name")),
    ([_row(1 << 20, 1.0, 0.5)], 2, "reduce_scatter", "sum", ("reduce_scatter", "name")),
]


@pytest.mark.parametrize(("rows", "n", "test", "redop", "want"), OPS)
def test_which_collective(con, rows, n, test, redop, want):
    got = _table(con, [r | {"n_ranks": n, "test": test, "redop": redop} for r in rows])
    assert (got["op"], got["op_basis"]) == want


def test_peak_largest_smallest_and_wrong_rows(con):
    rows = [
        _row(0, 0.0, 0.0),
        _row(8, 0.0, 0.0, check_kind="wrong", oop_wrong=0, ip_wrong=2),
        _row(1 << 20, 3.0, 5.0, ip_busbw=5.25, check_kind="wrong"),
        _row(1 << 21, 3.1, 5.25, check_kind="wrong"),  # ties the peak at a larger size
        _row(1 << 30, 2.5, 4.0, check_kind="error", oop_wrong=2e-6),  # an error, not a count
        {"line_no": 9, "size_bytes": 1 << 31},  # a row whose figures were lost
    ]
    got = _table(con, [r | {"wrong_values": 7, "avg_busbw": 2.1} for r in rows])
    assert (got["peak_busbw_gbs"], got["peak_bytes"]) == (5.25, 1 << 20)
    assert (got["max_bytes"], got["largest_busbw_gbs"]) == (1 << 30, 4.0)
    assert (got["min_bytes"], got["smallest_time_us"]) == (8, 8 / 1e3)
    assert got["sizes"] == 5 and got["wrong_rows"] == 1 and got["wrong_values"] == 7
    assert got["line_no"] == 0 and got["avg_busbw"] == 2.1


# ---- the checklist --------------------------------------------------------------------------


def _report(tests: list[dict], busbw: float | None = 1.2) -> dict:
    ops = [{"op": "allreduce", "busbw_GBps_median": busbw}] if busbw else []
    return {"nccl": {"present": True, "tests": tests}, "collectives": {"ops": ops}}


def _t(**kw) -> dict:
    base = {"table_no": 1, "test": "all_reduce", "op": "allreduce", "peak_busbw_gbs": 2.0,
            "peak_bytes": 1 << 20, "wrong_values": 0, "wrong_rows": 0,
            "where": {"file": "/x/t.log", "line": 40}}  # fmt: skip
    return base | kw


def _item(report: dict, key: str, link: float | None = None) -> dict:
    return next(i for i in checklist.evaluate(report, link) if i["key"] == key)


def test_bus_bandwidth_against_what_nccl_tests_reached():
    item = _item(
        _report([_t(), _t(test="all_gather", op="allgather", peak_busbw_gbs=9.0)]), "busbw"
    )
    assert item["status"] == checklist.OK  # 1.2 of the all-reduce's 2.0 GB/s: 60%
    assert (
        "60% of the 2 GB/s that all_reduce_perf reached on 1 MiB messages (t.log:40"
        in item["evidence"]
    )
    low = _item(_report([_t(peak_busbw_gbs=4.0)]), "busbw")
    assert low["status"] == checklist.ATTENTION and "30% of the 4 GB/s" in low["evidence"]
    linked = _item(_report([_t(peak_busbw_gbs=4.0)]), "busbw", link=2.0)  # the link given wins
    assert linked["status"] == checklist.OK and "60% of the 2 GB/s peak" in linked["evidence"]
    other = _item(_report([_t(test="all_gather", op="allgather")]), "busbw")
    assert other["status"] == checklist.NOT_OBSERVABLE and "nccl-tests" in other["action"]


def test_wrong_values_need_attention():
    assert _item(_report([]), "nccl_tests")["status"] == checklist.NOT_OBSERVABLE
    assert _item(_report([_t()]), "nccl_tests")["status"] == checklist.OK
    cut = _item(_report([_t(wrong_values=None)]), "nccl_tests")
    assert cut["status"] == checklist.NOT_OBSERVABLE and "cut" in cut["evidence"]
    bad = _item(_report([_t(), _t(table_no=2, wrong_values=12)]), "nccl_tests")
    assert bad["status"] == checklist.ATTENTION
    assert "1 of 2 nccl-tests table(s)" in bad["evidence"] and "12 value(s)" in bad["evidence"]


def test_crafted_device_lines_are_read_in_linear_time(tmp_path):
    """2,000 lines `# Rank 0 x device 1 [x] a<4,060 blanks>b` took 204 s when device lines were
    read with a backtracking expression; here 300 of them (about 20 s the old way)."""
    line = "# Rank 0 x device 1 [x] a" + " " * 4060 + "b\n"
    text = "host:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n#  Using devices\n" + line * 300
    text += HEADER.split("\n", 7)[-1]  # the table header after the devices
    text += "           8             2     float     sum      -1    10.00    0.00    0.00      0    11.00    0.00    0.00      0\n"  # noqa: E501
    (row,) = _parse(tmp_path, text)
    assert row["n_ranks"] == 300 and row["gpu"] == "a" + " " * 4060 + "b"
