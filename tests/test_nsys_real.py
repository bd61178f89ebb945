"""nsys ingest on the bundled real exports, checked against sqlite3 queries of the same files."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import date, datetime, timezone
from pathlib import Path

import pytest
from conftest import DATA, gunzip_to
from nsys_synth import length, overlap, union

from commwall.analysis import db
from commwall.analysis.report.build import ranks_section, run_section, summary_section
from commwall.ingest import store
from commwall.ingest.formats import registry as formats
from commwall.ingest.options import ParseOptions

NSYS = DATA / "nsys"
MFU = NSYS / "nsys_ai_2gpu" / "mfu_2gpu_before.sqlite.gz"
H100 = NSYS / "nsys_ai_2gpu" / "h100_2gpu_1s.sqlite.gz"
MOCK = NSYS / "nsys_ai_2gpu" / "mock.sqlite.gz"
NV2025 = NSYS / "nvfuser_1gpu" / "report1_nsys2025.1.sqlite.gz"
NV2024 = NSYS / "nvfuser_1gpu" / "report2_nsys2024.6.sqlite.gz"


def truth_by_pid(path: Path) -> dict[int, dict[str, int]]:
    """τ_comp, τ_comm, overlap and busy ns per OS pid, straight from the SQLite rows: kernels
    whose short name starts with `nccl` are comm, the others compute; memcpy/memset only add
    to busy time."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows: dict[int, dict[str, list]] = {}
    q = (
        "SELECT (k.globalPid >> 24) & 16777215, k.start, k.end, s.value "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
    )
    for pid, s, e, name in con.execute(q):
        kind = "comm" if name.lower().startswith("nccl") else "comp"
        rows.setdefault(pid, {"comm": [], "comp": [], "mem": []})[kind].append((s, e))
    for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        for pid, s, e in con.execute(f"SELECT (globalPid >> 24) & 16777215, start, end FROM {t}"):
            rows[pid]["mem"].append((s, e))
    con.close()
    out = {}
    for pid, r in rows.items():
        comp, comm = union(r["comp"]), union(r["comm"])
        every = r["comp"] + r["comm"] + r["mem"]
        out[pid] = {
            "comp": length(comp),
            "comm": length(comm),
            "both": overlap(comp, comm),
            "busy": length(union(every)),
            "span": max(e for _, e in every) - min(s for s, _ in every),
            "n_comm": len(r["comm"]),
        }
    return out


@pytest.fixture(scope="module")
def mfu(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The 2-GPU export ingested (as its .gz) into a fresh store: (store, plain .sqlite)."""
    tmp = tmp_path_factory.mktemp("mfu")
    con = store.connect(tmp / "s.duckdb")
    summary = store.ingest(con, "mfu", [MFU])
    con.close()
    assert summary.committed and summary.files[0].format == "nsys"
    return tmp / "s.duckdb", gunzip_to(MFU, tmp)


def test_two_gpu_ranks_and_metrics_match_sqlite(mfu: tuple[Path, Path]) -> None:
    path, plain = mfu
    con = db.open_db(path)
    rid = db.run_id(con, "mfu")
    report = {
        "ranks": ranks_section(con, rid),
        "run_info": run_section(con, rid),
        "summary": summary_section(con, rid),
    }
    ranks = con.execute("SELECT rank, pid, device, rank_source, backend FROM ranks").fetchall()
    assert sorted(ranks) == [(0, 144, 0, "device id", "nccl"), (1, 145, 1, "device id", "nccl")]
    truth = truth_by_pid(plain)
    assert set(truth) == {144, 145}
    for row in report["ranks"]:
        t = truth[144 + row["rank"]]
        assert t["n_comm"] == 33
        assert round(row["tau_comp_ms"] * 1e6) == t["comp"]
        assert round(row["tau_comm_ms"] * 1e6) == t["comm"]
        assert round(row["overlap_ms"] * 1e6) == t["both"]
        assert round(row["span_ms"] * 1e6) == t["span"]
        assert round(row["idle_ms"] * 1e6) == t["span"] - t["busy"]
        assert t["comm"] > 1_000_000 and t["comp"] > 100_000_000
    assert report["run_info"]["n_steps"] == 0 and report["summary"]["scope"] == "whole trace"
    con.close()


def test_send_recv_kernels_are_communication_and_collectives(mfu: tuple[Path, Path]) -> None:
    con = db.open_db(mfu[0])
    comm = con.execute(
        "SELECT rank, count(*), count(DISTINCT name) FROM activities WHERE kind = 'comm' "
        "GROUP BY rank ORDER BY rank"
    ).fetchall()
    assert comm == [(0, 33, 1), (1, 33, 1)]
    name = con.execute("SELECT any_value(name) FROM activities WHERE kind = 'comm'").fetchone()[0]
    assert name.startswith("ncclDevKernel_SendRecv")
    ops = con.execute("SELECT op, count(*) FROM collectives GROUP BY op ORDER BY op").fetchall()
    # PyTorch's `nccl:all_to_all` NVTX range encloses the launch of 64 of them; for 2 the
    # launching runtime call lies outside the time slice, so only the kernel name tells.
    assert ops == [("alltoall", 64), ("sendrecv", 2)]
    con.close()
    sq = sqlite3.connect(f"file:{mfu[1]}?mode=ro", uri=True)
    (orphans,) = sq.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "AND r.globalTid >> 24 = k.globalPid >> 24 WHERE s.value LIKE 'nccl%' AND r.start IS NULL"
    ).fetchone()
    assert orphans == 2
    sq.close()


def test_time_base_is_session_start_plus_offset(mfu: tuple[Path, Path]) -> None:
    sq = sqlite3.connect(f"file:{mfu[1]}?mode=ro", uri=True)
    (start,) = sq.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    (first,) = sq.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    sq.close()
    con = db.open_db(mfu[0])
    got = con.execute("SELECT min(ts) FROM activities WHERE cat = 'kernel'").fetchone()[0]
    detail = json.loads(con.execute("SELECT detail FROM files").fetchone()[0])
    con.close()
    assert got == start + first
    assert datetime.fromtimestamp(got / 1e9, timezone.utc).date() == date(2026, 5, 26)
    assert detail["time_base"] == "session" and detail["session_start_ns"] == start
    assert detail["missing_tables"] == ["TARGET_INFO_GPU"]
    assert detail["nccl_domain"] == "inferred from range names"
    assert detail["steps"] == 0
    assert any("whole-report totals only" in n for n in detail["notes"])
    assert any(n.startswith("time slice") for n in detail["notes"])


def test_nccl_nvtx_ranges_are_kept_with_their_domain(mfu: tuple[Path, Path]) -> None:
    con = db.open_db(mfu[0])
    rows = con.execute(
        "SELECT cat, count(*) FROM activities WHERE cat LIKE 'nvtx%' GROUP BY cat ORDER BY cat"
    ).fetchall()
    con.close()
    # the export's own rows: closed push/pop ranges (eventType 59 = NvtxPushPopRange in its
    # ENUM_NSYS_EVENT_TYPE) of the default domain (0) and of the unnamed domain whose ranges
    # are all NCCL API calls (ncclSend, ncclRecv, ncclGroupStart/End, ncclCommCount)
    sq = sqlite3.connect(f"file:{mfu[1]}?mode=ro", uri=True)
    (pushpop,) = sq.execute(
        "SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name = 'NvtxPushPopRange'"
    ).fetchone()
    q = (
        "SELECT iif(domainId = 0, 'default', 'other'), count(*), count(*) FILTER (WHERE coalesce(text, s.value) "
        "NOT GLOB 'nccl[A-Z]*') FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE eventType = ? AND end IS NOT NULL GROUP BY 1"
    )
    by_domain = {d: (n, not_nccl) for d, n, not_nccl in sq.execute(q, (pushpop,))}
    sq.close()
    assert by_domain["other"][1] == 0  # the other domain's ranges are all NCCL calls
    assert rows == [("nvtx", by_domain["default"][0]), ("nvtx:NCCL", by_domain["other"][0])]


def test_plain_and_gzipped_exports_parse_identically(tmp_path: Path) -> None:
    a = formats.parse(MFU)
    b = formats.parse(gunzip_to(MFU, tmp_path))
    for name, table in a.tables.items():
        assert table.equals(b.tables[name]), name
    assert a.detail == b.detail


@pytest.mark.parametrize(
    ("path", "version", "schema", "kernels"),
    [(NV2025, "2025.1.1.110", "3.17.1", 18), (NV2024, "2024.6.2.25", "3.16.1", 19)],
)
def test_single_gpu_exports_of_two_nsys_versions(
    tmp_db: Path, path: Path, version: str, schema: str, kernels: int
) -> None:
    con = store.connect(tmp_db)
    assert store.ingest(con, "one", [path]).files[0].format == "nsys"
    detail = json.loads(con.execute("SELECT detail FROM files").fetchone()[0])
    ranks = con.execute("SELECT rank, gpu_name, rank_source FROM ranks").fetchall()
    kinds = dict(
        con.execute(
            "SELECT kind, count(*) FROM activities WHERE cat = 'kernel' GROUP BY kind"
        ).fetchall()
    )
    n_gpus = con.execute("SELECT count(*) FROM nsys_gpus").fetchone()[0]
    con.close()
    assert (detail["nsys_version"], detail["export_schema"]) == (version, schema)
    assert detail["missing_tables"] == []
    assert ranks == [(0, "NVIDIA H200", "device id")]
    assert kinds == {"compute": kernels} and n_gpus == 1


def test_mock_reads_target_info_gpu() -> None:
    p = formats.parse(MOCK)
    gpus = p.tables["nsys_gpus"].to_pylist()
    assert gpus == [
        {
            "device": 0,
            "name": "NVIDIA GeForce RTX 3080",
            "uuid": "554a6988-03dd-6206-3dd1-f43fb60a3ed0",
            "bus_location": "0000:01:00.0",
            "sm_count": 68,
            "total_memory_bytes": 10736893952,
            "memory_bandwidth_bytes_per_s": 760080000000,
            "clock_rate_hz": 1710000000,
            "compute_capability": "8.6",
        }
    ]
    assert p.tables["ranks"]["gpu_name"].to_pylist() == ["NVIDIA GeForce RTX 3080"]
    assert p.detail["missing_tables"] == ["CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS"]


def test_h100_slice_without_nccl(tmp_db: Path) -> None:
    con = store.connect(tmp_db)
    store.ingest(con, "h100", [H100])
    rows = con.execute(
        "SELECT rank, count(*) FILTER (kind = 'compute'), count(*) FILTER (kind = 'comm'), "
        "count(*) FILTER (kind = 'memory') FROM activities GROUP BY rank ORDER BY rank"
    ).fetchall()
    n_gpus = con.execute("SELECT count(*) FROM nsys_gpus").fetchone()[0]
    con.close()
    assert rows == [(0, 1721, 0, 463), (1, 1721, 0, 463)]
    assert n_gpus == 0


def test_step_range_regex_on_real_ranges(tmp_path: Path) -> None:
    plain = gunzip_to(MFU, tmp_path)
    sq = sqlite3.connect(f"file:{plain}?mode=ro", uri=True)
    seqs = {
        (pid, int(m.group(1)))
        for pid, text in sq.execute("SELECT globalTid >> 24 & 16777215, text FROM NVTX_EVENTS")
        if text and (m := re.match(r"^AllToAll4D, seq = (\d+)", text))
    }
    sq.close()
    p = formats.parse(plain, ParseOptions(step_regex=r"^AllToAll4D, seq = (\d+)"))
    steps = p.tables["steps"].to_pylist()
    assert {(144 + s["rank"], s["step"]) for s in steps} == seqs
    assert len(steps) == len(seqs) > 10
    assert all(s["dur"] > 0 for s in steps)


def test_rank_map_overrides_device_order() -> None:
    p = formats.parse(MFU, ParseOptions(rank_map=("145=0", "modal:144=1")))
    rows = p.tables["ranks"].select(["rank", "pid", "rank_source"]).to_pylist()
    assert rows == [
        {"rank": 0, "pid": 145, "rank_source": "rank map"},
        {"rank": 1, "pid": 144, "rank_source": "rank map"},
    ]
    p = formats.parse(MFU, ParseOptions(rank_map=("device:0=7", "device:1=3")))
    assert p.tables["ranks"].select(["rank", "device"]).to_pylist() == [
        {"rank": 3, "device": 1},
        {"rank": 7, "device": 0},
    ]


def test_without_step_marks_the_culprit_is_not_said_to_lack_operator_time(mfu) -> None:
    """The export has compute kernels on both GPUs but no step range (no NVTX range named like
    a step in NVTX_EVENTS, read with sqlite3): operator work is compared per step, so the
    paragraph said "no operator time to compare it on" of a rank with 250 ms of kernels."""
    from commwall.analysis.report.build import build_report

    path, plain = mfu
    with sqlite3.connect(plain) as q:
        names = [n for (n,) in q.execute("SELECT DISTINCT text FROM NVTX_EVENTS") if n]
        kernels = q.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert kernels > 0 and not any(re.search(r"step", n, re.IGNORECASE) for n in names)
    con = db.open_db(path)
    rep = build_report(con, "mfu", keep_going=False)
    con.close()
    assert rep["run_info"]["n_steps"] == 0
    para = rep["diagnosis"]["paragraph"]
    assert rep["diagnosis"]["culprits"] and "no operator time to compare it on" not in para
    assert "no steps marked in the traces to compare its operator work on" in para
