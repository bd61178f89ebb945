"""The batched COLL fast path agrees with the regex path; the spool keeps big tables on disk;
the chunk stream is bounded."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_gen import Job, make_log

from commwall.ingest.formats.nccl_log import coll_batch, parser, stream, tables
from commwall.ingest.formats.nccl_log import parse as parse_log

HEAD = "node01:4100:4100 [0] NCCL INFO "
GOOD = (
    "AllReduce: opCount 1a sendbuff 0x7f2a00000000 recvbuff 0x7f2a00000000 count 13107200 "
    "datatype 9 op 0 root 0 comm 0x55aa00000000 [nranks=16] stream 0x55aa00002000"
)


@given(st.lists(st.integers(0, 16**15 - 1), max_size=50))
def test_hex_to_int64(values):
    got = coll_batch.hex_to_int64(pa.array([f"{x:x}" for x in values], pa.string()))
    assert got.to_pylist() == values


def _slow(monkeypatch):
    """Send every tail to the regex path."""
    empty = pa.RecordBatch.from_pylist([], schema=tables.SCHEMAS["nccl_colls"])
    monkeypatch.setattr(parser, "parse_tails", lambda tails, *_: (empty, list(range(len(tails)))))


def _both(path, monkeypatch) -> tuple[dict, dict]:
    fast = parse_log(path)
    with monkeypatch.context() as m:
        _slow(m)
        slow = parse_log(path)
    return fast, slow


def _colls(p) -> list[dict]:
    return sorted(p.tables["nccl_colls"].to_pylist(), key=lambda r: r["line_no"])


MUTATIONS = st.sampled_from(
    [
        lambda t: t,
        lambda t: t.replace(" root 0", ""),
        lambda t: t.replace("count", "count size 4096 ", 1).replace("size 4096  ", "size 4096 "),
        lambda t: t.replace("opCount 1a", "opCount 1A"),
        lambda t: t.replace("root 0", "root -1"),
        lambda t: t.replace("  ", " ").replace("op 0", "op  0"),
        lambda t: t.replace("datatype 9", "datatype 99"),
        lambda t: t.replace("count 13107200", "count 1234567890123456789012"),
        lambda t: t.replace("AllReduce: ", ""),
        lambda t: t.replace("AllReduce: ", "All Reduce: "),
        lambda t: t[: len(t) // 2],
        lambda t: t + " trailing",
        lambda t: t + "   ",
        lambda t: t.replace("stream 0x55aa00002000", "stream \udcff"),
        lambda t: t.replace("0x55aa00000000 [", "0x55AA00000000 ["),
        lambda t: t + "\r",
    ]
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(MUTATIONS, st.integers(0, 3)), min_size=1, max_size=30))
def test_fast_path_equals_regex_path(tmp_path_factory, monkeypatch, muts):
    lines = []
    for mutate, dev in muts:
        head = HEAD.replace("[0]", f"[{dev}]")
        lines.append(head + mutate(GOOD))
    path = tmp_path_factory.mktemp("fp") / "x.log"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    fast, slow = _both(path, monkeypatch)
    assert _colls(fast) == _colls(slow)
    assert fast.detail["lines"] == slow.detail["lines"]
    d = fast.detail["lines"]
    assert d["recognised"] + d["unknown"] == d["nccl"] == len(lines)


def test_fast_path_on_generated_logs(tmp_path, monkeypatch):
    for job in (
        Job(version="2.24.3", colls=50, launcher="srun"),
        Job(version="2.27.5", colls=50, info_timestamps=True, launcher="rank"),
        Job(version="2.4.8", colls=30, launcher="mpi"),
    ):
        log = make_log(job)
        path = log.write(tmp_path / "x.log")
        fast, slow = _both(path, monkeypatch)
        assert _colls(fast) == _colls(slow)
        assert len(_colls(fast)) == len(log.truth.colls)


def test_head_cache_reset_and_small_batches(tmp_path, monkeypatch):
    log = make_log(Job(version="2.27.5", colls=60, info_timestamps=True, launcher="rank"))
    path = log.write(tmp_path / "x.log")
    ref = parse_log(path)
    monkeypatch.setattr(parser, "HEAD_CACHE", 3)
    monkeypatch.setattr(stream, "CHUNK", 1000)
    small = parse_log(path)
    assert _colls(small) == _colls(ref)
    assert small.detail == ref.detail
    procs = {p["proc"]: p["n_lines"] for p in small.tables["nccl_processes"].to_pylist()}
    assert procs == {p["proc"]: p["n_lines"] for p in ref.tables["nccl_processes"].to_pylist()}


def test_spool_spills_to_a_memory_mapped_file(monkeypatch):
    monkeypatch.setattr(tables, "SPILL_BYTES", 1000)
    monkeypatch.setattr(tables, "BATCH_ROWS", 100)
    s = tables.Spool(tables.SCHEMAS["nccl_env"])
    rows = [(i % 3, i, f"NCCL_X{i}", "v" * (i % 7)) for i in range(1000)]
    for r in rows:
        s.add(r)
    assert s.path is not None and os.path.exists(s.path)
    t = s.table()
    assert not os.path.exists(s.path)  # unlinked; the mapping keeps the data readable
    assert [tuple(r.values()) for r in t.to_pylist()] == rows


def test_spool_discard_removes_the_file(monkeypatch):
    monkeypatch.setattr(tables, "SPILL_BYTES", 10)
    s = tables.Spool(tables.SCHEMAS["nccl_env"])
    for i in range(tables.BATCH_ROWS + 1):
        s.add((0, i, "NCCL_X", "1"))
    path = s.path
    assert path and os.path.exists(path)
    s.discard()
    assert not os.path.exists(path)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_chunks_end_at_line_ends_and_cut_endless_lines(tmp_path, monkeypatch, newline):
    monkeypatch.setattr(stream, "CHUNK", 64)
    monkeypatch.setattr(stream, "MAX_LINE", 100)
    lines = [b"x" * n for n in (0, 5, 63, 64, 65, 99, 250, 7)]
    path = tmp_path / "l.txt"
    path.write_bytes(newline.join(lines))
    got = list(stream.chunks(path, 1 << 20))
    assert b"".join(got) == newline.join(lines)
    assert all(c.endswith(b"\n") or len(c) > 100 for c in got[:-1])
    assert max(len(c) for c in got) <= 100 + 64
    assert sum(c.count(b"\n") for c in got) == len(lines) - 1
