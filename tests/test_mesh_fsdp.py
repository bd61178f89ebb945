"""A real FSDP2 run with a compute straggler (tests/data/mesh/fsdp4_straggler2, made by
sample_traces/generate_mesh.py): the structure says FSDP and the straggler is named. The truth
is read from the traces by plain Python: which rank spends most time in `aten::mm` on its main
thread (the injected matmuls), and the all-gather and reduce sizes of the gloo events."""

from __future__ import annotations

import gzip
import json
from collections import Counter

from conftest import DATA

from commwall.analysis.collectives.roles import role_of, structural_role
from commwall.analysis.collectives.stragglers import stragglers_section
from commwall.analysis.db import open_db, run_id
from commwall.cli.main import main

SET = DATA / "mesh" / "fsdp4_straggler2"


def _events(path):
    return [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
            if e.get("ph") == "X"]  # fmt: skip


def test_the_structure_says_fsdp():
    events = _events(SET / "rank0.pt.trace.json.gz")
    gloo = [e for e in events if e["name"].startswith("gloo:")]
    ops = Counter(e["name"] for e in gloo)
    dims = {e["name"]: e["args"]["Input Dims"][0] for e in gloo}
    # {"name": "gloo:all_gather", ... "Input Dims": [[32928]]}; gloo:all_reduce [[131712]]
    gathered = {dims["gloo:all_gather"][0] * 4}  # out = in x 4 ranks
    reduced = {dims["gloo:all_reduce"][0]}
    role = structural_role(
        {"allgather": ops["gloo:all_gather"], "allreduce": ops["gloo:all_reduce"]},
        gathered,
        reduced,
    )
    assert role == "FSDP"
    assert role_of("0", "default_pg", role) == ("FSDP", "structure")


def test_the_compute_straggler_is_named(tmp_path):
    mm = {}
    for path in sorted(SET.glob("rank*.pt.trace.json.gz")):
        mm[int(path.name[4])] = sum(e["dur"] for e in _events(path) if e["name"] == "aten::mm")
    slow = max(mm, key=mm.get)
    truth = json.loads((SET / "ground_truth.json").read_text())
    assert slow == truth["straggler_rank"] == 2
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "f", "--quiet", str(SET)]) == 0
    con = open_db(db)
    s = stragglers_section(con, run_id(con, "f"))
    con.close()
    assert s["flagged"] == [slow]
    assert f"rank {slow}" in s["verdict"] and "compute straggler" in s["verdict"]
