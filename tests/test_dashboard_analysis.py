"""Analysis functions behind the dashboard: checklist, verdict, compare, outliers, timeline."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from conftest import DLRM, SAMPLES, memory_store
from dashboard_support import ingest_dir, report_of
from nccl_log_gen import Job, make_log

from commwall.analysis import db
from commwall.analysis.collectives import instances as collectives
from commwall.analysis.collectives.outliers import flag_outliers, robust_z
from commwall.analysis.compare.pair import compare
from commwall.analysis.nccl.section import empty_section
from commwall.analysis.report import checklist
from commwall.analysis.report.build import SECTIONS, build_report
from commwall.analysis.steps import summary, timeline
from commwall.analysis.steps.verdict import EXPOSED_SHARE_LIMIT, verdict


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("analysis") / "s.duckdb"
    ingest_dir(path, "dlrm", DLRM)
    ingest_dir(path, "gloo", SAMPLES / "gloo_4rank_compute")
    return path


@pytest.fixture(scope="module")
def dlrm(store):
    return report_of(store, "dlrm")


@pytest.fixture
def con(store):
    c = db.load_modules(duckdb.connect(str(store)))
    yield c
    c.close()


def status(items, key):
    return next(i for i in items if i["key"] == key)["status"]


# -- checklist ---------------------------------------------------------------------------------


def test_checklist_is_a_report_section_with_every_item(dlrm):
    items = dlrm["checklist"]
    assert sorted(i["key"] for i in items) == sorted(f.__name__ for f in checklist.ITEMS)
    order = [checklist.STATUS_ORDER.index(i["status"]) for i in items]
    assert order == sorted(order)  # attention first, then ok, then not observable
    for i in items:
        assert i["status"] in (checklist.ATTENTION, checklist.OK, checklist.NOT_OBSERVABLE)
        assert i["evidence"] and i["title"] and i["page"]
    assert items == checklist.evaluate(dlrm)


def test_keep_going_report_equals_build_report(con, dlrm):
    got = build_report(con, "dlrm", keep_going=True)
    assert got == dlrm and list(got) == list(dlrm)


def test_a_failing_section_is_recorded_not_raised(con, dlrm, monkeypatch):
    def broken(con, rid):
        raise ValueError("boom")

    monkeypatch.setitem(SECTIONS, "stragglers", broken)
    got = build_report(con, "dlrm", keep_going=True)
    assert got["stragglers"] is None
    assert got["analysis_errors"] == {"stragglers": "ValueError: boom"}
    assert got["summary"] == dlrm["summary"]
    assert (
        next(i for i in got["checklist"] if i["key"] == "stragglers")["status"] == "not_observable"
    )


def test_checklist_on_dlrm_decides_from_the_data(dlrm):
    items = dlrm["checklist"]
    # 39.7 % of the step is exposed communication; rank 7 causes the most waiting, but one step
    # is not enough to call it a persistent straggler, and its GPU work is the median rank's, so
    # the thermal-throttling item is not raised
    assert status(items, "exposed_comm") == checklist.ATTENTION
    assert "39.7%" in next(i for i in items if i["key"] == "exposed_comm")["evidence"]
    assert status(items, "stragglers") == checklist.OK
    assert "rank 7" in next(i for i in items if i["key"] == "stragglers")["evidence"]
    # no NCCL log, no link peak: the NCCL and busbw items cannot be decided
    for key in ("socket_transport", "gdr", "nccl_versions", "nccl_warnings", "busbw"):
        assert status(items, key) == checklist.NOT_OBSERVABLE
    for key in ("nic_firmware", "mtu", "fat_tree", "log_rotation", "hbm_errors"):
        assert status(items, key) == checklist.NOT_OBSERVABLE


def test_busbw_against_the_link_peak(dlrm):
    best = max(o["busbw_GBps_median"] for o in dlrm["collectives"]["ops"])
    assert status(checklist.evaluate(dlrm, best * 1.5), "busbw") == checklist.OK
    low = checklist.evaluate(dlrm, best * 3)
    assert status(low, "busbw") == checklist.ATTENTION
    assert f"{best:.1f} GB/s" in next(i for i in low if i["key"] == "busbw")["evidence"]


def test_exposed_comm_threshold():
    def share(x):
        return status(checklist.evaluate({"summary": {"exposed_comm_share": x}}), "exposed_comm")

    assert share(EXPOSED_SHARE_LIMIT / 2) == checklist.OK
    assert share(EXPOSED_SHARE_LIMIT * 2) == checklist.ATTENTION
    assert status(checklist.evaluate({}), "exposed_comm") == checklist.NOT_OBSERVABLE


HUNG = {"present": True, "verdict": "Hang at seq 6.", "groups": [{"cause": "missing"}]}
TIMED_OUT = {"present": True, "findings": [],
             "timeouts": {"count": 2, "collectives": [92], "first": {"text": "Watchdog"}}}  # fmt: skip


@pytest.mark.parametrize(
    "summary,extra,expected,action",
    [
        # the exposed part mostly transfer: overlap, accumulation or fewer bytes
        ({"exposed_comm_ms": 40, "exposed_wait_ms": 10}, {}, checklist.ATTENTION, "Model page"),
        # waiting for late ranks is half of it or more: not a bandwidth or overlap problem
        ({"exposed_comm_ms": 40, "exposed_wait_ms": 20}, {}, checklist.ATTENTION, "Stragglers"),
        ({"exposed_comm_ms": 40, "exposed_wait_ms": 39}, {}, checklist.ATTENTION, "Stragglers"),
        # the job hung (Flight Recorder) or NCCL's watchdog stopped it: the figures are the hang
        ({"exposed_comm_ms": 40}, {"hang": HUNG}, checklist.NOT_OBSERVABLE, "Hang page"),
        ({"exposed_comm_ms": 40}, {"nccl": TIMED_OUT}, checklist.NOT_OBSERVABLE, "NCCL page"),
        # ... unless the traces are known to end before the hung call: their figures stand
        (
            {"exposed_comm_ms": 40},
            {"hang": {**HUNG, "in_traces": False}},
            checklist.ATTENTION,
            "Model page",
        ),
    ],
)
def test_exposed_comm_points_at_the_remedy(summary, extra, expected, action):
    report = {"summary": {"exposed_comm_share": 0.4, **summary}, **extra}
    item = next(i for i in checklist.evaluate(report) if i["key"] == "exposed_comm")
    assert item["status"] == expected and action in item["action"]


def nccl(**changes):
    """An nccl section of a run with logs (analysis.nccl.section's shape) with `changes` applied."""
    return {**empty_section(), "present": True, "hint": None, "files": 1, **changes}


TCP = {"detected": True, "reason": "ib_disabled", "explanation": "NCCL_IB_DISABLE=1 forced TCP",
       "evidence": {"file": "/x/nccl.0.log", "line": 12, "text": "via NET/Socket/0"}}  # fmt: skip
ONE_HOST = {"value": False, "basis": "one_host", "network": None, "network_basis": None}
NODES = {"value": True, "basis": "hosts", "network": None, "network_basis": None}
CAPABILITY = {"basis": "capability", "file": "/x/nccl.0.log", "line": 43, "text": "GDR Disabled"}
FIRST = {
    "file": "/x/nccl.3.log",
    "line": 7,
    "rank": 3,
    "kind": "w",
    "text": "NET/IB : Got completion",
}


@pytest.mark.parametrize(
    "section,key,expected",
    [
        (nccl(networks=[{"network": "IB"}]), "socket_transport", checklist.OK),
        (nccl(inter_node=ONE_HOST), "socket_transport", checklist.OK),  # single node
        (nccl(inter_node=NODES), "socket_transport", checklist.NOT_OBSERVABLE),  # net unnamed
        (nccl(inter_node={**NODES, "network": "IB"}), "socket_transport", checklist.OK),
        (nccl(), "socket_transport", checklist.NOT_OBSERVABLE),  # nodes not known either
        (nccl(tcp_fallback=TCP), "socket_transport", checklist.ATTENTION),
        (nccl(gdr=True), "gdr", checklist.OK),
        (nccl(gdr=False), "gdr", checklist.ATTENTION),  # whether the job crosses nodes unknown
        (nccl(gdr=False, inter_node=NODES), "gdr", checklist.ATTENTION),
        (nccl(gdr=False, inter_node=ONE_HOST, gdr_evidence=CAPABILITY), "gdr", checklist.OK),
        (  # one host, but its GPUs talk through the NIC
            nccl(
                gdr=False, inter_node=ONE_HOST, gdr_evidence={**CAPABILITY, "basis": "connections"}
            ),
            "gdr",
            checklist.ATTENTION,
        ),
        (nccl(), "gdr", checklist.NOT_OBSERVABLE),
        (nccl(versions=["2.21.5"]), "nccl_versions", checklist.OK),
        (  # one of two processes printed its version
            nccl(
                versions=["2.21.5"],
                versions_detail=[{"version": "2.21.5", "n_processes": 1}],
                ranks={**empty_section()["ranks"], "processes": 2},
            ),
            "nccl_versions",
            checklist.NOT_OBSERVABLE,
        ),
        (
            nccl(versions=["2.21.5", "2.18.1"], version_mismatch=True),
            "nccl_versions",
            checklist.ATTENTION,
        ),
        (nccl(), "nccl_warnings", checklist.OK),
        (nccl(warnings={"count": 2, "first": FIRST}), "nccl_warnings", checklist.ATTENTION),
        (
            nccl(timeouts={"count": 1, "first": None, "collectives": []}),
            "nccl_warnings",
            checklist.ATTENTION,
        ),
        (empty_section(), "gdr", checklist.NOT_OBSERVABLE),  # no logs at all
    ],
)
def test_nccl_items(section, key, expected):
    assert status(checklist.evaluate({"nccl": section}), key) == expected


def test_nccl_evidence_names_the_file_and_line():
    items = checklist.evaluate(
        {"nccl": nccl(tcp_fallback=TCP, warnings={"count": 2, "first": FIRST})}
    )
    by_key = {i["key"]: i["evidence"] for i in items}
    assert "nccl.0.log:12: via NET/Socket/0" in by_key["socket_transport"]
    assert "2 warning(s)" in by_key["nccl_warnings"] and "nccl.3.log:7" in by_key["nccl_warnings"]


def test_items_never_fail_on_empty_or_odd_sections():
    odd = {"summary": {}, "stragglers": None, "collectives": [], "nccl": {"present": True}}
    for report in ({}, odd):
        assert len(checklist.evaluate(report)) == len(checklist.ITEMS)


def test_a_straggler_without_operator_time_is_not_cleared_of_a_slow_device():
    # flagged, but no operator time to compare (no steps marked): nothing says whether its
    # device is slow, so the thermal item cannot be "ok"
    ranks = [{"rank": 3, "host": "h1", "flagged": True, "kind": "unknown", "compute_ratio": None}]
    report = {"stragglers": {"ranks": ranks, "flagged": [3], "verdict": "straggler: rank 3"}}
    (item,) = [i for i in checklist.evaluate(report) if i["key"] == "stragglers"]
    assert item["status"] == checklist.NOT_OBSERVABLE
    assert "cannot be told" in item["evidence"]


# -- verdict, compare, outliers ----------------------------------------------------------------


def test_verdict_of_the_measured_summary(dlrm):
    v = verdict(dlrm["summary"])
    assert v["verdict"] == "communication wall"
    assert "39.7%" in v["reason"]
    assert verdict({"exposed_comm_share": 0.01, "gamma": 0.5})["verdict"] == "compute-bound"
    assert verdict({}) is None and verdict(None) is None


def test_compare_deltas(dlrm):
    after = {"summary": {**dlrm["summary"], "step_ms": dlrm["summary"]["step_ms"] / 2}}
    rows = {r["metric"]: r for r in compare(dlrm, after)}
    step = rows["step_ms"]
    assert step["before"] == dlrm["summary"]["step_ms"]
    assert step["delta"] == pytest.approx(-dlrm["summary"]["step_ms"] / 2)
    assert step["change"] == pytest.approx(-0.5)
    assert rows["eta"]["delta"] == 0
    # a run without a summary: the after value is shown, with no delta or change to compute
    missing = {r["metric"]: r for r in compare({}, after)}["step_ms"]
    assert missing["before"] is None and missing["after"] == after["summary"]["step_ms"]
    assert missing["delta"] is None and missing["change"] is None


def test_robust_outliers():
    values = [1.0, 1.1, 0.9, 1.0, 1.05, 9.0, None]
    assert flag_outliers(values) == [False] * 5 + [True, False]
    assert robust_z([1.0, 1.0, 1.0, 5.0]) == [None] * 4  # MAD 0: no spread to judge
    assert robust_z([1.0, 2.0]) == [None, None]


# -- timeline and waits ------------------------------------------------------------------------


def test_tracks_cover_what_the_report_measures(con, dlrm):
    rid = db.run_id(con, "dlrm")
    t = timeline.tracks(con, rid, 10, list(range(8)))
    assert set(t["kind"]) == {"compute", "comm", "memory"}
    assert (t["end_ms"] > t["start_ms"]).all() and t["start_ms"].min() >= -0.01
    covered = (t["end_ms"] - t["start_ms"]).groupby([t["rank"], t["kind"]]).sum()
    for s in dlrm["steps"]:
        assert covered[(s["rank"], "compute")] == pytest.approx(s["tau_comp_ms"], abs=1e-6)
        assert covered[(s["rank"], "comm")] == pytest.approx(s["tau_comm_ms"], abs=1e-6)


def test_each_busy_interval_names_the_activity_covering_most_of_it(con):
    rid = db.run_id(con, "dlrm")
    t = timeline.tracks(con, rid, 10, [3])
    # independently: every rank-3 activity of the run, the one with the longest overlap with
    # each interval, on the aligned clock (raw time minus the rank's offset from rank_clock)
    shift = con.execute("SELECT offset_ns FROM rank_clock(?) WHERE rank = 3", [rid]).fetchone()
    acts = con.execute(
        "SELECT kind, ts, dur, name FROM activities WHERE run_id = ? AND rank = 3 "
        "AND kind IN ('compute', 'comm', 'memory')",
        [rid],
    ).df()
    origin = con.execute("SELECT origin_ns FROM step_origin(?, 10)", [rid]).fetchone()[0]
    # in ms from the step's origin, integer ns subtracted first (epoch ns do not fit a double)
    start = (acts["ts"] - (shift[0] if shift else 0) - origin) / 1e6
    acts = acts.assign(start=start, end=start + acts["dur"] / 1e6)
    for row in t.itertuples():
        lo, hi = row.start_ms, row.end_ms
        same = acts[(acts["kind"] == row.kind) & (acts["start"] < hi) & (acts["end"] > lo)]
        overlap = same["end"].clip(upper=hi) - same["start"].clip(lower=lo)
        assert row.n_activities == len(same)
        assert row.top_ms == pytest.approx(overlap.max(), abs=1e-6)
        assert row.top_name in set(same.loc[overlap >= overlap.max() - 1e-6, "name"])


def test_collectives_are_linked_across_ranks(con):
    rid = db.run_id(con, "dlrm")
    c = timeline.collectives(con, rid, 10, [0, 7])
    assert len(c) == 16  # 5 all-to-all + 3 all-reduce per rank
    per_instance = c.groupby("ik")["rank"].apply(sorted)
    assert all(r == [0, 7] for r in per_instance)
    # and numbered as `commwall collectives` numbers them: per process group and op
    inst = collectives.collective_instances(con, rid)
    want = {(r.pg_name, r.op, r.instance): r.ik for r in inst.itertuples()}
    assert {(r.pg_name, r.op, r.instance): r.ik for r in c.itertuples()}.items() <= want.items()
    # rank 7 is the straggler: it waits least
    waits = c.groupby("rank")["wait_ms"].sum()
    assert waits[7] < waits[0]


@pytest.mark.parametrize(("run", "step", "ranks"), [("dlrm", 10, [0, 7]), ("gloo", 3, [1, 2])])
def test_a_view_in_its_session_equals_its_parts_alone(con, run, step, ranks):
    """timeline.view caches the matching and the clock fit for its two queries: the same rows
    as each computed on its own, and nothing left cached after it."""
    rid = db.run_id(con, run)
    tracks, calls = timeline.view(con, rid, step, ranks)
    pd.testing.assert_frame_equal(tracks, timeline.tracks(con, rid, step, ranks))
    pd.testing.assert_frame_equal(calls, timeline.collectives(con, rid, step, ranks))
    assert len(calls) > 0 and set(tracks["rank"]) == set(ranks)
    left = "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_session_%'"
    assert con.execute(left).fetchone() == (0,)


@pytest.mark.parametrize(
    ("size", "labels", "a", "b"),
    [
        # ranks 0..4 with a = rank + 1 and b = 1 except rank 3 (b = 0) and 4 (b = 2)
        (1, ["0", "1", "2", "3", "4"], [1, 2, 3, 4, 5], [1, 1, 1, 0, 2]),
        (2, ["0–1", "2–3", "4"], [1.5, 3.5, 5], [1, 0.5, 2]),  # the last block: one rank
        (4, ["0–3", "4"], [2.5, 5], [0.75, 2]),
        (8, ["0–4"], [3], [1]),
    ],
)
def test_parts_per_rank_block_are_the_means_of_consecutive_ranks(size, labels, a, b):
    ranks = pd.DataFrame({"rank": [3, 0, 1, 2, 4], "a": [4.0, 1, 2, 3, 5], "b": [0.0, 1, 1, 1, 2]})
    got = summary.parts_per_rank_block(ranks, ["a", "b"], size)
    assert list(got["rank"]) == labels
    assert list(got["a"]) == pytest.approx(a) and list(got["b"]) == pytest.approx(b)


def test_parts_per_step_are_the_means_over_ranks_in_step_order():
    steps = pd.DataFrame({"rank": [0, 1, 0, 1], "step": [10, 10, 9, 9], "a": [1.0, 3, 2, 6]})
    got = summary.parts_per_step(steps, ["a"])
    assert list(got["step"]) == ["9", "10"] and list(got["a"]) == [4.0, 2.0]


def test_rank_step_wait_sums_collective_waits(con, dlrm):
    rid = db.run_id(con, "dlrm")
    w = con.execute("SELECT * FROM rank_step_wait(?) ORDER BY rank", [rid]).df()
    assert list(w["rank"]) == list(range(8)) and set(w["step"]) == {10}
    by_rank = {r["rank"]: r["wait_ms"] for r in dlrm["stragglers"]["ranks"]}
    assert dict(zip(w["rank"], w["wait_ms"], strict=True)) == pytest.approx(by_rank)


def test_kernel_algorithm_hints(con):
    rows = con.execute(
        "SELECT op, algo, protocol, calls, ranks FROM collective_algorithms(?)",
        [db.run_id(con, "dlrm")],
    ).fetchall()
    assert rows == [("allreduce", "RING", "LL", 24, 8), ("alltoall", "RING", "SIMPLE", 40, 8)]
    gloo = con.execute(
        "SELECT algo, protocol FROM collective_algorithms(?)", [db.run_id(con, "gloo")]
    ).fetchall()
    assert gloo == [(None, None)]


def test_nccl_algorithm_choices_from_tuning_lines(tmp_path):
    log = make_log(Job(version="2.24.3", nodes=2, gpus=4, tuning=True, colls=6))
    log.write(tmp_path / "nccl.log")
    path = tmp_path / "s.duckdb"
    ingest_dir(path, "t", tmp_path / "nccl.log")
    c = db.load_modules(duckdb.connect(str(path)))
    try:
        got = c.execute(
            "SELECT func, algo, proto, choices, min_bytes FROM nccl_algorithm_choices(1)"
        ).fetchall()
    finally:
        c.close()
    want = [t for t in log.truth.tuning if t["kind"] == "choice"]
    assert got == [(t["func"], t["algo"], t["proto"], 1, t["bytes"]) for t in want]


# A run without step annotations: two ranks' activities (rank, ts, dur, kind) in ns. Rank 0:
# compute [0, 100) and [50, 150) (overlapping: one busy interval [0, 150)), comm [300, 350);
# rank 1: memory [20, 50), compute [380, 420). Span [0, 420), four windows of 105 ns.
UNSTEPPED = [(0, 0, 100, "compute"), (0, 50, 100, "compute"), (0, 300, 50, "comm"),
             (1, 20, 30, "memory"), (1, 380, 40, "compute")]  # fmt: skip
WINDOW_TRACKS = [  # window → (rank, kind, start, end) in ns, clipped to the window
    ((0, 105), [(0, "compute", 0, 105), (1, "memory", 20, 50)]),
    ((105, 210), [(0, "compute", 105, 150)]),
    ((210, 315), [(0, "comm", 300, 315)]),
    ((315, 420), [(0, "comm", 315, 350), (1, "compute", 380, 420)]),
]


@pytest.fixture
def unstepped():
    con = memory_store()
    con.execute("INSERT INTO runs (run_id, name) VALUES (1, 'no steps')")
    con.executemany(
        "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind) VALUES (1, ?, 0, ?, ?, ?)",
        [list(r) for r in UNSTEPPED],
    )
    return con


def test_a_run_without_steps_is_drawn_in_windows_of_its_span(unstepped):
    assert timeline.windows(unstepped, 1, 4) == [w for w, _ in WINDOW_TRACKS]
    for (t0, t1), want in WINDOW_TRACKS:
        got = timeline.window_tracks(unstepped, 1, t0, t1, [0, 1])
        rows = zip(got["rank"], got["kind"], got["start_ms"], got["end_ms"], strict=True)
        assert [(r, k, round(s * 1e6) + t0, round(e * 1e6) + t0) for r, k, s, e in rows] == want
    assert timeline.window_tracks(unstepped, 1, 0, 105, [1])["rank"].tolist() == [1]
    assert timeline.windows(memory_store(), 1, 4) == []  # no activity: nothing to draw


def _rep(steps: list[int], ranks: int, flagged: list[int]) -> dict:
    return {
        "steps": [{"step": s} for s in steps],
        "ranks": [{"rank": r} for r in range(ranks)],
        "stragglers": {"flagged": flagged},
    }


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        (_rep([], 4, []), None),  # no steps: the timeline draws windows instead
        (_rep([7, 5, 6], 4, []), (5, [0, 1, 2, 3])),  # the first step; all of 4 ranks
        (_rep([1], 16, []), (1, [0, 1, 2, 3, 4, 5, 6, 7])),  # the lowest 8 of 16
        (_rep([1], 16, [13]), (1, [0, 1, 2, 3, 4, 5, 6, 13])),  # the straggler, then 7 more
        (_rep([1], 16, list(range(6, 16))), (1, list(range(6, 14)))),  # 10 flagged: 8 of them
    ],
)
def test_timeline_opens_on_the_first_step_with_the_stragglers(report, expected):
    assert timeline.default_view(report) == expected


def test_timeline_prepares_the_first_steps_with_the_opening_ranks():
    many = _rep(list(range(40, 0, -1)), 16, [13])
    views = timeline.prepared_views(many)
    assert [s for s, _ in views] == list(range(1, timeline.PREPARED_STEPS + 1))
    assert all(r == [0, 1, 2, 3, 4, 5, 6, 13] for _, r in views)
    assert timeline.prepared_views(_rep([], 4, [])) == []
