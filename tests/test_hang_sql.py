"""Table-driven tests of analysis/sql/hang*.sql on tiny inline Flight Recorder rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from commwall.analysis.hangs.section import hang_section
from commwall.ingest.formats.flight_recorder import SCHEMAS
from tests.conftest import memory_store

RID = 1
_STORE = []


@pytest.fixture
def con():
    """A store (made once per module, macros loaded) holding one empty run; every test's rows
    are rolled back after it."""
    if not _STORE:
        _STORE.append(memory_store())
    c = _STORE[0]
    c.execute("BEGIN TRANSACTION; INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    yield c
    c.execute("ROLLBACK")


def put(con, table: str, rows: list[dict], file_id: int | None = None) -> None:
    """Insert `rows` (dicts with the parser's columns; run_id 1; file_id 10 + rank unless
    given)."""
    data = pa.Table.from_pylist(rows, schema=SCHEMAS[table])
    fid = "10 + rank" if file_id is None else str(file_id)
    con.register("_rows", data)
    con.execute(
        f"INSERT INTO {table} BY NAME SELECT {RID} AS run_id, {fid} AS file_id, * FROM _rows"
    )
    con.unregister("_rows")


def entry(rank, seq, op="all_reduce", n=8, dtype="Float", state="scheduled", pg="0", **kw):
    sizes, out = [[n]], [[4, n]] if op == "all_gather" else [[n]]
    return {"rank": rank, "record_id": seq, "pg_name": pg, "pg_desc": "default_pg",
            "collective_seq_id": seq, "is_p2p": False, "profiling_name": f"nccl:{op}",
            "op": op.replace("_", "").replace("reducescatter", "reduce_scatter"),
            "input_sizes": sizes, "output_sizes": out, "input_dtypes": [dtype],
            "output_dtypes": [dtype], "state": state, **kw}  # fmt: skip


def job(con, calls: dict[int, list[dict]], members=(0, 1, 2, 3), cfg_name="0"):
    """Dumps of `calls` (rank → entries): one fr_dumps and one fr_groups row per rank."""
    put(con, "fr_dumps", [{"rank": r, "form": "json", "version": "2.10"} for r in calls])
    put(con, "fr_groups", [{"rank": r, "pg_name": cfg_name, "ranks": list(members)}
                           for r in calls])  # fmt: skip
    put(con, "fr_entries", [e for es in calls.values() for e in es])


def q(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


FIND = "SELECT seq, kind, op_name, culprit_ranks, other_ranks FROM hang_findings(1)"


def test_rank_that_never_entered(con):
    calls = {r: [entry(r, s) for s in (1, 2)] + [entry(r, 3, "all_gather")] for r in (0, 2, 3)}
    calls[1] = [entry(1, s) for s in (1, 2)]
    job(con, calls)
    assert q(con, FIND) == [(3, "missing", "all_gather", [1], [0, 2, 3])]
    g = q(con, "SELECT members, dumped, missing_dumps, last_common_seq, max_seq, state_tracked,"
               " last_completed_seq FROM hang_groups(1)")  # fmt: skip
    assert g == [([0, 1, 2, 3], [0, 1, 2, 3], [], 2, 3, False, None)]
    prog = q(con, "SELECT rank, last_seq, last_op FROM hang_rank_progress(1) WHERE rank = 1")
    assert prog == [(1, 2, "all_reduce")]


def test_two_ranks_missing_and_one_dump_missing(con):
    calls = {0: [entry(0, 1), entry(0, 2)], 1: [entry(1, 1)], 2: [entry(2, 1)]}
    job(con, calls)
    assert q(con, FIND) == [(2, "missing", "all_reduce", [1, 2], [0])]
    assert q(con, "SELECT missing_dumps, first_unentered_seq FROM hang_groups(1)") == [([3], 2)]


@pytest.mark.parametrize(
    ("odd", "kind", "culprit_values", "expected"),
    [
        ({"op": "all_gather"}, "op", ["nccl:all_gather"], "nccl:all_reduce"),
        ({"dtype": "BFloat16"}, "dtype", ["BFloat16"], "Float"),
        ({"n": 16}, "size", ["[[16]] -> [[16]]"], "[[8]] -> [[8]]"),
    ],
)
def test_one_odd_rank_is_the_culprit(con, odd, kind, culprit_values, expected):
    calls = {r: [entry(r, 1), entry(r, 2, **(odd if r == 2 else {}))] for r in range(4)}
    job(con, calls)
    got = q(con, "SELECT seq, kind, culprit_ranks, other_ranks, culprit_values, expected,"
                 " ambiguous FROM hang_findings(1)")  # fmt: skip
    assert got == [(2, kind, [2], [0, 1, 3], culprit_values, expected, False)]


def test_op_mismatch_is_not_also_reported_as_size_or_dtype(con):
    calls = {r: [entry(r, 1)] for r in range(4)}
    calls[3] = [entry(3, 1, "all_gather", n=4, dtype="Half")]
    job(con, calls)
    assert [r[1] for r in q(con, FIND)] == ["op"]


def test_tie_is_ambiguous_and_sizes_of_alltoall_are_not_compared(con):
    calls = {r: [entry(r, 1, n=8 if r < 2 else 16)] for r in range(4)}
    calls.update({r: calls[r] + [entry(r, 2, "all_to_all", n=r + 1)] for r in range(4)})
    job(con, calls)
    got = q(con, "SELECT seq, culprit_ranks, other_ranks, ambiguous FROM hang_findings(1)")
    assert got == [(1, [2, 3], [0, 1], True)]


def test_stuck_rank_with_nccl_states(con):
    done = {"state": "completed"}
    calls = {r: [entry(r, 1, **done), entry(r, 2, **done)] for r in range(4)}
    calls[1][1] = entry(1, 2, state="started")
    job(con, calls)
    assert q(con, FIND) == [(2, "stuck", "all_reduce", [1], [0, 2, 3])]
    assert q(con, "SELECT state_tracked, last_completed_seq FROM hang_groups(1)") == [(True, 1)]


def test_every_rank_inside_one_collective(con):
    calls = {r: [entry(r, 1, state="completed"), entry(r, 2, state="started")] for r in range(2)}
    job(con, calls, members=(0, 1))
    assert q(con, FIND) == [(2, "stuck", "all_reduce", [0, 1], [])]


def test_nothing_wrong(con):
    job(con, {r: [entry(r, s) for s in (1, 2, 3)] for r in range(4)})
    assert q(con, FIND) == []
    got = q(con, "SELECT last_common_seq, max_seq, first_unentered_seq FROM hang_groups(1)")
    assert got == [(3, 3, None)]


def test_unnamed_group_config_as_gloo_writes_it(con):
    # gloo in torch 2.13 keys pg_config by '' while entries name the group '0'
    calls = {r: [entry(r, 1)] for r in (0, 1)}
    job(con, calls, members=(0, 1, 2), cfg_name="")
    assert q(con, "SELECT members, missing_dumps FROM hang_groups(1)") == [([0, 1, 2], [2])]


def test_groups_are_judged_apart_and_p2p_is_left_out(con):
    calls = {
        0: [entry(0, 1), entry(0, 1, pg="1"), entry(0, 2, pg="1")],
        1: [entry(1, 1), entry(1, 1, pg="1"), entry(1, 9, "send", is_p2p=True)],
    }
    job(con, calls, members=(0, 1))
    assert q(con, "SELECT pg_name, seq, kind, culprit_ranks FROM hang_findings(1)") == [
        ("1", 2, "missing", [1])
    ]


def test_a_later_dump_of_a_rank_replaces_the_earlier(con):
    job(con, {0: [entry(0, 1)], 1: [entry(1, 1)]}, members=(0, 1))
    put(con, "fr_dumps", [{"rank": 1, "form": "json", "version": "2.10"}], file_id=99)
    put(con, "fr_entries", [entry(1, 1), entry(1, 2)], file_id=99)
    assert q(con, FIND) == [(2, "missing", "all_reduce", [0], [1])]


def test_timeline_joins_trace_collectives_by_seq_or_order(con):
    job(con, {0: [entry(0, s) for s in (1, 2, 3)]}, members=(0,))
    con.execute(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, op, pg_name, seq) VALUES "
        "(1, 5, 0, 300, 1, 'allreduce', NULL, NULL), (1, 5, 0, 100, 1, 'allreduce', NULL, NULL),"
        "(1, 5, 0, 200, 1, 'allgather', NULL, NULL)"
    )
    got = q(con, "SELECT seq, trace_ts, join_key FROM hang_timeline(1, 2)")
    # the 2nd trace collective by start is an allgather: no match for seq 2; seq 3 is 300
    assert got == [(2, None, None), (3, 300, "order")]
    con.execute("INSERT INTO collectives (run_id, file_id, rank, ts, dur, op, pg_name, seq) "
                "VALUES (1, 5, 0, 250, 1, 'allreduce', '0', 2)")  # fmt: skip
    assert q(con, "SELECT seq, trace_ts, join_key FROM hang_timeline(1, 2)")[0] == (2, 250, "seq")


def test_timeline_does_not_number_unnamed_trace_groups_together(con):
    """Rank 0 is in groups '0' and '1', each counting seq from 1; its trace names no group, so
    its 2nd all-reduce by start (ts 200, group '1''s seq 1 in truth) is no evidence for group
    '0''s seq 2: no entry is matched. A trace that names the groups is matched per group."""
    job(con, {0: [entry(0, 1), entry(0, 2), entry(0, 1, pg="1")]}, members=(0,))
    con.execute(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, op, pg_name, seq) VALUES "
        "(1, 5, 0, 100, 1, 'allreduce', NULL, NULL), (1, 5, 0, 200, 1, 'allreduce', NULL, NULL),"
        "(1, 5, 0, 300, 1, 'allreduce', NULL, NULL)"
    )
    got = q(con, "SELECT pg_name, seq, trace_ts FROM hang_timeline(1, 5)")
    assert got == [("0", 1, None), ("0", 2, None), ("1", 1, None)]
    con.execute("UPDATE collectives SET pg_name = CASE ts WHEN 200 THEN '1' ELSE '0' END")
    got = q(con, "SELECT pg_name, seq, trace_ts, join_key FROM hang_timeline(1, 5)")
    assert got == [("0", 1, 100, "order"), ("0", 2, 300, "order"), ("1", 1, 200, "order")]


T0 = 1_795_460_941_000_000_000  # ns since the epoch, as Flight Recorder and Kineto write them
MIN = 60_000_000_000


def _traced_job(con, trace_end: int | None, time_base: str = "base_ns") -> None:
    """Rank 1 never enters seq 2 (created at T0 on rank 0); the run's traces end at
    `trace_end` (None: no traces), on ranks of `time_base`."""
    job(con, {0: [entry(0, 1, time_created_ns=T0 - MIN), entry(0, 2, time_created_ns=T0)],
              1: [entry(1, 1, time_created_ns=T0 - MIN)]}, members=(0, 1))  # fmt: skip
    if trace_end is not None:
        con.execute(
            "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind) VALUES "
            f"(1, 0, 5, {trace_end - 10}, 10, 'comm')"
        )
        con.execute(f"INSERT INTO ranks (run_id, rank, time_base) VALUES (1, 0, '{time_base}')")


@pytest.mark.parametrize(
    "trace_end,time_base,expected",
    [
        (T0 - 5 * MIN, "base_ns", False),  # an earlier window of the job
        (T0 + 3 * MIN, "base_ns", True),  # recorded into the hang (until the timeout)
        (T0, "epoch_us", True),  # the boundary: the traces reach the call
        (T0 + 3 * MIN, "session", True),  # Nsight's session clock is absolute too
        (T0 - 5 * MIN, "unknown", None),  # no epoch: the clocks cannot be compared
        (None, None, None),  # no traces
    ],
)
def test_traces_reach_the_hung_call(con, trace_end, time_base, expected):
    _traced_job(con, trace_end, time_base)
    got = q(con, "SELECT pg_name, seq, created_ns, traces_end_ns, in_traces FROM hang_traced(1)")
    assert got == [("0", 2, T0, trace_end, expected)]
    assert hang_section(con, RID)["in_traces"] is expected


@pytest.mark.parametrize(
    "trace_ts,time_base,matched",
    [
        (T0 + 1_000, "base_ns", True),  # the call traced as it was enqueued
        (T0 - 9 * MIN, "base_ns", True),  # clocks of other hosts: minutes apart at most
        (T0 - 11 * MIN, "base_ns", False),  # another window of the job, matched by order only
        (5, "unknown", True),  # relative times: order is all there is
    ],
)
def test_timeline_matches_a_traced_call_near_its_enqueue_time(con, trace_ts, time_base, matched):
    job(con, {0: [entry(0, 1, time_created_ns=T0)]}, members=(0,))
    con.execute(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, op, pg_name, seq) VALUES "
        f"(1, 5, 0, {trace_ts}, 1, 'allreduce', NULL, NULL)"
    )
    con.execute(f"INSERT INTO ranks (run_id, rank, time_base) VALUES (1, 0, '{time_base}')")
    got = q(con, "SELECT trace_ts FROM hang_timeline(1, 5)")
    assert got == [(trace_ts if matched else None,)]


def _verdict(con) -> str:
    return hang_section(con, RID)["verdict"]


def test_sentence_of_a_stuck_rank(con):
    done = {"state": "completed"}
    calls = {r: [entry(r, 1, **done), entry(r, 2, **done)] for r in range(4)}
    calls[1][1] = entry(1, 2, state="started")
    job(con, calls)
    assert _verdict(con) == (
        "Hang in process group 0 (default_pg) at all-reduce seq 2: rank 1 started it and never "
        "completed it; ranks 0, 2, 3 did."
    )


def test_sentence_when_every_rank_is_inside(con):
    calls = {r: [entry(r, 1, state="completed"), entry(r, 2, state="started")] for r in range(2)}
    job(con, calls, members=(0, 1))
    assert _verdict(con).endswith(
        "ranks 0, 1 started it and never completed it (every rank is inside it: look at the "
        "network or the devices)."
    )


def test_sentence_of_two_missing_ranks_and_a_missing_dump(con):
    job(con, {0: [entry(0, 1), entry(0, 2)], 1: [entry(1, 1)], 2: [entry(2, 1)]})
    assert _verdict(con) == (
        "Hang in process group 0 (default_pg) at all-reduce seq 2: ranks 1, 2 never entered it "
        "(last recorded collectives: rank 1: all-reduce seq 1; rank 2: all-reduce seq 1); "
        "rank 0 waited. No dump from rank 3: they may be the cause."
    )


def test_sentence_without_evidence(con):
    job(con, {r: [entry(r, s) for s in (1, 2, 3)] for r in range(4)})
    assert _verdict(con) == (
        "No hang evidence in process group 0 (default_pg): every dumped rank entered the same "
        "collectives up to seq 3 (these dumps record no completion, as with gloo: a hang inside "
        "that collective cannot be told from a finished job)."
    )


def test_pg_status_tells_how_far_a_rank_without_entries_got(con):
    # dumps of active entries only: the ranks waiting in seq 6 hold it, rank 1 holds nothing,
    # and its pg_status says it enqueued up to seq 5
    calls = {r: [entry(r, 6, "all_gather", pg_id=0)] for r in (0, 2, 3)}
    calls[1] = []
    job(con, calls)
    put(con, "fr_pg_status", [{"rank": r, "pg_id": "0", "last_enqueued": 6 if r != 1 else 5,
                               "last_started": -1, "last_completed": -1} for r in range(4)])  # fmt: skip
    assert q(con, FIND) == [(6, "missing", "all_gather", [1], [0, 2, 3])]
    assert q(con, "SELECT last_seq, last_op FROM hang_rank_progress(1) WHERE rank = 1") == [
        (5, None)
    ]
    assert "rank 1 never entered it (its last recorded collective is seq 5)" in _verdict(con)


def test_gloo_unnamed_config_with_subgroups_is_no_member_list(con):
    """gloo with a subgroup (seen in real torch 2.13 dumps): the members of the subgroup write
    pg_config {'': {'ranks': '[]'}}, the other ranks {'': all ranks}; neither is the subgroup's
    member list. Group 1 = ranks 0, 1 completed its call; rank 3 never entered seq 4 of group 0.
    The lone '' entry used to give group 1 no members at all (no hang found) or all four (ranks
    2 and 3 blamed for a collective that completed)."""
    calls = {r: [entry(r, s) for s in (1, 2, 3, 4) if not (r == 3 and s == 4)] for r in range(4)}
    for r in (0, 1):
        calls[r].append(entry(r, 1, pg="1"))
    put(con, "fr_dumps", [{"rank": r, "form": "json", "version": "2.10"} for r in calls])
    put(con, "fr_groups", [{"rank": r, "pg_name": "", "ranks": [] if r < 2 else [0, 1, 2, 3]}
                           for r in calls])  # fmt: skip
    put(con, "fr_entries", [e for es in calls.values() for e in es])
    members = dict(q(con, "SELECT pg_name, members FROM hang_members(1)"))
    assert members == {"0": [0, 1, 2, 3], "1": [0, 1]}
    assert q(con, "SELECT pg_name, seq, kind, culprit_ranks FROM hang_findings(1)") == [
        ("0", 4, "missing", [3])
    ]


def test_every_cause_at_the_hung_seq_is_in_the_verdict(con):
    """At seq 6 rank 1 never enters and rank 3 calls all_reduce where ranks 0 and 2 call
    all_gather: two culprits (a scenario made with real gloo dumps); the verdict named rank 1
    only, and fixing it alone leaves the job hung."""
    from commwall.analysis.hangs.section import hang_section

    calls = {r: [entry(r, s) for s in range(1, 6)] for r in range(4)}
    for r in (0, 2):
        calls[r].append(entry(r, 6, "all_gather"))
    calls[3].append(entry(3, 6))
    job(con, calls)
    verdict = hang_section(con, 1)["verdict"]
    assert "rank 1 never entered it" in verdict
    assert "rank 3 called all-reduce where ranks 0, 2 called all-gather" in verdict


@pytest.mark.parametrize(("late_ms", "found"), [(4500, True), (2500, False)])
def test_a_rank_later_than_the_timeout_is_named(con, late_ms, found):
    """Every rank entered seq 6, rank 1 `late_ms` after the others, the timeout 3 s (a scenario
    made with real gloo dumps: rank 1 entered 4.5 s late, the others had timed out; the dumps
    record no completion, so the group looked quiet and the checklist said ok)."""
    from commwall.analysis.hangs.section import hang_section

    t0 = 1_700_000_000 * 10**9
    calls = {r: [entry(r, s, time_created_ns=t0 + s * 10**9, timeout_ms=3000) for s in range(1, 6)]
             for r in range(4)}  # fmt: skip
    for r in range(4):
        at = t0 + 6 * 10**9 + (late_ms * 10**6 if r == 1 else 0)
        calls[r].append(entry(r, 6, "all_gather", time_created_ns=at, timeout_ms=3000))
    job(con, calls)
    got = q(con, "SELECT seq, kind, culprit_ranks, other_ranks, expected, culprit_values "
                 "FROM hang_findings(1)")  # fmt: skip
    if found:
        assert got == [(6, "late", [1], [0, 2, 3], str(late_ms), ["3000"])]
        assert "rank 1 entered it 4.5 s after the first rank" in hang_section(con, 1)["verdict"]
    else:
        assert got == []
