"""Fuzz reproducers (tests/data/crashes) end in a clear error naming the file, or are stored
with what they say; gzip data cannot make ingest allocate what a trailer claims."""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from commwall.analysis.db import load_modules
from commwall.analysis.report.build import build_report
from commwall.ingest import store
from commwall.ingest.errors import IngestError
from commwall.ingest.exec import distributed
from commwall.ingest.formats import registry as formats
from commwall.ingest.schema import NEGATIVE_DURATION
from commwall.ingest.sources import MAX_RATIO, RATIO_SLACK, read_bytes

CRASHES = Path(__file__).parent / "data" / "crashes"
KINETO, NSYS = CRASHES / "kineto", CRASHES / "nsys"

# (file, words the error must contain). The value that makes each file bad, as it is in the file:
REJECTED = [
    # "name": "caf\xe9 (a lone Latin-1 byte)
    ("k02_invalid_utf8_name_rank0.json", "not valid UTF-8"),
    # "pid": 9223372036854775808
    ("k03_pid_2pow63_rank0.json", "$.traceEvents[0].pid"),
    # "args": {"External id": 9223372036854775808}
    ("k04_external_id_2pow63_rank0.json", "$.traceEvents[0].args.External id"),
    # "args": {"stream": 18446744073709551616}
    ("k05_stream_2pow64_rank0.json", "$.traceEvents[0].args.stream"),
    # "distributedInfo": {"rank": 1099511627776}
    ("k06_rank_2pow40_rank0.json", "$.distributedInfo.rank"),
    # "distributedInfo": {"rank": 0, "world_size": 1099511627776}
    ("k07_world_size_2pow40_rank0.json", "$.distributedInfo.world_size"),
    # "baseTimeNanoseconds": 9223372036854775808
    ("k08_base_time_2pow63_rank0.json", "$.baseTimeNanoseconds"),
    # "ts": 1000...0 (400 digits)
    ("k10_ts_400_digit_int_rank0.json", "$.traceEvents[0].ts"),
    # "pg_config": [{"pg_name": "0", "pg_size": 9223372036854775808, ...
    ("k11_pg_size_2pow63_rank0.json", "pg_config[0].pg_size"),
    # "args": {"Seq": 9223372036854775808 ...
    ("k12_seq_2pow63_on_comm_kernel_rank0.json", "$.traceEvents[0].args.Seq"),
    # "args": {"Group size": 9223372036854775807} (the store holds group sizes as int32)
    ("k14_world_size_big_in_collective_rank0.json", "$.traceEvents[0].args.Group size"),
    # "dur": 1000...0 (400 digits)
    ("k15_dur_400_digit_int_rank0.json", "$.traceEvents[0].dur"),
    # [{"ph": "X", "cat": "cpu_op", "name": "caf\xe9 (a bare array)
    ("k16_bare_array_invalid_utf8_rank0.json", "not valid UTF-8"),
    # {"distributedInfo": {"rank": 0, "backend": "caf\xe9
    ("k17_header_invalid_utf8_rank0.json", "not valid UTF-8"),
    # the gzip trailer's CRC and size were overwritten: ... 57b4ee45 ffffffff
    ("k18_gzip_trailer_claims_4GiB_rank0.json.gz", "gzip"),
    # "name": "gloo:all_reduce", "args": {..., "Input type": ["caf\xe9"] (fuzz find: args kept
    # raw were decoded later, and UnicodeDecodeError escaped)
    ("k19_args_invalid_utf8_rank0.json", "not valid UTF-8"),
]


@pytest.mark.parametrize(("name", "words"), REJECTED)
def test_kineto_reproducer_is_a_clear_error(name: str, words: str) -> None:
    path = KINETO / name
    with pytest.raises(IngestError) as e:
        formats.parse(path)
    assert e.value.path == str(path)
    assert words in e.value.problem


def _ingest_and_report(tmp_path: Path, path: Path) -> tuple[dict, object]:
    con = store.connect(tmp_path / "s.duckdb")
    summary = store.ingest(con, "r", [path])
    report = build_report(load_modules(con), "r")
    return report, (con, summary)


def test_step_without_category_is_a_step(tmp_path: Path) -> None:
    # {"ph": "X", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1700000000000000,
    #  "dur": 100} -- no "cat"
    report, (con, _) = _ingest_and_report(tmp_path, KINETO / "k01_step_without_cat_rank0.json")
    rows = con.execute("SELECT step, ts, dur FROM steps").fetchall()
    assert rows == [(1, 1_700_000_000_000_000_000, 100_000)]
    assert report["run_info"]["n_steps"] == 1


def test_step_number_beyond_int64_is_not_a_step(tmp_path: Path) -> None:
    # "name": "ProfilerStep#99999999999999999999" (20 digits): an ordinary annotation
    report, (con, _) = _ingest_and_report(tmp_path, KINETO / "k09_step_number_huge_rank0.json")
    assert con.execute("SELECT count(*) FROM steps").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM activities").fetchone()[0] == 1
    assert report["summary"]["scope"] == "whole trace"


def test_time_beyond_2200_is_dropped_and_counted_never_wrapped(tmp_path: Path) -> None:
    # "ts": 9200000000000000.0 (year 2261 as epoch µs) and "ts": 1, "dur": 10 with
    # "baseTimeNanoseconds": 1700000000000000000
    path = KINETO / "k13_ts_far_future_wraps_rank0.json"
    report, (con, summary) = _ingest_and_report(tmp_path, path)
    assert con.execute("SELECT ts, dur FROM activities").fetchall() == [
        (1_700_000_000_000_001_000, 10_000)
    ]
    assert summary.files[0].dropped == 1
    assert report["ranks"][0]["span_ms"] == pytest.approx(0.01)


def test_gzip_trailer_claim_is_not_allocated() -> None:
    # 303,178 bytes whose trailer claims 4 GiB: memory stays a multiple of the file's size plus
    # a constant (the buffer grows with what is inflated, plus one 4 MB piece)
    path = KINETO / "k18_gzip_trailer_claims_4GiB_rank0.json.gz"
    tracemalloc.start()
    with pytest.raises(IngestError):
        read_bytes(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * path.stat().st_size + (16 << 20)


def test_truncated_gzip_allocates_little(tmp_path: Path) -> None:
    data = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 200_000, 6)
    cut = tmp_path / "t_rank0.json.gz"
    cut.write_bytes(data[: len(data) // 2] + b"\xff\xff\xff\xff")  # a claim of 4 GiB at the end
    tracemalloc.start()
    with pytest.raises(IngestError, match="truncated|corrupt"):
        read_bytes(cut)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * 2_400_000 + (8 << 20)  # the inflated half (1.2 MB) and buffers


def test_gzip_bomb_is_refused_early(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb_rank0.json.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(bomb, "wb") as f:
        f.write(z.compress(b'{"traceEvents": ['))
        block = b" " * (1 << 20)
        for _ in range(400):  # 400 MB of spaces, about 400 KB compressed
            f.write(z.compress(block))
        f.write(z.flush())
    size = bomb.stat().st_size
    t = time.monotonic()
    tracemalloc.start()
    with pytest.raises(IngestError, match="gzip bomb") as e:
        formats.parse(bomb)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(bomb) in str(e.value)
    assert peak < 2 * (MAX_RATIO * size + RATIO_SLACK)
    assert time.monotonic() - t < 30


NSYS_REJECTED = [
    # CUPTI_ACTIVITY_KIND_KERNEL.start of one row set to the text 'garbage'
    ("s01_kernel_start_text.sqlite.gz", "CUPTI_ACTIVITY_KIND_KERNEL: column 'start'"),
    # TARGET_INFO_SESSION_START_TIME.utcEpochNs set to a 10-byte blob of zeros
    ("s02_session_start_blob.sqlite.gz", "utcEpochNs"),
    # StringIds id 138: the single byte 0xc1
    ("s03_stringids_invalid_utf8.sqlite.gz", "UTF-8"),
    # CUPTI_ACTIVITY_KIND_KERNEL.start set to 2**64 (stored by SQLite as a REAL)
    ("s04_kernel_start_uint64.sqlite.gz", "CUPTI_ACTIVITY_KIND_KERNEL: column 'start'"),
    # utcEpochNs set to the text 'abc'
    ("s05_session_start_text.sqlite.gz", "utcEpochNs"),
    # a kernel start set to 2**63 - 1: with the session start added it is past 2200
    ("s07_kernel_start_max_int64.sqlite.gz", "outside 1970-2200"),
    # a flipped byte in the sqlite_master page
    ("s09_corrupt_schema_name_page_flip.sqlite.gz", "corrupt"),
    # utcEpochNs set to 2**64 (a REAL)
    ("s10_session_start_uint64.sqlite.gz", "utcEpochNs"),
    # fuzz inputs from the generated export (tests/nsys_synth.py, payloads=True). sqlite3:
    # SELECT sum(start IS NULL) FROM CUPTI_ACTIVITY_KIND_MEMCPY gives 5 (a DuckDB NOT NULL
    # constraint failed at insert)
    ("s11_memcpy_start_null.sqlite.gz", "GPU work: 5 rows without a start time"),
    # SELECT sum(start IS NULL), sum(binaryData IS NOT NULL AND start IS NULL) FROM NVTX_EVENTS
    # gives 5|1 (sorting the payloads raised TypeError)
    ("s12_nccl_range_start_null.sqlite.gz", "NVTX: 5 rows without a start time"),
]


def _gunzipped(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name.removesuffix(".gz")
    out.write_bytes(gzip.decompress((NSYS / name).read_bytes()))
    return out


@pytest.mark.parametrize(("name", "words"), NSYS_REJECTED)
def test_nsys_reproducer_is_a_clear_error(tmp_path: Path, name: str, words: str) -> None:
    path = _gunzipped(tmp_path, name)
    with pytest.raises(IngestError) as e:
        formats.parse(path)
    assert e.value.path == str(path)
    assert words in e.value.problem


def test_nsys_kernel_ending_before_it_starts_has_no_length(tmp_path: Path) -> None:
    # two kernels end 1e9 ns before they start (start 1517727052, end 517727052): stored with
    # dur 0 and counted as clamped, and the report is produced
    path = _gunzipped(tmp_path, "s06_kernel_end_before_start.sqlite.gz")
    report, (con, summary) = _ingest_and_report(tmp_path, path)
    assert con.execute("SELECT min(dur) FROM activities").fetchone()[0] == 0
    assert report["ranks"]
    # sqlite3 on the file: SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end < start
    # gives 2 (0 in CUPTI_ACTIVITY_KIND_RUNTIME and _MEMCPY, and no NVTX_EVENTS table)
    assert (summary.files[0].clamped, summary.files[0].clamped_reason) == (2, NEGATIVE_DURATION)
    dist = distributed.ingest(con, "d", [path], tmp_path / "shards")  # the Dask path's summary
    assert dist.files[0].clamped == 2


def test_kineto_negative_durations_are_stored_as_zero_and_counted(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1,
         "ts": 1_700_000_000_000_000 + 100 * i, "dur": -5 if i in (1, 4, 6) else 10}
        for i in range(8)
    ]  # fmt: skip
    path = tmp_path / "negative_rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    _, (con, summary) = _ingest_and_report(tmp_path, path)
    durs = con.execute("SELECT name, dur FROM activities ORDER BY ts").fetchall()
    assert durs == [(f"op{i}", 0 if i in (1, 4, 6) else 10_000) for i in range(8)]
    assert (summary.files[0].clamped, summary.files[0].clamped_reason) == (3, NEGATIVE_DURATION)


DLRM = sorted((Path(__file__).parents[1] / "sample_traces" / "dlrm_8rank").glob("*.json.gz"))


def _with_host(src: Path, out: Path) -> Path:
    """The real DLRM rank file with `"host_name": "node01"` added at the top level (the fuzz
    reproducer of a report crash: a singular matrix in the model fit)."""
    text = gzip.decompress(src.read_bytes()).decode()
    assert text.lstrip().startswith("{") and '"host_name"' not in text
    dest = out / src.name.removesuffix(".gz")
    dest.write_text(text.replace("{", '{"host_name": "node01", ', 1))
    return dest


@pytest.mark.parametrize("ranks", [8, 1])
def test_report_of_dlrm_with_a_host_name_comes_out_whole(tmp_path: Path, ranks: int) -> None:
    paths = [_with_host(p, tmp_path) for p in DLRM[:ranks]]
    con = store.connect(tmp_path / "s.duckdb")
    store.ingest(con, "r", paths)
    report = build_report(load_modules(con), "r")
    assert len(report["ranks"]) == ranks
    assert report["run_info"]["hosts"] == ["node01"]
    for key, value in report.items():  # every section is there, or says why it is not
        assert value is not None or key in report.get("analysis_errors", {})


def test_nsys_huge_strings_are_cut_when_read(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "long_names.sqlite"
    src = Path(__file__).parent / "data" / "nsys" / "nvfuser_1gpu" / "report2_nsys2024.6.sqlite.gz"
    path.write_bytes(gzip.decompress(src.read_bytes()))
    con = sqlite3.connect(path)
    con.execute("UPDATE StringIds SET value = value || hex(zeroblob(100000))")  # +200,000 chars
    con.commit()
    con.close()
    parsed = formats.parse(path)
    names = parsed.tables["activities"]["name"].drop_null().to_pylist()
    assert names and max(map(len, names)) == 4096


def test_nsys_long_nvtx_text_host_and_gpu_names_are_cut_when_read(tmp_path: Path) -> None:
    # a crafted export from the generator: 200,000-character NVTX range text (inline, not
    # through StringIds), host name and GPU name
    from nsys_synth import LONG_RANGE, make_spec, write_nsys

    spec = make_spec(seed=1, ranks=2, steps=3)
    path = write_nsys(spec, tmp_path / "long_text.sqlite", long_text=200_000)
    parsed = formats.parse(path)
    names = parsed.tables["activities"]["name"].to_pylist()
    long = [n for n in names if n and n.startswith(LONG_RANGE)]
    # one range per (rank, step) window of the generator, each cut to 4,096 characters
    assert long == [(LONG_RANGE + "x" * 200_000)[:4096]] * len(spec.steps)
    ranks = parsed.tables["ranks"].to_pylist()
    assert [r["host"] for r in ranks] == [("synthhost" + "x" * 200_000)[:4096]] * spec.ranks
    assert {len(r["gpu_name"]) for r in ranks} == {4096}
    assert [p["name"] for p in parsed.detail["processes"]] == [
        ("python3" + "x" * 200_000)[:4096]
    ] * spec.ranks
    assert max(map(len, names)) == 4096


def test_nsys_gpu_facts_of_the_wrong_type_are_left_out(tmp_path: Path) -> None:
    # a fuzz find: a blob where TARGET_INFO_GPU holds an integer raised ArrowInvalid
    import sqlite3

    path = tmp_path / "gpu_blob.sqlite"
    src = Path(__file__).parent / "data" / "nsys" / "nvfuser_1gpu" / "report2_nsys2024.6.sqlite.gz"
    path.write_bytes(gzip.decompress(src.read_bytes()))
    con = sqlite3.connect(path)
    sms = con.execute("SELECT smCount FROM TARGET_INFO_GPU").fetchone()[0]
    con.execute("UPDATE TARGET_INFO_GPU SET totalMemory = zeroblob(10), name = zeroblob(4)")
    con.commit()
    con.close()
    gpus = formats.parse(path).tables["nsys_gpus"].to_pylist()
    assert [(g["sm_count"], g["total_memory_bytes"], g["name"]) for g in gpus] == [
        (sms, None, None)
    ]


def test_flight_recorder_pickle_with_a_huge_integer_and_a_long_name(tmp_path: Path) -> None:
    # found by review: a pickle holds integers of any length, and str() of one over 4,300
    # digits raised ValueError (a parser crash); the real gloo dump with two fields changed.
    # Integers beyond 64 bits are now refused before anything is built (hash floods: see
    # tests/test_robust_crafted.py), naming the problem; a long name is cut
    import pickle

    dump = _real_fr_pickle()
    dump["version"] = 10**5000
    path = tmp_path / "rank0.pkl"
    path.write_bytes(pickle.dumps(dump, protocol=4))
    with pytest.raises(IngestError, match="refused pickle: an integer of 16610 bits"):
        formats.parse(path)
    dump = _real_fr_pickle()
    dump["entries"][0]["profiling_name"] = "gloo:all_reduce" + "x" * 100_000
    path.write_bytes(pickle.dumps(dump, protocol=4))
    tables = formats.parse(path).tables
    names = tables["fr_entries"]["profiling_name"].to_pylist()
    assert names[0] == ("gloo:all_reduce" + "x" * 100_000)[:4096]
    assert len(names) == len(dump["entries"])


def test_nccl_reproducer_of_the_quadratic_regex_parses_in_linear_time() -> None:
    # n07: the version line, then one line of 40,000 "x" and " NCCL" (9-12 s with the
    # quadratic prefix regex); linear parsing takes milliseconds
    path = CRASHES / "nccl" / "n07_redos_40k_line.log"
    t0 = time.perf_counter()
    parsed = formats.parse(path)
    assert time.perf_counter() - t0 < 1.5
    # the long line is no NCCL line (no "NCCL INFO|WARN" after a prefix): only the version line
    assert (parsed.detail["lines"]["total"], parsed.detail["lines"]["nccl"]) == (2, 1)


def _real_fr_pickle() -> dict:
    from commwall.ingest import safe_pickle

    src = Path(__file__).parents[1] / "sample_traces" / "fr_skip_pickle" / "rank0.pkl.gz"
    return safe_pickle.loads(gzip.decompress(src.read_bytes()))  # type: ignore[return-value]


def test_flight_recorder_pickle_bomb_of_shared_references_is_refused_at_once(
    tmp_path: Path,
) -> None:
    # found by review: pickle's memo lets 100 entries share one list of 4,096 shapes of 64
    # dimensions, a 554 KB file that stands for 53 million values (62 s to read before; 400
    # entries, 591 KB: 231 s)
    import pickle

    dump = _real_fr_pickle()
    shapes = [[1] * 64 for _ in range(4096)]
    entry = dump["entries"][0]
    dump["entries"] = [
        {**entry, "record_id": i, "input_sizes": shapes, "output_sizes": shapes} for i in range(100)
    ]
    path = tmp_path / "bomb_rank0.pkl"
    path.write_bytes(pickle.dumps(dump, protocol=4))
    assert path.stat().st_size < 600_000
    t0 = time.perf_counter()
    with pytest.raises(IngestError, match="pickle bomb") as e:
        formats.parse(path)
    assert time.perf_counter() - t0 < 10 and e.value.path == str(path)


def test_flight_recorder_pickle_holding_itself_is_refused(tmp_path: Path) -> None:
    import pickle

    dump = _real_fr_pickle()
    dump["entries"][0]["input_sizes"] = cycle = []  # type: ignore[var-annotated]
    cycle.append(cycle)
    path = tmp_path / "cycle_rank0.pkl"
    path.write_bytes(pickle.dumps(dump, protocol=4))
    with pytest.raises(IngestError, match="holds itself"):
        formats.parse(path)


@pytest.mark.parametrize("offset", ["garbage", 8.5, -5, 2**40], ids=str)
def test_nsys_payload_schema_with_a_bad_offset_leaves_the_field_out(
    tmp_path: Path, offset: object
) -> None:
    # found by review: a text offset in NVTX_PAYLOAD_SCHEMA_ENTRIES raised TypeError, a real one
    # would slice with a float, a negative one read the payload from its end
    import sqlite3

    from nsys_synth import make_spec, write_nsys

    spec = make_spec(seed=1, ranks=2, steps=2)
    path = write_nsys(spec, tmp_path / "bad_offset.sqlite", payloads=True)
    con = sqlite3.connect(path)
    con.execute(
        "UPDATE NVTX_PAYLOAD_SCHEMA_ENTRIES SET offset = ? WHERE offset IS NOT NULL", [offset]
    )
    con.commit()
    con.close()
    parsed = formats.parse(path)
    # every NCCL kernel of the generator is a collective, payload or not
    comm = sum(o.kind == "kernel" and o.name.startswith("nccl") for o in spec.ops)
    assert parsed.tables["collectives"].num_rows == comm
    assert sorted(parsed.tables["ranks"]["rank"].to_pylist()) == list(range(spec.ranks))


def test_nsys_nccl_range_without_text_is_unnamed(tmp_path: Path) -> None:
    # fuzz find (the generated export with NCCL payloads): a NCCL-domain NVTX range with text
    # and textId both NULL; sqlite3: SELECT count(*) FROM NVTX_EVENTS WHERE text IS NULL AND
    # textId IS NULL AND domainId IS NOT NULL gave 1, and its name None raised AttributeError
    # (one such range: with every range of the domain unnamed, it is no longer taken for NCCL)
    import sqlite3

    from nsys_synth import make_spec, write_nsys

    spec = make_spec(seed=1, ranks=2, steps=2)
    path = write_nsys(spec, tmp_path / "no_text.sqlite", payloads=True)
    con = sqlite3.connect(path)
    n = con.execute(
        "UPDATE NVTX_EVENTS SET text = NULL, textId = NULL WHERE rowid IN "
        "(SELECT rowid FROM NVTX_EVENTS WHERE domainId IS NOT NULL LIMIT 1)"
    ).rowcount
    con.commit()
    con.close()
    assert n > 0
    parsed = formats.parse(path)
    # every NCCL kernel of the generator is still a collective, named from its kernel
    comm = [o for o in spec.ops if o.kind == "kernel" and o.name.startswith("nccl")]
    assert parsed.tables["collectives"].num_rows == len(comm)


@pytest.mark.parametrize("size", [2**64 - 1, 2**63], ids=["2pow64_minus_1", "2pow63"])
def test_nsys_payload_size_beyond_int64_is_no_size(tmp_path: Path, size: int) -> None:
    # fuzz find (the generated export with NCCL payloads): a message size field (uint64) of
    # 2^63 or more; storing it as int64 bytes raised OverflowError. The collective stays, with
    # no size.
    import sqlite3
    import struct

    from nsys_synth import ALLREDUCE_SCHEMA, make_spec, write_nsys

    spec = make_spec(seed=1, ranks=2, steps=2)
    path = write_nsys(spec, tmp_path / "huge_size.sqlite", payloads=True)
    con = sqlite3.connect(path)
    rows = con.execute("SELECT rowid, binaryData FROM NVTX_EVENTS WHERE binaryData IS NOT NULL")
    changed = 0
    for rowid, blob in rows.fetchall():
        _, schema, _, offset = struct.unpack_from("<4Q", blob)
        if schema == ALLREDUCE_SCHEMA:  # payload: communicator id, then the message size
            blob = blob[: offset + 8] + struct.pack("<Q", size) + blob[offset + 16 :]
            con.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?", [blob, rowid])
            changed += 1
    con.commit()
    con.close()
    assert changed > 0
    colls = formats.parse(path).tables["collectives"]
    comm = [o for o in spec.ops if o.kind == "kernel" and o.name.startswith("nccl")]
    assert colls.num_rows == len(comm)
    assert all(b is None or 0 <= b < 2**63 for b in colls["in_bytes"].to_pylist())


def test_nsys_event_class_without_id_is_left_out(tmp_path: Path) -> None:
    # fuzz find (the real 2024.6 export): ENUM_NSYS_EVENT_CLASS ids set to NULL; sqlite3:
    # SELECT id, name FROM ENUM_NSYS_EVENT_CLASS gives "|TRACE_PROCESS_EVENT_CUDA_DRIVER" (no id)
    # and int('None') raised ValueError. Read as if the table were absent: the same rows.
    path = _gunzipped(tmp_path, "s13_event_class_id_null.sqlite.gz")
    import sqlite3

    plain = tmp_path / "no_enum.sqlite"
    plain.write_bytes(path.read_bytes())
    con = sqlite3.connect(plain)
    con.execute("DROP TABLE ENUM_NSYS_EVENT_CLASS")
    con.commit()
    con.close()
    got, want = formats.parse(path).tables["activities"], formats.parse(plain).tables["activities"]
    assert got.num_rows > 0 and got.equals(want)


def _edited_nsys(tmp_path: Path, sql: str, params: list, ranks: int = 2, **kw: bool):
    """A generated nsys export (seed 1, 2 steps; `kw` as write_nsys takes) after one SQL edit:
    (its spec, its path)."""
    import sqlite3

    from nsys_synth import make_spec, write_nsys

    spec = make_spec(seed=1, ranks=ranks, steps=2)
    path = write_nsys(spec, tmp_path / "edited.sqlite", **kw)
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()
    return spec, path


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        # fuzz find: every kernel's deviceId set to -2^63 (sqlite3: SELECT deviceId, count(*)
        # FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 gave -9223372036854775808|48); the rank's
        # device (int32) raised ArrowInvalid
        ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = ?", -(2**63)),
        ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = ?", 2**31),
    ],
    ids=["minus_2pow63", "2pow31"],
)
def test_nsys_device_id_that_fits_no_column_is_no_device(
    tmp_path: Path, sql: str, value: int
) -> None:
    spec, path = _edited_nsys(tmp_path, sql, [value], payloads=True)
    ranks = formats.parse(path).tables["ranks"]
    # the ranks the payloads name, with no device (memcpys alone would give one: they keep
    # their ids, so a rank's device is its copies' or none, never a wrapped value)
    assert sorted(ranks["rank"].to_pylist()) == list(range(spec.ranks))
    assert all(d is None or 0 <= d < 2**31 for d in ranks["device"].to_pylist())


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        # a step number beyond int64: not a step (OverflowError before)
        (
            "UPDATE StringIds SET value = 'ProfilerStep#' || ? WHERE value LIKE 'ProfilerStep#%'",
            "9" * 30,
        ),  # fmt: skip
        # RANK of 5,000 digits, a superscript digit, beyond int32: no rank clue (ValueError,
        # ArrowInvalid before)
        ("UPDATE META_DATA_CAPTURE SET value = ?", 'RANK="' + "9" * 5000 + '"'),
        ("UPDATE META_DATA_CAPTURE SET value = ?", 'RANK="\u00b2"'),
        ("UPDATE META_DATA_CAPTURE SET value = ?", 'RANK="3000000000"'),
    ],
    ids=["step_30_digits", "rank_5000_digits", "rank_superscript", "rank_2pow31"],
)
def test_nsys_numbers_in_text_that_fit_no_column_are_no_clue(
    tmp_path: Path, sql: str, value: str
) -> None:
    spec, path = _edited_nsys(tmp_path, sql, [value], ranks=1, env_rank=True)
    parsed = formats.parse(path)
    steps = parsed.tables["steps"]["step"].to_pylist()
    # the generator's steps, or none when their numbers were replaced
    assert steps == ([] if value == "9" * 30 else sorted({n for _, n, _, _ in spec.steps}))
    assert parsed.tables["ranks"]["rank"].to_pylist() == [0]  # the only process: rank 0
