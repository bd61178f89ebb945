"""Small pieces of the nsys parser: payload blobs, the --rank-map grammar, rank rules, tables."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

import pytest

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nsys.db import Export
from commwall.ingest.formats.nsys.payload import Entry, decode
from commwall.ingest.formats.nsys.ranks import Clues, Process, assign, parse_rank_map

SCHEMAS = {(1, 7): [Entry("nccl communicator id", 0, 8, False), Entry("rank", 8, 4, True)]}
P = Path("x.sqlite")


def blob(dom: int, schema: int, payload: bytes, offset: int = 32) -> bytes:
    return struct.pack("<4Q", dom, schema, len(payload), offset) + payload


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (blob(1, 7, struct.pack("<Qi", 0xABC, 5)), {"nccl communicator id": 0xABC, "rank": 5}),
        (blob(1, 7, struct.pack("<Qi", 1, -2)).hex(), {"nccl communicator id": 1, "rank": -2}),
        (blob(1, 7, struct.pack("<Q", 9)), {"nccl communicator id": 9}),  # short payload
        (blob(1, 8, struct.pack("<Qi", 1, 2)), None),  # unknown schema
        (blob(1, 7, struct.pack("<Qi", 1, 2), offset=8), None),  # offset inside the header
        (b"\x01\x02", None),
        ("not hex", None),
        (None, None),
    ],
)
def test_payload_decode(raw: bytes | str | None, want: dict | None) -> None:
    assert decode(raw, SCHEMAS) == want


def test_rank_map_grammar() -> None:
    got = parse_rank_map(P, ("4100=3", "node-a:17=0", "device:2=5", "gpu:1=4", " 9=1 "))
    assert got == [
        ("pid", 4100, 3),
        ("hostpid", "node-a:17", 0),
        ("device", 2, 5),
        ("device", 1, 4),
        ("pid", 9, 1),
    ]
    for bad in ("rank0", "4100", "device:x=1", "a:b:1=2", "1=-1"):
        with pytest.raises(IngestError, match="bad --rank-map entry"):
            parse_rank_map(P, (bad,))


NO_CLUES = Clues(payload={}, mpi={}, env={})


def proc(pid: int, device: int | None, host: str = "h") -> Process:
    return Process(proc=(1 << 24) | pid, pid=pid, host=host, device=device)


def ranks(procs: list[Process], clues: Clues = NO_CLUES, **kw: object) -> list[tuple]:
    got = assign(P, procs, clues, **kw)  # type: ignore[arg-type]
    return [(p.pid, got[p.proc].rank, got[p.proc].source) for p in procs]


def test_rank_rules_in_order() -> None:
    a, b, c = proc(10, 0), proc(11, 1), proc(12, 1)
    assert ranks([a, b]) == [(10, 0, "device id"), (11, 1, "device id")]
    # shared device: process order fills the lowest free ranks
    assert ranks([c, a, b]) == [
        (12, 2, "process order"),
        (10, 0, "process order"),
        (11, 1, "process order"),
    ]
    clues = Clues(payload={a.proc: (1, 2)}, mpi={b.proc: 0}, env={"RANK": "5"})
    assert ranks([a, b], clues) == [(10, 1, "nccl payload"), (11, 0, "MPI_RANKS")]
    assert ranks([a, b], clues, rank_map=("h:10=0", "device:1=1")) == [
        (10, 0, "rank map"),
        (11, 1, "rank map"),
    ]
    # a lone process: environment, then file name, then --rank
    assert ranks([a], Clues({}, {}, {"SLURM_PROCID": "6"})) == [(10, 6, "environment SLURM_PROCID")]
    assert assign(Path("w_rank12.sqlite"), [a], NO_CLUES)[a.proc].rank == 12
    assert ranks([a], rank=3) == [(10, 3, "--rank")]
    # the environment of a multi-process report says nothing about its processes
    assert ranks([a, b], Clues({}, {}, {"RANK": "5"}))[0][2] == "device id"


def test_world_size_from_payload_or_environment() -> None:
    a = proc(10, 0)
    got = assign(P, [a], Clues({a.proc: (3, 8)}, {}, {}))
    assert got[a.proc].world_size == 8
    got = assign(P, [a], Clues({}, {}, {"RANK": "2", "WORLD_SIZE": "4"}))
    assert (got[a.proc].rank, got[a.proc].world_size) == (2, 4)


def test_versioned_tables_and_missing_columns(tmp_path: Path) -> None:
    p = tmp_path / "v.sqlite"
    con = sqlite3.connect(p)
    for ddl in (
        "StringIds (id INTEGER, value TEXT)",
        "META_DATA_EXPORT (name TEXT, value TEXT)",
        "THING_V2 (a INTEGER)",
        "THING_V10 (a INTEGER, b INTEGER)",
    ):
        con.execute(f"CREATE TABLE {ddl}")
    con.commit()
    con.close()
    with Export(p, shown=p) as ex:
        assert ex.table("THING") == "THING_V10"
        assert ex.table("StringIds") == "StringIds" and ex.table("NVTX_EVENTS") is None
        assert ex.pick("THING_V2", "a", "b") == '"a", NULL AS "b"'
