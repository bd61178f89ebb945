"""The same intervals give the same report whether they come from Kineto or nsys (synthetic
traces from nsys_synth, whose ground truth is the interval list itself)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nsys_synth import (
    COMM_KERNEL,
    Spec,
    length,
    make_spec,
    overlap,
    union,
    write_kineto,
    write_nsys,
)

from commwall.analysis.db import open_db, run_id
from commwall.analysis.report.build import ranks_section, steps_section
from commwall.cli.main import main
from commwall.ingest import store
from commwall.ingest.formats import registry as formats
from commwall.ingest.options import ParseOptions


def cli_report(capsys: pytest.CaptureFixture[str], db: Path, run: str, paths: list[Path]) -> dict:
    """`commwall ingest` then `commwall report --format json`, as a user would run them."""
    assert main(["ingest", *map(str, paths), "--db", str(db), "--run", run, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--run", run, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def metrics(db_path: Path, run: str, paths: list[Path]) -> dict:
    """The report's `ranks` and `steps` sections of `paths` ingested as `run`."""
    con = store.connect(db_path)
    assert store.ingest(con, run, paths).committed
    con.close()
    con = open_db(db_path)
    rid = run_id(con, run)
    out = {"ranks": ranks_section(con, rid), "steps": steps_section(con, rid)}
    con.close()
    return out


def truth(spec: Spec) -> dict[int, tuple[int, int, int]]:
    """(τ_comp, τ_comm, overlap) ns per rank, from the interval list."""
    out = {}
    for r in range(spec.ranks):
        ops = [o for o in spec.ops if o.rank == r and o.kind == "kernel"]
        comp = union([(o.start, o.end) for o in ops if o.name != COMM_KERNEL])
        comm = union([(o.start, o.end) for o in ops if o.name == COMM_KERNEL])
        out[r] = (length(comp), length(comm), overlap(comp, comm))
    return out


VARIANTS = {
    "one file, ranks by device": lambda spec, d: [write_nsys(spec, d / "all.sqlite")],
    "one file, ranks by NCCL payload": lambda spec, d: [
        write_nsys(spec, d / "all.sqlite", payloads=True, device_of={0: 2, 1: 0, 2: 1})
    ],
    "a file per rank, ranks by environment": lambda spec, d: [
        write_nsys(spec, d / f"host{r}.sqlite", ranks=[r], device_of={r: 0}, env_rank=True)
        for r in range(spec.ranks)
    ],
    "export normalised to UTC (--ts-normalize)": lambda spec, d: [
        write_nsys(spec, d / "all.sqlite", normalized=True)
    ],
    "versioned kernel table": lambda spec, d: [
        write_nsys(spec, d / "all.sqlite", kernel_table="CUPTI_ACTIVITY_KIND_KERNEL_V3")
    ],
}


def test_cli_report_is_the_same_for_kineto_and_nsys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = make_spec(0, ranks=2, steps=3)
    db_path = tmp_path / "s.duckdb"
    kin = cli_report(capsys, db_path, "k", write_kineto(spec, tmp_path / "kineto"))
    nsys = cli_report(capsys, db_path, "n", [write_nsys(spec, tmp_path / "n.sqlite")])
    assert nsys["ranks"] == kin["ranks"] and nsys["steps"] == kin["steps"]
    # the split of exposed communication into waiting and transfer depends on the clocks: the
    # nsys export puts both ranks on one host (one clock), the Kineto files name no host (a clock
    # per rank, aligned on collective ends); everything else is the same
    split = ("exposed_wait_ms", "exposed_transfer_ms")
    assert {k: v for k, v in nsys["summary"].items() if k not in split} == {
        k: v for k, v in kin["summary"].items() if k not in split
    }
    assert sum(nsys["summary"][k] for k in split) == pytest.approx(
        sum(kin["summary"][k] for k in split)
    )
    assert len(nsys["steps"]) == 2 * 3
    assert nsys["run_info"]["files"] == {"nsys": 1} and kin["run_info"]["files"] == {"kineto": 2}


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_intervals_same_metrics(tmp_path: Path, variant: str) -> None:
    spec = make_spec(list(VARIANTS).index(variant), ranks=3, steps=4)
    kin = metrics(tmp_path / "s.duckdb", "k", write_kineto(spec, tmp_path / "kineto"))
    (tmp_path / "nsys").mkdir()
    nsys = metrics(tmp_path / "s.duckdb", "n", VARIANTS[variant](spec, tmp_path / "nsys"))
    assert nsys == kin
    assert len(nsys["steps"]) == 3 * 4
    for row in nsys["ranks"]:
        comp, comm, both = truth(spec)[row["rank"]]
        assert round(row["tau_comp_ms"] * 1e6) == comp
        assert round(row["tau_comm_ms"] * 1e6) == comm
        assert round(row["overlap_ms"] * 1e6) == both
        assert 0 < both < comm


@pytest.mark.parametrize(
    ("kwargs", "source", "world"),
    [
        ({}, "device id", None),
        ({"payloads": True, "device_of": {0: 1, 1: 0}}, "nccl payload", 2),
    ],
)
def test_rank_source_is_recorded(tmp_path: Path, kwargs: dict, source: str, world: int) -> None:
    spec = make_spec(3, ranks=2)
    p = formats.parse(write_nsys(spec, tmp_path / "x.sqlite", **kwargs))
    ranks = p.tables["ranks"].to_pylist()
    assert [(r["rank"], r["pid"], r["rank_source"], r["world_size"]) for r in ranks] == [
        (0, 1000, source, world),
        (1, 1001, source, world),
    ]
    assert p.detail["rank_source"] == source


def test_environment_rank_of_a_single_process_report(tmp_path: Path) -> None:
    spec = make_spec(4, ranks=4)
    path = write_nsys(spec, tmp_path / "n.sqlite", ranks=[3], device_of={3: 0}, env_rank=True)
    ranks = formats.parse(path).tables["ranks"].to_pylist()
    assert [(r["rank"], r["device"], r["rank_source"]) for r in ranks] == [
        (3, 0, "environment RANK")
    ]
    named = write_nsys(spec, tmp_path / "rank_2.sqlite", ranks=[2], device_of={2: 0})
    assert formats.parse(named).tables["ranks"]["rank_source"].to_pylist() == ["file name"]
    plain = write_nsys(spec, tmp_path / "plain.sqlite", ranks=[1], device_of={1: 0})
    ranks = formats.parse(plain, ParseOptions(rank=5)).tables["ranks"].to_pylist()
    assert [(r["rank"], r["rank_source"]) for r in ranks] == [(5, "--rank")]


def test_collective_sizes_from_nccl_payloads(tmp_path: Path) -> None:
    spec = make_spec(5, ranks=2)
    p = formats.parse(write_nsys(spec, tmp_path / "x.sqlite", payloads=True))
    got = p.tables["collectives"].sort_by([("rank", "ascending"), ("ts", "ascending")])
    want = sorted((o.rank, o.start, o.size) for o in spec.ops if o.name == COMM_KERNEL)
    assert got["in_bytes"].to_pylist() == [s for _, _, s in want]
    assert got["out_bytes"].to_pylist() == [s for _, _, s in want]
    assert set(got["op"].to_pylist()) == {"allreduce"}
    assert set(got["group_size"].to_pylist()) == {2}
    assert p.detail["nccl_domain"] == "named" and p.detail["nccl_payloads"] > 0


def test_pytorch_nccl_range_names_the_op(tmp_path: Path) -> None:
    spec = make_spec(6, ranks=2)
    for o in spec.ops:  # a kernel name that does not say the op
        if o.name == COMM_KERNEL:
            o.name = "ncclKernel_Generic"
    plain = formats.parse(write_nsys(spec, tmp_path / "a.sqlite"))
    named = formats.parse(write_nsys(spec, tmp_path / "b.sqlite", torch_ranges=True))
    assert set(plain.tables["collectives"]["op"].to_pylist()) == {"unknown"}
    assert set(named.tables["collectives"]["op"].to_pylist()) == {"allreduce"}


def test_missing_tables_are_tolerated_and_reported(tmp_path: Path) -> None:
    spec = make_spec(7, ranks=2)
    gone = (
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "TARGET_INFO_SESSION_START_TIME",
        "TARGET_INFO_GPU",
        "META_DATA_EXPORT",
    )
    p = formats.parse(write_nsys(spec, tmp_path / "x.sqlite", without=gone))
    assert p.ranks() == [0, 1]
    assert set(gone) <= set(p.detail["missing_tables"])
    assert p.detail["time_base"] == "unknown"
    assert any("not epoch ns" in n for n in p.detail["notes"])
    acts = p.tables["activities"]
    assert acts["ts"].equals(acts["launch_ts"])  # no runtime calls: launch = own start
    assert p.tables["steps"].num_rows == 0
    first = min(o.start for o in spec.ops if o.rank == 0)
    assert acts["ts"].to_pylist()[0] == first + 10_000_000_000  # session offsets as they are
