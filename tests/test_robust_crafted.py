"""Crafted inputs found by an audit of bad input, each made here from a real file of the repo:
a clear refusal naming the problem, or the file read as the format it is, in bounded time."""

from __future__ import annotations

import gzip
import json
import pickle
import sqlite3

import pytest
from conftest import DATA, SAMPLES

from commwall.cli.main import main
from commwall.ingest.errors import IngestError
from commwall.ingest.formats.registry import parse
from commwall.ingest.options import ParseOptions

GLOO = SAMPLES / "gloo_2rank_sizes" / "rank0.pt.trace.json.gz"
FR = SAMPLES / "fr_skip" / "rank0.json.gz"


def _trace() -> dict:
    return json.loads(gzip.decompress(GLOO.read_bytes()))


def _events(parsed) -> int:
    return parsed.tables["activities"].num_rows


def test_a_kineto_trace_with_a_byte_order_mark_is_read(tmp_path):
    """Windows tools write a UTF-8 BOM before JSON: the trace was taken for a text log ("no
    NCCL log lines found ... NCCL_DEBUG=INFO"); it is read, and reads as without the BOM."""
    raw = gzip.decompress(GLOO.read_bytes())
    plain, bom = tmp_path / "plain_rank0.json", tmp_path / "bom_rank0.json"
    plain.write_bytes(raw)
    bom.write_bytes(b"\xef\xbb\xbf" + raw)
    a, b = parse(plain, ParseOptions()), parse(bom, ParseOptions())
    assert b.format == "kineto" and _events(a) == _events(b) > 0


def test_a_kineto_trace_with_many_process_groups_is_not_a_flight_recorder_dump(tmp_path):
    """41 process groups of 1,024 ranks in distributedInfo put `traceEvents` past the sniffed
    head while `pg_config` is in it: the trace was refused as "not a Flight Recorder dump"."""
    d = _trace()
    d["distributedInfo"]["pg_config"] += [
        {"pg_name": str(i), "pg_desc": f"pg{i}", "pg_size": 1024, "ranks": list(range(1024))}
        for i in range(1, 41)
    ]
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps(d))
    parsed = parse(p, ParseOptions())
    assert parsed.format == "kineto" and parsed.tables["process_groups"].num_rows == 41


def test_a_pg_ranks_string_nested_past_reason(tmp_path):
    d = _trace()
    d = {"traceEvents": d["traceEvents"], **{k: v for k, v in d.items() if k != "traceEvents"}}
    d["distributedInfo"]["pg_config"][0]["ranks"] = "[" * 20000 + "]" * 20000
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps(d))
    (row,) = parse(p, ParseOptions()).tables["process_groups"].to_pylist()[:1]
    assert row["ranks"] is None  # unreadable, as any other ranks text that is no list


@pytest.mark.parametrize(
    ("ranks", "shown"), [("[0, 1e400]", "@@"), ("[" * 100000 + "]" * 100000, None)]
)
def test_flight_recorder_group_ranks_that_are_no_ranks(tmp_path, ranks, shown):
    dump = json.loads(gzip.decompress(FR.read_bytes()))
    key = next(iter(dump["pg_config"]))
    dump["pg_config"][key]["ranks"] = "@@" if shown else ranks
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps(dump).replace('"@@"', ranks) if shown else json.dumps(dump))
    with pytest.raises(IngestError, match="not a list of ranks"):
        parse(p, ParseOptions())


def test_a_pickle_of_colliding_integer_keys_is_refused(tmp_path):
    """Keys k·(2**61 − 1) all hash alike: building the dict is quadratic (150,000 keys: 258 s)."""
    m = (1 << 61) - 1
    value = {"version": "2.4", "entries": [], "pg_config": {k * m: None for k in range(1, 50)}}
    p = tmp_path / "rank0.pkl"
    p.write_bytes(pickle.dumps(value, protocol=4))
    with pytest.raises(IngestError, match="an integer of 6[4-9] bits"):
        parse(p, ParseOptions())


@pytest.mark.parametrize("table", ["StringIds", "TARGET_INFO_SYSTEM_ENV"])
def test_an_export_with_generated_columns_is_refused(tmp_path, table):
    """A generated column computes its value on every read (500 MB a row in the audit's file)."""
    p = tmp_path / "evil.sqlite"
    with gzip.open(DATA / "nsys" / "nvfuser_1gpu" / "report2_nsys2024.6.sqlite.gz") as f:
        p.write_bytes(f.read())
    con = sqlite3.connect(p)
    if table not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}:
        con.execute(f"CREATE TABLE {table} (id INTEGER, value TEXT)")
    first = con.execute(f"PRAGMA table_info({table})").fetchone()[1]
    con.execute(
        f"ALTER TABLE {table} ADD COLUMN evil TEXT GENERATED ALWAYS AS (hex({first})) VIRTUAL"
    )
    con.commit()
    con.close()
    with pytest.raises(IngestError, match=rf"generated\) columns \({table}\.evil"):
        parse(p, ParseOptions())


@pytest.mark.parametrize("rank", ["99999999999", "-3", "1.5"])
def test_rank_option_out_of_range(tmp_path, capsys, rank):
    d = _trace()
    d.pop("distributedInfo")
    p = tmp_path / "norank.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SystemExit):
        main(["ingest", str(p), "--db", str(tmp_path / "s.duckdb"), "--rank", rank])
    assert "needs a rank, 0 to 2,147,483,647" in capsys.readouterr().err
    assert not (tmp_path / "s.duckdb").exists()


def test_dev_zero_is_refused(tmp_path, capsys):
    """/dev/zero was refused as unrecognised at once, but the ingest then waited forever on
    hashing it."""
    rc = main(["ingest", "/dev/zero", "--db", str(tmp_path / "s.duckdb"), "--run", "z", "--quiet"])
    assert rc != 0 and "/dev/zero" in capsys.readouterr().err
