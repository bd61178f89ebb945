"""Flight Recorder dumps: content sniffing, JSON and pickle forms, the restricted unpickler, and
clear errors for bad dumps (real dumps from sample_traces/generate_flight_recorder.py)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import pickletools

import pytest

from commwall.ingest import safe_pickle, store
from commwall.ingest.errors import IngestError
from commwall.ingest.formats import flight_recorder
from commwall.ingest.formats import registry as formats
from commwall.ingest.options import ParseOptions
from tests.conftest import SAMPLES

SKIP = SAMPLES / "fr_skip"
SKIP_PICKLE = SAMPLES / "fr_skip_pickle"


def _plain(src, dest):
    dest.write_bytes(gzip.decompress(src.read_bytes()))
    return dest


@pytest.mark.parametrize("rank", range(4))
def test_json_and_pickle_of_one_buffer_give_the_same_rows(rank):
    a = formats.parse(SKIP / f"rank{rank}.json.gz")
    b = formats.parse(SKIP_PICKLE / f"rank{rank}.pkl.gz")
    assert a.format == b.format == "flight_recorder"
    assert (a.detail["form"], b.detail["form"]) == ("json", "pickle")
    for name, table in a.tables.items():
        other = b.tables[name]
        if name == "fr_dumps":
            table, other = table.drop_columns(["form"]), other.drop_columns(["form"])
        assert table.equals(other), name


def test_rows_of_a_real_dump():
    p = formats.parse(SKIP / "rank0.json.gz")
    truth = json.loads((SKIP / "ground_truth.json").read_text())
    e = p.tables["fr_entries"].to_pylist()
    # What the generator called: `good` all_reduces of `numel` floats, then all_gather.
    assert [r["collective_seq_id"] for r in e] == list(range(1, truth["hang_seq"] + 1))
    assert [r["profiling_name"] for r in e] == ["gloo:all_reduce"] * 5 + ["gloo:all_gather"]
    assert e[-1]["input_sizes"] == [[truth["expected_numel"]]]
    assert e[-1]["output_sizes"] == [[4, truth["expected_numel"]]]
    assert e[-1]["out_nelems"] == 4 * truth["expected_numel"]
    assert e[0]["input_dtypes"] == ["Float"] and e[0]["op"] == "allreduce"
    assert e[0]["pg_name"] == "0" and e[0]["pg_desc"] == "default_pg"
    # gloo tracks no start/end: JSON writes 0, pickle None; both are stored as NULL
    assert {r["time_started_ns"] for r in e} == {None}
    assert p.tables["fr_groups"].to_pylist()[0]["ranks"] == [0, 1, 2, 3]
    assert p.tables["fr_dumps"].to_pylist()[0]["rank"] == 0


def test_rank_from_file_name_or_option(tmp_path):
    src = _plain(SKIP / "rank2.json.gz", tmp_path / "nccl_trace_rank_2")
    assert formats.parse(src).detail["rank"] == 2
    assert formats.parse(src, ParseOptions(rank=7)).detail == {
        **formats.parse(src).detail,
        "rank": 7,
        "rank_source": "option",
    }
    nameless = _plain(SKIP / "rank2.json.gz", tmp_path / "dump.json")
    with pytest.raises(IngestError, match="dump.json: Flight Recorder dumps do not record"):
        formats.parse(nameless)


def test_kineto_trace_beside_the_dumps_is_still_kineto():
    assert formats.detect(SKIP / "rank0.pt.trace.json.gz").name == "kineto"
    assert formats.detect(SKIP / "rank0.json.gz").name == "flight_recorder"
    assert formats.detect(SKIP_PICKLE / "rank0.pkl.gz").name == "flight_recorder"


class _Boom:
    """Unpickling this runs os.system (with the standard unpickler)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _evil_dumps(marker):
    """Pickles that would run a command, in several spellings."""
    dump = {"version": "2.10", "pg_config": {}, "entries": [_Boom(marker)]}
    yield "reduce_p4", pickle.dumps(dump, protocol=4)
    yield "reduce_p2", pickle.dumps(dump, protocol=2)
    yield "global_p0", f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    # INST: class and arguments in one opcode
    yield "inst", f"(S'touch {marker}'\nios\nsystem\n.".encode()


@pytest.mark.parametrize("which", ["reduce_p4", "reduce_p2", "global_p0", "inst"])
def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path, which):
    marker = tmp_path / "pwned"
    data = dict(_evil_dumps(marker))[which]
    assert any(op.name in ("REDUCE", "INST") for op, _, _ in pickletools.genops(data))
    path = tmp_path / "rank0.pkl"
    path.write_bytes(data)
    with pytest.raises(IngestError, match=r"rank0.pkl: refused pickle: opcode"):
        flight_recorder.parse(path)
    with pytest.raises(safe_pickle.UnsafePickle):
        safe_pickle.loads(data)
    assert not marker.exists()


def test_malicious_pickle_fails_the_ingest_and_stores_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "rank1.pkl"
    path.write_bytes(dict(_evil_dumps(marker))["reduce_p4"])
    con = store.connect(tmp_path / "s.duckdb")
    with pytest.raises(IngestError, match="refused pickle"):
        store.ingest(con, "r", [SKIP / "rank0.json.gz", path])
    assert con.execute("SELECT count(*) FROM fr_entries").fetchone() == (0,)
    assert not marker.exists()


def test_safe_pickle_builds_plain_values():
    value = {"a": [1, 2.5, None, True, -(2**63) + 1, 2**63 - 1], "b": ("x", "é"), "c": {}}
    for proto in range(6):
        assert safe_pickle.loads(pickle.dumps(value, protocol=proto)) == value
        # beyond 64 bits: keys k * (2**61 - 1) all hash alike, a quadratic dict (a hash flood)
        with pytest.raises(safe_pickle.UnsafePickle, match="an integer of 71 bits"):
            safe_pickle.loads(pickle.dumps({"a": -(2**70)}, protocol=proto))
    # bytes and sets have opcodes of their own from protocol 4 (before, they name a global)
    more = {"b": b"y", "c": {3}, "d": frozenset({4})}
    assert safe_pickle.loads(pickle.dumps(more, protocol=4)) == more
    with pytest.raises(safe_pickle.UnsafePickle, match="GLOBAL"):
        safe_pickle.loads(pickle.dumps(more, protocol=2))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"entries": [], "pg_config": {}}', "no 'version'"),
        (b'{"version": "2.10", "entries": [{"record_id": 0}]}', "entry 0 has no process_group"),
        (b'{"version": "2.10", "entries": [5]}', "entry 0 is not a record"),
        (b'{"version": "2.10", "entries": [], "pg_config": {"0": {"ranks": "[0, x"}}}',
         "pg_config['0']: ranks"),
        (b'{"version": "2.10", "entries": [', "not valid JSON"),
        (pickle.dumps([1, 2], protocol=4), "expected a dict with 'entries'"),
        (b"\x80\x04garbage", "not a valid pickle stream"),
    ],
)  # fmt: skip
def test_bad_dumps_name_the_file_and_the_problem(tmp_path, content, problem):
    path = tmp_path / "rank3.json"
    path.write_bytes(content)
    with pytest.raises(IngestError) as e:
        flight_recorder.parse(path)
    assert str(e.value).startswith(str(path)) and problem in str(e.value)


_ODD = [None, "x", "12", 2**70, -1, [], {}, True, 1.5, [[2**70]], [["a"]], "\x00"]


def _mutants():
    """A real dump with one field of its last entry (or of the dump) replaced by an odd value."""
    base = json.loads(gzip.decompress((SKIP / "rank0.json.gz").read_bytes()))
    for field in sorted(base["entries"][-1]):
        for v in _ODD:
            d = json.loads(json.dumps(base))
            d["entries"][-1][field] = v
            yield f"entry.{field}={v!r}", d
    for field in ("version", "pg_config", "pg_status", "entries", "comm_lib_version"):
        for v in _ODD:
            d = json.loads(json.dumps(base))
            d[field] = v
            yield f"{field}={v!r}", d


def test_odd_field_values_are_stored_or_named_never_a_crash(tmp_path):
    path = tmp_path / "rank0.json"
    stored = refused = 0
    for label, dump in _mutants():
        path.write_text(json.dumps(dump))
        try:
            parsed = flight_recorder.parse(path)
        except IngestError as e:
            assert str(e).startswith(str(path)), label
            refused += 1
        else:
            assert parsed.tables["fr_dumps"].num_rows == 1, label
            stored += 1
    assert stored and refused  # both outcomes occur: the test reaches both paths


def test_shared_references_in_a_pickle_do_not_blow_up(tmp_path):
    # 40 levels of a list holding its inner list twice: 2**40 leaves if walked naively
    inner: list = [1]
    for _ in range(40):
        inner = [inner, inner]
    dump = {"version": "2.10", "pg_config": {}, "entries": [
        {"record_id": 0, "process_group": ["0", "d"], "collective_seq_id": 1,
         "profiling_name": inner, "state": "scheduled", "input_sizes": inner,
         "input_dtypes": inner, "thread_name": inner}]}  # fmt: skip
    path = tmp_path / "rank0.pkl"
    path.write_bytes(pickle.dumps(dump, protocol=4))
    with pytest.raises(IngestError, match="pickle bomb"):  # refused before anything walks it
        flight_recorder.parse(path)
    inner = [1]
    for _ in range(3):  # a few shared levels expand to little: read as usual
        inner = [inner, inner]
    dump["entries"][0].update(
        profiling_name=inner, input_sizes=inner, input_dtypes=inner, thread_name=inner
    )
    path.write_bytes(pickle.dumps(dump, protocol=4))
    with pytest.raises(IngestError, match="profiling_name or state is not text"):
        flight_recorder.parse(path)
    dump["entries"][0]["profiling_name"] = "gloo:all_reduce"
    path.write_bytes(pickle.dumps(dump, protocol=4))
    e = flight_recorder.parse(path).tables["fr_entries"].to_pylist()[0]
    assert (e["input_sizes"], e["input_dtypes"], e["thread_name"]) == (None, None, None)
