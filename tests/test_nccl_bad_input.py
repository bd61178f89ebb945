"""Bad NCCL log input: named in a clear message, nothing stored; damaged lines inside a log
are counted, never fatal."""

from __future__ import annotations

import gzip

import duckdb
import pytest
from nccl_log_gen import Job, make_log

from commwall.cli.main import main
from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nccl_log import parse

LOG = make_log(Job(version="2.24.3", nodes=1, gpus=2, network="nvlink", colls=5))


def make_text_without_nccl(p):
    p.write_text("epoch 1 loss 0.5\nepoch 2 loss 0.4\nNCCL_DEBUG was not set\n" * 50)


def make_binary(p):
    p.write_bytes(bytes(range(256)) * 64)


def make_empty(p):
    p.write_bytes(b"")


def make_blank(p):
    p.write_text("\n\n   \n")


def make_truncated_gzip(p):
    LOG.write(p, gz=True)
    p.write_bytes(p.read_bytes()[:-40])


def make_corrupt_gzip(p):
    LOG.write(p, gz=True)
    data = bytearray(p.read_bytes())
    data[-8:-4] = b"\x00\x00\x00\x00"  # wrong CRC
    p.write_bytes(bytes(data))


CASES = [
    ("train.log", make_text_without_nccl, "no NCCL log lines found"),
    ("dump.log", make_binary, "unrecognised format"),
    ("empty.log", make_empty, "file is empty"),
    ("blank.log", make_blank, "file is empty"),
    ("cut.log.gz", make_truncated_gzip, "truncated gzip"),
    ("crc.log.gz", make_corrupt_gzip, "corrupt gzip"),
]
NCCL_TABLES = ("nccl_files", "nccl_processes", "nccl_colls", "nccl_unknown")


def counts(db) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in NCCL_TABLES}
        tables["files"] = con.execute("SELECT count(*) FROM files").fetchone()[0]
        return tables
    finally:
        con.close()


@pytest.fixture
def db(tmp_path):
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(LOG.write(tmp_path / "good.log")), "--db", str(db), "--quiet"]) == 0
    return db


@pytest.mark.parametrize("name,make,message", CASES, ids=[c[0] for c in CASES])
def test_bad_log_is_named_and_nothing_stored(tmp_path, capsys, db, name, make, message):
    before = counts(db)
    bad = tmp_path / name
    make(bad)
    other = LOG.write(tmp_path / "other.log", crlf=True)
    rc = main(["ingest", str(other), str(bad), "--db", str(db), "--run", "new", "--quiet"])
    err = capsys.readouterr().err
    assert rc != 0 and str(bad) in err and message in err and "nothing was stored" in err
    assert counts(db) == before


@pytest.mark.parametrize("name,make,message", CASES, ids=[c[0] for c in CASES])
def test_parser_raises_ingest_error(tmp_path, name, make, message):
    bad = tmp_path / name
    make(bad)
    with pytest.raises(IngestError) as e:
        parse(bad)
    assert e.value.path == str(bad)
    expected = "binary file" if message == "unrecognised format" else message
    assert expected in e.value.problem


def test_keep_going_lands_the_good_log(tmp_path, capsys, db):
    bad = tmp_path / "train.log"
    make_text_without_nccl(bad)
    good = make_log(Job(version="2.18.3", hosts=("h1", "h2"), pid_base=9000)).write(
        tmp_path / "g.log"
    )
    rc = main(
        ["ingest", str(good), str(bad), "--db", str(db), "--run", "kg", "--keep-going", "--quiet"]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "no NCCL log lines found" in err and "1 file(s) ingested" in err
    assert counts(db)["nccl_files"] == 2


def test_size_limit_applies_to_the_stream(tmp_path, capsys, db):
    big = tmp_path / "big.log.gz"
    with gzip.open(big, "wt") as f:
        f.write("\n".join(LOG.lines) + "\n" + "x" * 3_000_000)
    rc = main(["ingest", str(big), "--db", str(db), "--run", "b", "--max-file-size", "0.002"])
    assert rc != 0 and "over the limit" in capsys.readouterr().err


def test_nccl_lines_after_a_long_preamble_are_accepted(tmp_path):
    """Documented choice: any text file is sniffed as a possible log; the whole file is read."""
    p = tmp_path / "late.log"
    p.write_text(
        "".join(f"training preamble line {i}\n" for i in range(20000)) + "\n".join(LOG.lines)
    )
    parsed = parse(p)
    assert parsed.detail["lines"]["nccl"] == LOG.truth.lines["nccl"]
    assert parsed.detail["lines"]["total"] == 20000 + LOG.truth.lines["total"]


def test_damaged_lines_are_counted_not_fatal(tmp_path):
    lines = list(LOG.lines)
    lines[3] = lines[3][:25]
    lines.insert(5, "\x1b[31mgarbage NCCL WARN \udcff half a line")
    p = tmp_path / "d.log"
    p.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    parsed = parse(p)
    d = parsed.detail["lines"]
    assert d["damaged"] == LOG.truth.lines["damaged"] + 1
    assert d["recognised"] + d["unknown"] == d["nccl"]
    kinds = parsed.tables["nccl_unknown"].column("kind").to_pylist()
    assert kinds.count("damaged") == d["damaged"]


RING = b"host1:123:456 [0] NCCL INFO Channel 00/02 :    0   1   2   3\n"


def test_a_gzip_bomb_of_one_repeated_line_is_refused_before_it_is_parsed(tmp_path):
    """Two gzip members of 256 MB of one ring line each (1.5 MB on disk, over the 100x + 64 MB
    allowance): the inflated size is checked on a pass that only inflates. The log used to be
    parsed while inflated: 45 s and 1.46 GB for this file, minutes and 8.5 GB (rising) for one
    of 40 members, before the limit was reached."""
    member = gzip.compress(RING * ((256 << 20) // len(RING)), 6)
    p = tmp_path / "bomb.log.gz"
    p.write_bytes(member * 2)
    with pytest.raises(IngestError, match="a gzip bomb"):
        parse(p)


def test_topology_lines_without_a_communicator_are_stored_not_held(tmp_path):
    """Ring lines wait for the communicator being initialised on their (process, device); a log
    of ring lines and no init held every one of them in memory. Past MAX_PENDING they are
    stored without a communicator: all of them, each once."""
    from commwall.ingest.formats.nccl_log.state import MAX_PENDING

    n = MAX_PENDING + 10
    p = tmp_path / "rings.log"
    p.write_bytes(RING * n)
    channels = parse(p).tables["nccl_channels"]
    assert channels.num_rows == n
    assert sorted(channels.column("line_no").to_pylist()) == list(range(1, n + 1))
    assert set(channels.column("comm").to_pylist()) == {None}
