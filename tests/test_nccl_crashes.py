"""Fuzzed NCCL logs that once crashed or hung the parser (tests/data/crashes/nccl/, minimal
reproducers of a fuzz campaign): each now parses, with the damaged line counted and kept; and
no line shape makes the parse time grow faster than the line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from commwall.ingest.formats.nccl_log import parse
from commwall.ingest.formats.nccl_log.parser import MAX_LINE_CHARS

CRASHES = Path(__file__).parent / "data" / "crashes" / "nccl"
#: The first line of every reproducer: `node01:4100:4100 [0] NCCL INFO NCCL version 2.18.3+cuda12.2`.
VERSION = "2.18.3"

# (file, kind the second line is kept as: None = read as a good line)
CASES = [
    ("n01_cuda_driver_5000_digits.log", "out_of_range"),
    ("n02_trees_5000_digits.log", "out_of_range"),
    ("n03_tuning_cell_bad_float.log", "unknown"),  # `1.2.3/  18.0` is no latency/bandwidth cell
    ("n04_coll_device_2pow32.log", None),  # device 2^32 does not fit: stored as NULL
    ("n05_coll_device_1e30.log", "out_of_range"),
    ("n06_via_net_dev_5000_digits.log", "out_of_range"),
    ("n08_ring_order_5000_digits.log", "out_of_range"),
    ("n09_tuning_threads_5000_digits.log", "out_of_range"),
]


@pytest.mark.parametrize("name,kind", CASES, ids=[c[0][:3] for c in CASES])
def test_reproducer_parses_and_keeps_the_bad_line(name, kind):
    parsed = parse(CRASHES / name)
    t = parsed.tables
    assert t["nccl_processes"].column("nccl_version").to_pylist() == [VERSION]
    assert parsed.detail["lines"]["nccl"] == 2
    unknown = t["nccl_unknown"].to_pylist()
    if kind is None:
        assert unknown == []
        assert parsed.detail["lines"]["recognised"] == 2
    else:
        assert [(u["line_no"], u["kind"]) for u in unknown] == [(2, kind)]
        assert parsed.detail["lines"]["recognised"] == 1


def test_coll_device_out_of_int32_is_null():
    # n04: `node01:4100:4100 [4294967296] NCCL INFO AllReduce: opCount 0 ... [nranks=4] ...`
    colls = parse(CRASHES / "n04_coll_device_2pow32.log").tables["nccl_colls"].to_pylist()
    assert [(c["dev"], c["op"], c["nranks"], c["count"]) for c in colls] == [
        (None, "allreduce", 4, 1)
    ]


def _seconds(tmp_path: Path, line: str) -> float:
    p = tmp_path / "long.log"
    p.write_text(f"node01:4100:4100 [0] NCCL INFO NCCL version {VERSION}+cuda12.2\n{line}\n")
    t0 = time.perf_counter()
    parse(p)
    return time.perf_counter() - t0


LONG = MAX_LINE_CHARS - 100
SHAPES = {
    "letters then NCCL": "x" * LONG + " NCCL",  # n07: 9-12 s at 40,000 characters before
    "letters then level": "x" * LONG + " NCCL INFO x",
    "colons": "a:1" * (LONG // 3) + " NCCL INFO x",
    "anchors": "a:1:1 " * (LONG // 6) + "NCCL INFO x",
    "brackets": "[" * LONG + "x: node01:1:1 [0] NCCL INFO x",
    "digits": "1" * 19 + ":" + "2" * (LONG // 2) + " NCCL WARN x",
    "tuning cells": "node01:1:1 [0] NCCL INFO  AllReduce |" + "   1.0/ 2.0 |" * (LONG // 14),
    "watchdog words": "[rank0]:[E1 00:00:00.1 P.cpp:1] " + "Watchdog " * (LONG // 9) + "NCCL",
    "ring order": "node01:1:1 [0] NCCL INFO Channel 00/02 :" + " 1" * (LONG // 2),
}


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_long_lines_take_linear_time(tmp_path, shape):
    # Quadratic work on 65,000 characters is tens of seconds; linear is milliseconds.
    assert _seconds(tmp_path, SHAPES[shape]) < 1.5


def test_too_long_line_is_counted(tmp_path):
    p = tmp_path / "huge.log"
    huge = "node01:4100:4100 [0] NCCL INFO Channel 00/02 :" + " 7" * MAX_LINE_CHARS
    p.write_text(f"node01:4100:4100 [0] NCCL INFO NCCL version {VERSION}+cuda12.2\n{huge}\n")
    parsed = parse(p)
    unknown = parsed.tables["nccl_unknown"].to_pylist()
    assert [(u["line_no"], u["kind"]) for u in unknown] == [(2, "too_long")]
    assert parsed.tables["nccl_channels"].num_rows == 0
