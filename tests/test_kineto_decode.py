"""The Kineto decode paths agree: pieces cut at event boundaries (in one process or two) give
the same tables as the careful path, on every real trace; bad cuts and bad pieces fall back."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES

from commwall.ingest.errors import IngestError
from commwall.ingest.exec import forked
from commwall.ingest.formats.kineto import events as kineto_events
from commwall.ingest.formats.kineto import reader as kineto
from commwall.ingest.parsed import Parsed
from commwall.ingest.sources import read_bytes

REAL = sorted(DATA.glob("kineto/*/*.json.gz")) + [
    sorted((SAMPLES / d).glob("*.json.gz"))[0] for d in ("dlrm_8rank", "gloo_4rank_compute")
]


def _careful(monkeypatch: pytest.MonkeyPatch, path: Path) -> Parsed:
    with monkeypatch.context() as m:
        m.setattr(kineto_events.Trace, "spans", _no_spans)
        return kineto.parse(path, rank=0)


def _no_spans(self: kineto_events.Trace) -> list:
    raise kineto_events.Uncut


def _same(a: Parsed, b: Parsed) -> None:
    assert a.detail == b.detail
    assert a.tables.keys() == b.tables.keys()
    for name, t in a.tables.items():
        assert t.num_rows == b.tables[name].num_rows, name
        assert t.to_pylist() == b.tables[name].to_pylist(), name


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_pieces_give_the_careful_paths_tables(monkeypatch, path, jobs):
    careful = _careful(monkeypatch, path)
    monkeypatch.setattr(kineto_events, "PIECE", 1 << 14)  # many pieces, so several processes
    monkeypatch.setattr(forked, "cores", lambda: 4)
    calls = []
    monkeypatch.setattr(forked, "shared_map", _counting(forked.shared_map, calls))
    fast = kineto.parse(path, rank=0, jobs=jobs)
    _same(careful, fast)
    assert len(calls) == (jobs > 1)
    assert careful.tables["activities"].num_rows > 0


def _counting(fn, calls):
    def wrapped(*a, **k):
        calls.append(1)
        return fn(*a, **k)

    return wrapped


def _write(tmp: Path, doc: object, name: str = "rank0.json", indent: int | None = None) -> Path:
    p = tmp / name
    p.write_text(json.dumps(doc, indent=indent))
    return p


def _doc(n: int, args: dict | None = None, name: str = "aten::mm") -> dict:
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 1000 + 10 * i,
         "dur": 5, "args": dict(args or {}, **{"External id": i})}
        for i in range(n)
    ]  # fmt: skip
    return {"distributedInfo": {"rank": 0}, "traceEvents": ev, "baseTimeNanoseconds": 7}


@pytest.mark.parametrize(
    "why,doc",
    [
        ("a '}, {' inside every name", _doc(400, name='x"}, {"ph": "X"}, {')),
        ("nested objects in args", _doc(400, args={"shapes": [{"a": 1}, {"b": 2}]})),
        ("a bare array", _doc(400)["traceEvents"]),
        ("fields after the events", {**_doc(400), "deviceProperties": [{"id": 0}, {"id": 1}]}),
    ],
)
def test_awkward_files_decode_the_same_either_way(monkeypatch, tmp_path, why, doc):
    path = _write(tmp_path, doc, indent=1)
    careful = _careful(monkeypatch, path)
    monkeypatch.setattr(kineto_events, "PIECE", 512)
    fast = kineto.parse(path, rank=0, jobs=1)
    _same(careful, fast)
    assert fast.tables["activities"].num_rows == 400
    if isinstance(doc, dict):
        assert fast.tables["ranks"].column("time_base").to_pylist() == ["base_ns"]


def test_a_cut_inside_a_string_is_not_trusted(tmp_path, monkeypatch):
    """The cut pattern inside a name leaves invalid pieces; the events still come out whole."""
    name = "x" * 80 + '"}, {"ph": "X", "name": "forged'
    path = _write(tmp_path, _doc(50, name=name))
    trace = kineto_events.Trace(path, path.read_bytes())
    monkeypatch.setattr(kineto_events, "PIECE", 64)
    spans = trace.spans()
    assert len(spans) > 1
    with pytest.raises(kineto_events.Uncut):
        list(trace.events(spans))
    names = kineto.parse(path).tables["activities"].column("name").to_pylist()
    assert names == [name] * 50


def test_a_bad_event_late_in_a_large_file_is_named(tmp_path, monkeypatch):
    doc = _doc(3000)
    doc["traceEvents"][2500]["ts"] = "soon"
    path = _write(tmp_path, doc)
    monkeypatch.setattr(kineto_events, "PIECE", 4096)
    monkeypatch.setattr(forked, "cores", lambda: 2)
    with pytest.raises(IngestError, match=r"traceEvents\[2500\]\.ts"):
        kineto.parse(path)


def _mapped_kib(path: Path) -> int:
    """KiB of `path`'s mapping resident in this process (/proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    rss, inside = 0, False
    for line in lines:
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            rss += int(head[1])
    return rss


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc")
def test_finding_the_cuts_leaves_the_file_unmapped(tmp_path, monkeypatch):
    """Looking for cuts touches pages all along the file (a whole piece per cut where the
    kernel maps large folios); they are dropped as it goes, so that a large file does not count
    against the process before it is decoded. Here every page is touched first: after the
    cuts are found, no more than the last piece stays mapped."""
    path = _write(tmp_path, _doc(40_000))
    monkeypatch.setattr(kineto_events, "PIECE", 1 << 16)
    data = read_bytes(path)
    size = len(data)
    assert sum(data[i] for i in range(0, size, 4096)) > 0  # every page resident here
    assert _mapped_kib(path) * 1024 > size // 2
    spans = kineto_events.Trace(path, data).spans()
    assert len(spans) > 20
    last = size - spans[-1][0]
    assert _mapped_kib(path) * 1024 <= last + 2 * (1 << 16)


def test_json_nested_beyond_the_decoders_limit_is_an_error_naming_the_file(tmp_path):
    doc = json.dumps(_doc(10))
    deep = "[" * 200_000 + "]" * 200_000
    path = tmp_path / "deep_rank0.json"
    path.write_text(doc.replace('"External id": 3}', '"External id": 3, "x": ' + deep + "}"))
    with pytest.raises(IngestError, match="deep_rank0.json.*nested deeper"):
        kineto.parse(path)


def test_items_are_shared_and_come_back_in_order():
    def item(i):
        time.sleep(0.002)
        return i, os.getpid()

    for processes in (2, 3):
        done = forked.shared_map(item, 200, processes)
        assert [i for i, _ in done] == list(range(200))
        by = {p for _, p in done}
        assert os.getpid() in by and len(by) == processes


def test_sharing_works_from_a_worker_thread():
    """As in the dashboard, where a script thread ingests an upload."""
    out = []

    def item(i):
        time.sleep(0.001)
        return i * 3

    t = threading.Thread(target=lambda: out.append(forked.shared_map(item, 100)))
    t.start()
    t.join(60)
    assert out == [[i * 3 for i in range(100)]]


def test_a_childs_items_are_redone_here_when_the_child_dies(monkeypatch):
    parent = os.getpid()

    def square(i):
        if os.getpid() != parent:
            os._exit(3)  # the child dies after claiming an item
        return i * i

    assert forked.shared_map(square, 50) == [i * i for i in range(50)]


def test_an_error_in_the_child_is_raised_here():
    parent = os.getpid()

    def boom(i):
        if os.getpid() != parent:
            raise ValueError(f"item {i} failed in the child")
        time.sleep(0.01)  # leave the child items to claim
        return i

    with pytest.raises(ValueError, match="failed in the child"):
        forked.shared_map(boom, 20)


def test_gzip_and_plain_decode_alike(tmp_path, monkeypatch):
    monkeypatch.setattr(kineto_events, "PIECE", 2048)
    plain = _write(tmp_path, _doc(500))
    gz = tmp_path / "rank0.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    _same(kineto.parse(plain), kineto.parse(gz))
