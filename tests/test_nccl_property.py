"""Property-based robustness: random garbage, cut lines and interleaved logs never crash the
parser, and its line counts always add up."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_gen import Job, make_log

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nccl_log import parse

SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
BASE = make_log(Job(version="2.21.5", nodes=2, gpus=2, colls=8, warn_rank=1, timeout_culprit=3))
FRAGMENTS = st.sampled_from(
    ["NCCL", "NCCL INFO", "NCCL WARN ", "node01:1:1 [0] ", ":12:", " opCount ", "[rank1]:",
     "Channel 00/0 : ", " -> ", "via NET/IB/0", "\x1b[31m", "\r", "\t", "WorkNCCL(SeqNum=1",
     "comm 0x1 rank 0 nranks 2 cudaDev 0", "Trees [0] ", "\x00", "\udcff",
     "node01:99999999999999999999999:1 [0] NCCL INFO ", "rank 99999999999 ",
     "Channel 00/02 : 0 99999999999999999999", "count 9999999999999999 "]
)  # fmt: skip
GARBAGE = st.lists(st.one_of(st.text(max_size=80), FRAGMENTS), max_size=8).map("".join)


def write(tmp_path_factory, lines: list[str]):
    """The lines as a file, each ended by a newline."""
    path = tmp_path_factory.mktemp("prop") / "x.log"
    path.write_bytes("".join(f"{ln}\n" for ln in lines).encode("utf-8", "surrogateescape"))
    return path


def invariants(d: dict, n_lines: int) -> None:
    assert d["total"] == n_lines
    assert d["recognised"] + d["unknown"] == d["nccl"] <= d["total"]
    assert 0 <= d["damaged"] <= d["unknown"]
    assert 0 <= d["torch"] <= d["nccl"]


@SETTINGS
@given(st.lists(GARBAGE, min_size=1, max_size=40))
def test_random_garbage_never_crashes(tmp_path_factory, lines):
    path = write(tmp_path_factory, lines)
    try:
        parsed = parse(path)
    except IngestError as e:
        assert str(path) in str(e)
        assert any(w in e.problem for w in ("no NCCL log lines", "empty", "binary"))
        return
    invariants(parsed.detail["lines"], path.read_bytes().count(b"\n"))


@SETTINGS
@given(st.data())
def test_cut_and_glued_lines(tmp_path_factory, data):
    lines = list(BASE.lines)
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    for _ in range(data.draw(st.integers(1, 30))):
        i = rng.randrange(len(lines))
        action = rng.choice(("cut", "glue", "garbage"))
        if action == "cut":
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif action == "glue":
            lines[i] = data.draw(GARBAGE) + lines[i]
        else:
            lines.insert(i, data.draw(GARBAGE).replace("\n", " "))
    path = write(tmp_path_factory, lines)
    d = parse(path).detail["lines"]
    invariants(d, path.read_bytes().count(b"\n"))


@SETTINGS
@given(st.integers(0, 10**6), st.sampled_from(["2.7.8", "2.16.5", "2.24.3", "2.29.2"]))
def test_interleaved_logs_add_up(tmp_path_factory, seed, version):
    """Two jobs on different hosts, interleaved at random, parse like the two separately."""
    a = make_log(Job(version=version, colls=6, warn_rank=0, seed=seed))
    b = make_log(Job(version="2.18.3", nodes=1, gpus=3, network="nvlink", colls=4,
                     hosts=("gpuhost",), pid_base=7000, seed=seed + 1))  # fmt: skip
    rng = random.Random(seed)
    qa, qb, merged = list(a.lines), list(b.lines), []
    while qa or qb:
        q = qa if (qa and (not qb or rng.random() < 0.5)) else qb
        merged.append(q.pop(0))
    parsed = parse(write(tmp_path_factory, merged))
    expected = {k: a.truth.lines[k] + b.truth.lines[k] for k in a.truth.lines}
    assert parsed.detail["lines"] == expected
    assert parsed.tables["nccl_colls"].num_rows == len(a.truth.colls) + len(b.truth.colls)
    n_conn = len(a.truth.connections) + len(b.truth.connections)
    assert parsed.tables["nccl_connections"].num_rows == n_conn
    assert parsed.tables["nccl_connections"].column("comm").null_count == 0
    assert parsed.detail["processes"] == len(a.truth.processes) + len(b.truth.processes)
