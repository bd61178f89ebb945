"""NCCL Inspector analysis: the matching rule (table-driven, analysis/sql/inspector_*.sql), the
change points, and the generator's jobs whose slow rank, degraded NIC and ring losses are known."""

from __future__ import annotations

from pathlib import Path

import pytest

from commwall.analysis import db
from commwall.analysis.inspector.changepoints import change_points
from commwall.analysis.inspector.section import inspector_section, size_class_text
from commwall.ingest.store import connect, ingest
from commwall.sample_traces.generate_inspector import US_PER_MIN, JobSpec, write_job

# -- the matching rule, table-driven ----------------------------------------------------------

#: (case, rows (rank, exec_us, kernel_start_us or None, busbw), last_rank, wait_us, method)
CASES = [
    ("shortest execution names the last", [(0, 900, None, 50.0), (1, 500, None, 90.0),
     (2, 800, None, 60.0)], 1, 400, "shortest_execution"),
    ("a tie names nobody", [(0, 500, None, 90.0), (1, 500, None, 89.0), (2, 800, None, 60.0)],
     None, 300, "shortest_execution"),
    ("kernel starts give the arrival order", [(0, 900, 100, 50.0), (1, 500, 500, 90.0),
     (2, 800, 200, 60.0)], 1, 400, "arrival"),
    ("one rank seen names nobody", [(0, 900, None, 50.0)], None, 0, "shortest_execution"),
]  # fmt: skip


@pytest.fixture
def store(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    db.load_modules(con)
    yield con
    con.close()


@pytest.mark.parametrize("case,recs,last,wait_us,method", CASES, ids=[c[0] for c in CASES])
def test_instances_rule(store, case, recs, last, wait_us, method):
    for rank, *_ in recs:
        store.execute(
            "INSERT INTO inspector_comms VALUES (1, 1, 'c', 'DP', ?, 3, 1, 'h', ?, 'v4.3', 0, 0,"
            " 1, 0, 0, false)",
            [rank, 100 + rank],
        )
    for rank, exec_us, k0, bw in recs:
        store.execute(
            "INSERT INTO inspector_colls VALUES (1, 1, 'c', ?, ?, 7, 'allreduce', 'AllReduce',"
            " 'RING', 'SIMPLE', 1024, 10, ?, 1.0, ?, 'kernel_gpu', 5000000000, ?, NULL)",
            [rank, 100 + rank, exec_us * 1000, bw, None if k0 is None else k0 * 1000],
        )
    row = store.execute(
        "SELECT last_rank, wait_ns, method, fabric_busbw_gbs FROM inspector_instances(1, 1000)"
    ).fetchone()
    assert row is not None
    assert (row[0], row[1], row[2]) == (last, wait_us * 1000, method)
    assert row[3] == max(r[3] for r in recs)  # the bus bandwidth of the rank that did not wait


# -- change points ----------------------------------------------------------------------------

CP_CASES = [
    ("flat", [480.0] * 20, []),
    ("one fall", [480.0] * 10 + [210.0] * 10, [(10, 480.0, 210.0)]),
    ("fall then recover", [480.0] * 8 + [210.0] * 6 + [470.0] * 8,
     [(8, 480.0, 210.0), (14, 210.0, 470.0)]),
    ("too small a change", [480.0] * 10 + [450.0] * 10, []),
    ("too short a dip", [480.0] * 10 + [210.0] * 2 + [480.0] * 10, []),
]  # fmt: skip


@pytest.mark.parametrize("case,y,want", CP_CASES, ids=[c[0] for c in CP_CASES])
def test_change_points(case, y, want):
    got = [(c.at, c.before, c.after) for c in change_points(y, min_seg=3, min_rel=0.2)]
    assert got == want


def test_size_class_text():
    assert size_class_text(30) == "1–2 GiB"  # 2**30 bytes
    assert size_class_text(27) == "128–256 MiB"
    assert size_class_text(0) == "1–2 B"


# -- generated jobs with known truth ----------------------------------------------------------


def _ingest(tmp_path: Path, spec: JobSpec):
    truth = write_job(tmp_path / "job", spec)
    con = connect(tmp_path / "job.duckdb")
    summary = ingest(con, "job", [tmp_path / "job" / f for f in truth.files])
    assert summary.committed and not summary.failed
    db.load_modules(con)
    return con, truth


@pytest.mark.parametrize("verbose", [True, False])
def test_slow_rank_nic_and_losses_are_found(tmp_path, verbose):
    spec = JobSpec(hosts=4, gpus=2, minutes=40, slow_rank=3, slow_from_min=20.0,
                   nic_host=2, nic_from_min=10.0, verbose=verbose, ring_size=8, stall_rank=5,
                   stall_minutes=(30.0, 34.0))  # fmt: skip
    con, truth = _ingest(tmp_path, spec)
    s = inspector_section(con, 1)
    assert s["present"]
    start = spec.start_us * 1000
    dp = next(cid for cid, c in truth.comms.items() if c["name"] == "DP")
    # the straggler: the generator's slow rank, on its host, from the minute it turned slow
    st = {x["comm_id"]: x for x in s["stragglers"]}
    assert st[dp]["global_rank"] == spec.slow_rank
    assert st[dp]["host"] == truth.ranks[spec.slow_rank]["host"]
    assert st[dp]["start_ts"] == start + int(spec.slow_from_min) * US_PER_MIN * 1000
    # without kernel times a record's time is its dump's (10 s later here): the instance just
    # before the turn can land in the first slow minute
    assert st[dp]["share"] == 1.0 if verbose else st[dp]["share"] >= 0.95
    # before it turned slow it was last about 1 time in 8 (the jitter's fair share)
    assert st[dp]["share_before"] < 0.3
    assert st[dp]["method"] == ("arrival" if verbose else "shortest_execution")
    # the NIC: every communicator spanning its host fell at the minute it degraded, no other
    fell = {b["comm_id"]: b["changes"] for b in s["bandwidth"] if b["changes"]}
    assert set(fell) == set(truth.degraded_comms)
    for changes in fell.values():
        (ch,) = changes
        assert ch["ts"] == start + int(spec.nic_from_min) * US_PER_MIN * 1000
        assert ch["relative"] == pytest.approx(spec.nic_factor - 1, abs=0.05)
    assert [h["host"] for h in s["slow_hosts"]] == [f"h{spec.nic_host:02d}"]
    # losses: what the generator's overflowing rings dropped
    want = sum(n for per in truth.dropped.values() for n in per.values())
    assert want > 0 and s["losses"]["coll_dropped"] == want
    con.close()


def test_last_rank_of_every_instance_matches_the_truth(tmp_path):
    spec = JobSpec(hosts=2, gpus=2, minutes=10, verbose=True, slow_from_min=5.0)
    con, truth = _ingest(tmp_path, spec)
    got = con.execute(
        "SELECT comm_id, coll_sn, last_rank FROM inspector_instances(1, 0)"
    ).fetchall()
    named = 0
    for cid, sn, last in got:
        if last is not None:  # None: two kernels started in the same microsecond (a tie)
            assert truth.comms[cid]["members"][last] == truth.last[cid][sn]
            named += 1
    assert len(got) == sum(len(v) for v in truth.last.values())
    assert named >= 0.98 * len(got)
    con.close()


def test_no_inspector_output_says_why(store):
    s = inspector_section(store, 1)
    assert not s["present"] and "NCCL_INSPECTOR_ENABLE=1" in s["reason"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_job_without_a_slow_rank_has_no_straggler(tmp_path, seed):
    """Jitter alone (the generator's truth: no rank turns slow within the job, no NIC degrades)
    names no straggler and no bandwidth fall, whatever period the search tries."""
    spec = JobSpec(hosts=4, gpus=2, minutes=20, slow_from_min=1e9, nic_from_min=1e9, seed=seed)
    con, _ = _ingest(tmp_path, spec)
    s = inspector_section(con, 1)
    assert s["present"] and s["stragglers"] == []
    assert not [ch for b in s["bandwidth"] for ch in b["changes"] if ch["relative"] <= -0.2]
    con.close()
