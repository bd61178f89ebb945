"""NCCL Inspector joined with the rest of the run (traces, NCCL logs, nccl-tests), the
ranks × time grid of who was last, and the diagnosis's sentence. Expected values come from the
generator's truth (sample_traces/generate_inspector.py) or from plain Python over its output."""

from __future__ import annotations

from pathlib import Path
from statistics import median

import pytest
from conftest import SAMPLES

from commwall.analysis import db
from commwall.analysis.inspector.grid import last_grid
from commwall.analysis.inspector.joined import percentile
from commwall.analysis.inspector.section import inspector_section
from commwall.analysis.inspector.sentence import MAX_WORDS, inspector_sentence
from commwall.ingest import discover
from commwall.ingest.store import connect, ingest
from commwall.sample_traces.generate_inspector import US_PER_MIN, JobSpec, write_job

GLOO = SAMPLES / "gloo_4rank_sleep"
MIN_NS = US_PER_MIN * 1000


def _store(tmp_path: Path, paths: list[Path]):
    con = connect(tmp_path / "s.duckdb")
    summary = ingest(con, "job", paths)
    assert summary.committed and not summary.failed
    db.load_modules(con)
    return con


# -- percentile, table-driven ----------------------------------------------------------------

PCT = [
    ("below all", 1.0, [2.0, 3.0, 4.0, 5.0], 0.0),
    ("above all", 9.0, [2.0, 3.0, 4.0, 5.0], 100.0),
    ("in the middle", 3.5, [2.0, 3.0, 4.0, 5.0], 50.0),
    ("a tie counts half", 3.0, [2.0, 3.0, 4.0, 5.0], 37.5),  # (1 + 0.5) / 4
    ("nothing to compare", 3.0, [], None),
]


@pytest.mark.parametrize("case,value,values,want", PCT, ids=[c[0] for c in PCT])
def test_percentile(case, value, values, want):
    assert percentile(value, values) == want


# -- joined with a traced run ----------------------------------------------------------------


def _window(tmp_path: Path) -> tuple[int, int]:
    """The traced steps of the gloo set (a scratch ingest: where to place the Inspector job)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    con = connect(tmp_path / "scratch.duckdb")
    ingest(con, "g", discover.expand([str(GLOO)]))
    lo, hi = con.execute("SELECT min(ts), max(ts + dur) FROM steps").fetchone()
    con.close()
    return lo, hi


def test_the_same_job_joins_its_traces_and_says_the_window_was_slow(tmp_path):
    lo, hi = _window(tmp_path / "w")
    # the job of the traces: 4 ranks on host "vm", processes 6949-6952 (rank1.pt.trace.json.gz:
    # "pid": 6950 on its events; "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", ...,
    # "ranks": [0, 1, 2, 3]}]); the Inspector run starts 35 minutes before the traced window's
    # minute and its NIC degrades at minute 30: the window falls in the slow part
    minute0 = lo // MIN_NS * MIN_NS - 35 * MIN_NS
    spec = JobSpec(hosts=2, gpus=2, minutes=40, host_names=("vm", "vm"), pid_base=6949,
                   start_us=minute0 // 1000, slow_rank=None, nic_host=1, nic_from_min=30.0,
                   verbose=True)  # fmt: skip
    truth = write_job(tmp_path / "insp", spec)
    con = _store(tmp_path, [*discover.expand([str(GLOO)]), *(tmp_path / "insp").glob("*.log")])
    s = inspector_section(con, 1)
    con.close()
    j = s["join"]
    assert (j["processes"], j["traced_processes"]) == (4, 4)
    # the communicators over ranks 0-3 are process group "0"; the TP ones (2 ranks) are not
    want = sorted(cid for cid, c in truth.comms.items() if sorted(c["members"]) == [0, 1, 2, 3])
    assert sorted(g["comm_id"] for g in j["groups"]) == want
    assert {g["process_group"] for g in j["groups"]} == {"0"}
    assert {g["source"] for g in j["groups"]} == {"kineto"}
    # the traced window: the DP series' median bandwidth of the window's minute, placed among
    # the run's minutes, computed from the generator's per-instance truth
    dp = next(cid for cid, c in truth.comms.items() if c["name"] == "DP")
    per_minute: dict[int, list[float]] = {}
    for sn, bw in truth.fabric_busbw[dp].items():
        m = truth.instance_us[dp][sn] * 1000 // MIN_NS * MIN_NS
        per_minute.setdefault(m, []).append(bw)
    minutes = {m: median(v) for m, v in per_minute.items()}
    inside = minutes[lo // MIN_NS * MIN_NS]
    run = list(minutes.values())
    want_pct = 100 * (sum(v < inside for v in run) + 0.5 * sum(v == inside for v in run)) / len(run)
    w = s["traced_window"]
    assert (w["start_ts"], w["end_ts"], w["source"]) == (lo, hi, "steps")
    got = next(x for x in w["series"] if x["comm_id"] == dp)
    assert got["n_minutes"] == len(run) == 40
    assert got["percentile"] == pytest.approx(want_pct, abs=100 / len(run))
    assert got["percentile"] < 25  # 10 of the 40 minutes are degraded
    assert w["typical"] is False and not got["typical"]
    assert "not typical" in w["sentence"]


def test_nccl_log_comm_ids_and_nccl_tests_baseline(tmp_path):
    """Table-driven: NCCL log communicators and nccl-tests rows inserted beside a generated
    job; the join is by comm id, the baseline by op, ranks and nearest size."""
    truth = write_job(tmp_path / "j", JobSpec(hosts=2, gpus=2, minutes=6, slow_rank=None,
                                              nic_host=None))  # fmt: skip
    con = _store(tmp_path, list((tmp_path / "j").glob("*.log")))
    dp = next(cid for cid, c in truth.comms.items() if c["name"] == "DP")
    con.execute(
        "INSERT INTO nccl_communicators (run_id, file_id, proc, comm, comm_id, rank, nranks) "
        "VALUES (1, 99, 0, '0x1', ?, 0, 4), (1, 99, 1, '0x2', ?, 1, 4), "
        "(1, 99, 0, '0x3', '0xdeadbeef', 0, 2)",
        [dp.upper().replace("0X", "0x"), dp],
    )
    # (test, n_ranks, size_bytes, oop_busbw): DP is an AllReduce of 1.5 GiB over 4 ranks, size
    # class [1 GiB, 2 GiB): the 2 GiB row is nearest log2 30.5 (|31 - 30.5| = |30 - 30.5|,
    # ties to the larger size); other ops and rank counts are never used
    rows = [
        ("all_reduce", 4, 1 << 30, 100.0),
        ("all_reduce", 4, 1 << 31, 200.0),
        ("all_reduce", 4, 1 << 20, 50.0),
        ("all_reduce", 8, 3 << 29, 900.0),
        ("all_gather", 4, 3 << 29, 800.0),
    ]
    for i, (test, n, size, bw) in enumerate(rows):
        con.execute(
            "INSERT INTO nccl_test_results (run_id, file_id, table_no, test, n_ranks, "
            "size_bytes, oop_busbw_gbs) VALUES (1, 99, 1, ?, ?, ?, ?)",
            [test, n, size, bw],
        )
        del i
    s = inspector_section(con, 1)
    con.close()
    comms = {c["comm_id"]: c for c in s["communicators"]}
    assert comms[dp]["nccl_log"] and not any(c["nccl_log"] for k, c in comms.items() if k != dp)
    assert s["join"]["nccl_log_comms"] == [dp]
    (b,) = [x for x in s["baseline"] if x["comm_id"] == dp]
    assert (b["test_size_bytes"], b["test_busbw_gbs"]) == (1 << 31, 200.0)
    # the generator's healthy DP bus bandwidth is 480 GB/s (± 2 %)
    assert b["of_baseline"] == pytest.approx(480 / 200, rel=0.03)
    assert [x["comm_id"] for x in s["baseline"]] == [dp]  # nothing else has a matching test


# -- the grid and the sentence ---------------------------------------------------------------


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("job")
    spec = JobSpec(hosts=4, gpus=2, minutes=40, slow_rank=3, slow_from_min=20.0, nic_host=2,
                   nic_from_min=10.0, verbose=True)  # fmt: skip
    truth = write_job(tmp / "j", spec)
    con = _store(tmp, list((tmp / "j").glob("*.log")))
    s = inspector_section(con, 1)
    con.close()
    return spec, truth, s


def test_the_grid_says_who_was_last_per_minute(job):
    spec, truth, s = job
    dp = next(cid for cid, c in truth.comms.items() if c["name"] == "DP")
    grid = [g for g in s["last_grid"] if g["comm_id"] == dp]
    assert grid and {g["minutes"] for g in grid} == {1}  # 40 minutes: one bucket a minute
    # the straggler's communicators come first, the widest (DP, every rank) first of them
    assert s["last_grid"][0]["comm_id"] == dp
    # per minute, how often the truth's last rank was the slow rank
    slow = spec.slow_rank
    truth_min: dict[int, list[int]] = {}
    for sn, last in truth.last[dp].items():
        m = truth.instance_us[dp][sn] * 1000 // MIN_NS * MIN_NS
        truth_min.setdefault(m, []).append(last)
    mine = {g["start_ts"]: g for g in grid if g["global_rank"] == slow}
    assert mine and all(g["host"] == truth.ranks[slow]["host"] for g in mine.values())
    for m, lasts in truth_min.items():
        want = sum(r == slow for r in lasts) / len(lasts)
        assert mine[m]["share"] == pytest.approx(want, abs=1 / len(lasts) + 1e-9), m


def test_grid_is_bounded():
    rows = [
        {"comm_id": "c", "minute_ts": m * MIN_NS, "rank": r, "n_instances": 10,
         "n_last": 1 if r < 70 else 0}
        for m in range(300) for r in range(100)
    ]  # fmt: skip
    g = last_grid(rows, {"c": {"n_ranks": 100}}, {}, [])
    assert len({x["rank"] for x in g}) == 64
    assert len({x["start_ts"] for x in g}) == 100  # 300 minutes in buckets of 3
    assert {x["minutes"] for x in g} == {3}
    assert all(x["n_instances"] == 30 and x["n_last"] == 3 for x in g)


def test_the_sentence_names_the_rank_and_the_fall(job):
    spec, truth, s = job
    text = inspector_sentence({"inspector": s})
    assert text is not None and len(text.split()) <= MAX_WORDS
    host = truth.ranks[spec.slow_rank]["host"]
    assert text.startswith(f"Over the whole run (Inspector): rank {spec.slow_rank} on host {host}")
    assert "from 00:20 UTC" in text  # START_US is midnight; the rank turns slow at minute 20
    assert "fell from" in text and "at 00:10 UTC" in text  # the NIC degrades at minute 10
    assert inspector_sentence({"inspector": {"present": False}}) is None
    assert inspector_sentence({}) is None
