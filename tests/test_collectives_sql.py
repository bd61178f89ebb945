"""Table-driven tests of clock.sql, collectives.sql and collective_summary.sql on tiny inline
tables: matching keys, alignment, per-instance figures, wait attribution, bandwidth factors."""

from __future__ import annotations

import duckdb
import pytest
from conftest import memory_store
from hypothesis import given, settings
from hypothesis import strategies as st

from commwall.analysis.report.session import CACHED, run_session

#: The session's tables collective_ranks reads (the matching, the clock fit, the instances):
#: computed once per call of `per_rank`, as the report's session does; outside a session the
#: macro tree computes the matching again for each of them. collective_ranks itself is not
#: cached: its own SQL computes it.
RANK_INPUTS = ("_match_rows", "clock_offsets", "_aligned_calls", "_instances")
assert set(RANK_INPUTS) <= set(CACHED) and "collective_ranks" not in RANK_INPUTS


@pytest.fixture(scope="module")
def store() -> duckdb.DuckDBPyConnection:
    return memory_store()


def cleared(store):
    """The module's store with every run-level table emptied."""
    for table in ("collectives", "ranks", "steps", "activities"):
        store.execute(f"DELETE FROM {table}")
    return store


@pytest.fixture
def con(store) -> duckdb.DuckDBPyConnection:
    return cleared(store)


def call(rank, ts, dur, op="allreduce", pg="0", seq=None, src=None, n=1024, out=None, gs=2, dt="float"):  # fmt: skip
    """One collectives row (run 1): n input elements of dtype dt (4-byte float)."""
    out = n if out is None else out
    return (rank, ts, dur, ts, op, pg, gs, seq, src, dt, n, out, 4 * n, 4 * out)


def load(con, calls, hosts=None, steps=()):
    """Insert calls, ranks (host per rank, default one host 'h') and steps (rank, step, ts, dur)."""
    con.executemany(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, launch_ts, op, pg_name,"
        " group_size, seq, seq_source, dtype, in_nelems, out_nelems, in_bytes, out_bytes)"
        " VALUES (1, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        calls,
    )
    ranks = sorted({c[0] for c in calls})
    hosts = hosts or {r: "h" for r in ranks}
    con.executemany(
        "INSERT INTO ranks (run_id, rank, host) VALUES (1, ?, ?)", [(r, hosts[r]) for r in ranks]
    )
    if steps:
        con.executemany("INSERT INTO steps VALUES (1, 0, ?, ?, ?, ?)", list(steps))
    return con


def rows(con, sql):
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def instances(con):
    return rows(con, "SELECT * FROM collective_instances(1) ORDER BY op, instance")


def per_rank(con):
    with run_session(con, 1, names=RANK_INPUTS):
        got = rows(con, "SELECT * FROM collective_ranks(1)")
    return {(r["op"], r["instance"], r["rank"]): r for r in got}


# --- clock_fit -------------------------------------------------------------------------------


def fit(con, values):
    con.execute("CREATE OR REPLACE TEMP TABLE t (grp INT, domain VARCHAR, te BIGINT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", values)
    got = con.execute("SELECT domain, offset_ns, n_instances FROM clock_fit(t) ORDER BY domain")
    return {d: (o, n) for d, o, n in got.fetchall()}


CLOCK_CASES = [
    ("one domain", [(1, "a", 10), (1, "a", 12)], {"a": (0, 0)}),
    ("two equal domains", [(1, "a", 100), (1, "b", 200), (2, "a", 1000), (2, "b", 1100)],
     {"a": (-50, 2), "b": (50, 2)}),
    ("unequal sizes", [(1, "a", 0), (1, "a", 0), (1, "a", 0), (1, "b", 700)],
     {"a": (0, 1), "b": (700, 1)}),
    ("domain never shared", [(1, "a", 0), (1, "b", 40), (2, "c", 5)],
     {"a": (-20, 1), "b": (20, 1), "c": (0, 0)}),
    ("median resists one bad event", [(1, "a", 0), (1, "b", 10), (2, "a", 0), (2, "b", 10),
                                      (3, "a", 0), (3, "b", 9000)],
     {"a": (-5, 3), "b": (5, 3)}),
]  # fmt: skip


@pytest.mark.parametrize("case,values,expected", CLOCK_CASES, ids=[c[0] for c in CLOCK_CASES])
def test_clock_fit(con, case, values, expected):
    assert fit(con, values) == expected


@settings(max_examples=25, deadline=None)
@given(
    offsets=st.lists(st.integers(-(10**9), 10**9), min_size=2, max_size=4),
    ends=st.lists(st.integers(0, 10**6), min_size=3, max_size=8),
    per_domain=st.integers(1, 3),
)
def test_clock_fit_recovers_exact_offsets(store, offsets, ends, per_domain):
    """Noise-free ends shifted per domain: the offset differences come back exactly."""
    con = store
    values = [
        (k, f"d{d}", base + off)
        for k, base in enumerate(ends)
        for d, off in enumerate(offsets)
        for _ in range(per_domain)
    ]
    got = fit(con, values)
    for d, off in enumerate(offsets):
        assert round(got[f"d{d}"][0] - got["d0"][0]) == off - offsets[0]


# --- matching --------------------------------------------------------------------------------


def test_order_matching_per_op(con):
    load(con, [
        call(0, 100, 50), call(0, 200, 30, "allgather", out=2048), call(0, 300, 20),
        call(1, 120, 30), call(1, 180, 50, "allgather", out=2048), call(1, 310, 10),
    ])  # fmt: skip
    got = [
        (i["op"], i["instance"], i["match_key"], i["n_ranks"], i["last_rank"], i["transfer_ns"])
        for i in instances(con)
    ]
    assert got == [
        ("allgather", 0, "order", 2, 0, 30),
        ("allreduce", 0, "order", 2, 1, 30),
        ("allreduce", 1, "order", 2, 1, 10),
    ]
    r = per_rank(con)
    assert r[("allreduce", 0, 0)]["wait_ns"] == 20 and r[("allreduce", 0, 1)]["wait_ns"] == 0
    assert r[("allgather", 0, 1)]["wait_ns"] == 20
    assert r[("allreduce", 1, 0)]["lateness_ns"] == -5


def test_seq_matching_ignores_order(con):
    # rank 1 issues seq 8 before seq 7 (two streams): the key, not the order, decides
    load(con, [
        call(0, 100, 10, seq=7, src="Seq"), call(0, 200, 10, seq=8, src="Seq", n=8),
        call(1, 150, 60, seq=8, src="Seq", n=8), call(1, 90, 20, seq=7, src="Seq"),
    ])  # fmt: skip
    got = {(i["instance"], i["match_key"], i["first_start_ns"], i["size_mismatch"]) for i in instances(con)}  # fmt: skip
    assert got == {(7, "seq", 90, False), (8, "seq", 150, False)}


def test_match_key_chosen_per_process_group(con):
    load(con, [
        call(0, 0, 10, pg="0", seq=1, src="Seq"), call(1, 0, 10, pg="0", seq=1, src="Seq"),
        call(0, 50, 10, pg="1", seq=4, src="concrete_inputs"),
        call(1, 50, 10, pg="1", seq=4, src="concrete_inputs"),
        call(0, 90, 10, pg="2", seq=2, src="Seq"), call(1, 90, 10, pg="2"),
    ])  # fmt: skip
    got = {(i["pg_name"], i["match_key"], i["instance"]) for i in instances(con)}
    assert got == {("0", "seq", 1), ("1", "concrete_inputs", 4), ("2", "order", 0)}


def test_problems_reported_not_guessed(con):
    load(con, [
        call(0, 0, 10, seq=5, src="Seq"), call(1, 0, 10, "allgather", seq=5, src="Seq"),
        call(0, 100, 10, pg="1", gs=2), call(1, 100, 10, pg="1", gs=2, n=512),
        call(0, 200, 10, pg="2", gs=3), call(1, 200, 10, pg="2", gs=3),
    ])  # fmt: skip
    got = {
        (p["pg_name"], p["op"], p["problem"], tuple(p["ranks"]))
        for p in rows(con, "SELECT * FROM collective_problems(1)")
    }
    assert got == {
        ("0", "allreduce", "op_mismatch", (0,)),
        ("0", "allgather", "op_mismatch", (1,)),
        ("0", "allreduce", "incomplete", (0,)),
        ("0", "allgather", "incomplete", (1,)),
        ("1", "allreduce", "size_mismatch", (0, 1)),
        ("2", "allreduce", "incomplete", (0, 1)),
    }
    by_pg = {(i["pg_name"], i["op"]): i for i in instances(con)}
    assert by_pg[("1", "allreduce")]["size_mismatch"] and by_pg[("2", "allreduce")]["complete"] is False  # fmt: skip


def test_order_matching_anchored_on_steps(con):
    """Rank 1 did not record step 1: its step-2 call still matches rank 0's step-2 call."""
    load(
        con,
        [call(0, 100, 10), call(0, 300, 10), call(1, 305, 5)],
        steps=[(0, 1, 50, 200), (0, 2, 250, 200), (1, 2, 250, 200)],
    )
    got = [(i["step"], i["n_ranks"], i["first_start_ns"]) for i in instances(con)]
    assert got == [(1, 1, 100), (2, 2, 300)]


def test_null_process_group_is_one_group(con):
    load(con, [call(0, 0, 10, pg=None), call(1, 4, 6, pg=None)])
    (i,) = instances(con)
    assert (i["pg_name"], i["n_ranks"], i["last_rank"], i["total_wait_ns"]) == (None, 2, 1, 4)


# --- alignment and per-instance figures -------------------------------------------------------


def test_alignment_on_ends_not_starts(con):
    """Host b's clock runs 1000 ns ahead; rank 1 (on b) is the real straggler by 40 ns."""
    calls = []
    for k in range(3):
        t = 10_000 * k
        calls += [call(0, t, 100), call(1, t + 40 + 1000, 60)]  # both end at t + 100 (true)
    load(con, calls, hosts={0: "a", 1: "b"})
    off = {r["host"]: r["offset_ns"] for r in rows(con, "SELECT * FROM clock_offsets(1)")}
    assert off == {"a": 0, "b": 1000}
    for i in instances(con):
        assert (i["last_rank"], i["skew_start_ns"], i["skew_end_ns"], i["transfer_ns"]) == (1, 40, 0, 60)  # fmt: skip
    check = rows(con, "SELECT * FROM clock_check(1)")[0]
    assert (check["n_domains"], check["n_violations"], check["n_fit_instances"]) == (2, 0, 3)


def test_causality_violation_counted_and_transfer_falls_back(con):
    # one host (nothing to align); rank 1 ends before rank 0 starts
    load(con, [call(0, 100, 50), call(1, 0, 20)])
    (i,) = instances(con)
    assert (i["causal"], i["transfer_ns"], i["min_dur_ns"]) == (False, 20, 20)
    check = rows(con, "SELECT * FROM clock_check(1)")[0]
    assert (check["n_checked"], check["n_violations"], check["violation_rate"]) == (1, 1, 1.0)


def test_wait_caused_shares_each_gap_among_the_absent(con):
    """Arrivals 0, 9, 9, 10: gap 0-9 keeps 1 rank waiting, charged 1/3 each to ranks 1-3; gap 9-10
    keeps 3 waiting, all charged to rank 3. Causes sum to the waits (10 + 1 + 1 + 0)."""
    load(con, [call(r, t, 20 - t, gs=4) for r, t in enumerate((0, 9, 9, 10))])
    r = per_rank(con)
    assert [r[("allreduce", 0, k)]["caused_ns"] for k in range(4)] == [0, 3, 3, 6]
    assert [r[("allreduce", 0, k)]["wait_ns"] for k in range(4)] == [10, 1, 1, 0]
    assert [r[("allreduce", 0, k)]["arrival"] for k in range(4)] == [0, 1, 2, 3]
    assert [r[("allreduce", 0, k)]["is_last"] for k in range(4)] == [False, False, False, True]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=2, max_size=9))
def test_wait_caused_adds_up_to_total_wait(store, starts):
    n = len(starts)
    r = per_rank(load(cleared(store), [call(k, t, 2000 - t, gs=n) for k, t in enumerate(starts)]))
    caused = [r[("allreduce", 0, k)]["caused_ns"] for k in range(n)]
    waits = [r[("allreduce", 0, k)]["wait_ns"] for k in range(n)]
    assert waits == [max(starts) - t for t in starts]
    assert abs(sum(caused) - sum(waits)) <= n  # each share is rounded to whole ns
    last = max(range(n), key=lambda k: (starts[k], k))
    assert caused[last] == max(caused) and r[("allreduce", 0, last)]["is_last"]


# (op, n ranks, in elems, out elems) -> (bytes S, busbw factor) per cost_model.md §4
BW_CASES = [
    ("allreduce", 4, 1000, 1000, 4000, 1.5),
    ("allgather", 4, 250, 1000, 4000, 0.75),
    ("reduce_scatter", 4, 1000, 250, 4000, 0.75),
    ("alltoall", 4, 1000, 1000, 4000, 0.75),
    ("broadcast", 4, 1000, 1000, 4000, 1.0),
    ("barrier", 4, 1, 1, None, None),
]


@pytest.mark.parametrize("op,n,i,o,size,factor", BW_CASES, ids=[c[0] for c in BW_CASES])
def test_bytes_and_busbw_factor(con, op, n, i, o, size, factor):
    load(con, [call(r, 0, 100, op, n=i, out=o, gs=n) for r in range(n)])
    (inst,) = instances(con)
    assert (inst["bytes"], inst["busbw_factor"], inst["transfer_ns"]) == (size, factor, 100)
    if size is not None:
        assert inst["algbw_GBps"] == pytest.approx(size / 100)
        assert inst["busbw_GBps"] == pytest.approx(size / 100 * factor)


def test_allgather_bytes_from_input_when_output_unknown(con):
    con.executemany(
        "INSERT INTO collectives (run_id, file_id, rank, ts, dur, op, group_size, in_bytes)"
        " VALUES (1, 0, ?, 0, 10, 'allgather', 4, 100)",
        [(r,) for r in range(4)],
    )
    assert instances(con)[0]["bytes"] == 400


def test_collective_ops_summary(con):
    load(con, [
        call(0, 0, 30), call(1, 10, 20),
        call(0, 100, 50), call(1, 140, 10),
        call(0, 200, 10, "allgather", out=2048),
    ])  # fmt: skip
    got = {r["op"]: r for r in rows(con, "SELECT * FROM collective_ops(1)")}
    ar, ag = got["allreduce"], got["allgather"]
    assert (ar["count"], ar["transfer_ns_median"], ar["skew_start_ns_max"]) == (2, 15, 40)
    assert (ar["total_wait_ns"], ar["incomplete"], ar["bytes_total"]) == (50, 0, 8192)
    assert (ag["count"], ag["incomplete"], ag["transfer_ns_median"]) == (1, 1, None)


# (case, calls, expected allreduce (n_bandwidth, busbw_GBps_median, bytes_median))
TRUSTED_BW_CASES = [
    (
        "two good instances: both count",
        [call(0, 0, 30), call(1, 10, 20), call(0, 100, 50), call(1, 140, 10)],
        # transfer 20 and 10 ns, 4096 bytes, factor 2(n-1)/n = 1: 204.8 and 409.6 GB/s
        (2, (204.8 + 409.6) / 2, 4096),
    ),
    (
        "a call that ends before its peer arrives (wrong pairing): no bandwidth from it",
        # by order: rank 1's call at 0 pairs with rank 0's at 0 (ends 30 and 20: transfer 25 ns),
        # its call at 10 (ending at 30) with rank 0's at 100
        [call(0, 0, 30), call(1, 10, 20), call(0, 100, 50), call(1, 0, 20)],
        (1, 4096 / 25, 4096),
    ),
    (
        "calls disagreeing on sizes: neither their bandwidth nor their bytes",
        [call(0, 0, 30), call(1, 10, 20), call(0, 100, 50, n=8), call(1, 140, 10, n=8_000_000)],
        (1, 204.8, 4096),
    ),
    (
        "no instance to trust: no bandwidth at all",
        [call(0, 100, 50), call(1, 0, 20)],
        (0, None, 4096),
    ),
    (
        "a traced rank never made the call (a hang: the others sat in it): no transfer",
        # group of 3, all traced; the 2nd all-reduce lacks rank 2. The 1st: last arrival 10,
        # ends 30: 20 ns, 4096 bytes, factor 2(3-1)/3
        [call(0, 0, 30, gs=3), call(1, 10, 20, gs=3), call(2, 5, 25, gs=3),
         call(0, 100, 3000, gs=3), call(1, 110, 2990, gs=3)],
        (1, 204.8 * 4 / 3, 4096),
    ),
    (
        "a job traced on 2 of its 4 ranks: its instances are as good as the traces allow",
        [call(0, 0, 30, gs=4), call(1, 10, 20, gs=4)],
        (1, 204.8 * 3 / 2, 4096),  # factor 2(4-1)/4
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    "case,calls,expected", TRUSTED_BW_CASES, ids=[c[0] for c in TRUSTED_BW_CASES]
)
def test_op_bandwidth_only_from_trusted_instances(con, case, calls, expected):
    load(con, calls)
    (ar,) = rows(con, "SELECT * FROM collective_ops(1)")
    n, busbw, size = expected
    assert (ar["n_bandwidth"], ar["bytes_median"]) == (n, size)
    assert ar["busbw_GBps_median"] == (None if busbw is None else pytest.approx(busbw))


def test_op_mismatch_counted_only_where_a_sequence_key_can_show_it(con):
    """A rank calling another op under one seq is an op mismatch; matched by order (no seq), the
    same fault leaves two incomplete instances and no op mismatch can be seen: "not checked"."""
    from commwall.analysis.collectives.instances import collectives_section, matching_sentence

    def section(con):  # in an analysis session of the run, as the report computes it
        with run_session(con, 1):
            return collectives_section(con, 1)

    load(con, [call(0, 0, 10, seq=5, src="Seq"), call(1, 0, 10, "allgather", seq=5, src="Seq")])
    m = section(con)["matching"]
    assert (m["op_mismatch"], m["op_mismatch_checked"], m["incomplete"]) == (2, 2, 2)
    assert "op mismatch 2" in matching_sentence(m)
    cleared(con)
    load(con, [call(0, 0, 10), call(1, 0, 10, "allgather")])
    m = section(con)["matching"]
    assert (m["op_mismatch"], m["op_mismatch_checked"], m["incomplete"]) == (0, 0, 2)
    assert "op mismatch not checked" in matching_sentence(m)


# (size_mismatch, op, whether the instance's waits count): an all-to-all-v's ranks send their
# own split sizes, so a mismatch there is the exchange itself, not a misaligned match.
SIZES_AGREE_CASES = [
    (False, "allreduce", True),
    (True, "allreduce", False),
    (True, "allgather", False),
    (True, "alltoall", True),
    (False, "alltoall", True),
    (None, "allreduce", True),
]


@pytest.mark.parametrize("mismatch,op,expected", SIZES_AGREE_CASES)
def test_sizes_agree(con, mismatch, op, expected):
    got = con.execute("SELECT _sizes_agree(?::BOOLEAN, ?)", [mismatch, op]).fetchone()[0]
    assert got is expected
