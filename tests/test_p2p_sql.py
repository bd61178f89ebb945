"""Table-driven tests of analysis/sql/p2p.sql on stores built row by row: sends and receives
matched by channel and order, a receive's waiting before its send was issued, the issuing
`c10d::` op as a call's start, and unmatched or mismatched calls. Expected values are worked
out by hand from the rows."""

from __future__ import annotations

import pytest
from conftest import memory_store


def store(calls, ops=()):
    """calls: (rank, op, peer, ts, dur, nelems); ops: (rank, name, ts) issuing c10d ops. Two
    ranks on one host, one step [0, 1000) each."""
    con = memory_store()
    con.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    for r in (0, 1):
        con.execute("INSERT INTO ranks (run_id, rank, host) VALUES (1, ?, 'h')", [r])
        con.execute("INSERT INTO steps VALUES (1, 1, ?, 1, 0, 1000)", [r])
    for rank, op, peer, ts, dur, n in calls:
        con.execute(
            "INSERT INTO collectives (run_id, rank, file_id, ts, dur, op, peer, dtype, in_nelems,"
            " in_bytes) VALUES (1, ?, 1, ?, ?, ?, ?, 'float', ?, ?)",
            [rank, ts, dur, op, peer, n, 4 * n],
        )
    for rank, name, ts in ops:
        con.execute(
            "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, name) "
            "VALUES (1, ?, 1, ?, 1, 'other', ?)",
            [rank, ts, name],
        )
    return con


# (case, calls, ops, expected pairs (src, dst, k, matched, size_mismatch, recv_wait,
#  recv_transfer, send_wait))
CASES = [
    (
        "the receive starts first and waits until the send starts",
        [(0, "send", 1, 50, 10, 8), (1, "recv", 0, 10, 50, 8)],
        [],
        [(0, 1, 0, True, False, 40, 10, 0)],
    ),
    (
        "the send waits for its receive (gloo: the receiver posts later)",
        [(0, "send", 1, 10, 50, 8), (1, "recv", 0, 50, 12, 8)],
        [],
        [(0, 1, 0, True, False, 0, 12, 40)],
    ),
    (
        "k-th with k-th in each direction; the other direction is its own channel",
        [
            (0, "send", 1, 10, 5, 8),
            (0, "send", 1, 30, 5, 8),
            (1, "recv", 0, 12, 5, 8),
            (1, "recv", 0, 20, 16, 8),
            (1, "send", 0, 100, 5, 8),
            (0, "recv", 1, 90, 20, 8),
        ],
        [],
        [
            (0, 1, 0, True, False, 0, 5, 2),
            (0, 1, 1, True, False, 10, 6, 0),
            (1, 0, 0, True, False, 10, 10, 0),
        ],
    ),
    (
        "the issuing c10d op is the call's start: the receive waited from its op",
        [(0, "send", 1, 60, 5, 8), (1, "recv", 0, 40, 30, 8)],
        [(0, "c10d::send", 55), (1, "c10d::recv_", 20)],
        [(0, 1, 0, True, False, 35, 15, 0)],
    ),
    (
        "sizes disagree: matched, flagged",
        [(0, "send", 1, 10, 5, 8), (1, "recv", 0, 10, 5, 16)],
        [],
        [(0, 1, 0, True, True, 0, 5, 0)],
    ),
    (
        "a send without its receive stays unmatched, no waits",
        [(0, "send", 1, 10, 5, 8)],
        [],
        [(0, 1, 0, False, False, None, None, None)],
    ),
]


@pytest.mark.parametrize("case,calls,ops,expected", CASES, ids=[c[0] for c in CASES])
def test_p2p_pairs(case, calls, ops, expected):
    con = store(calls, ops)
    got = con.execute(
        "SELECT src, dst, k, matched, size_mismatch, recv_wait_ns, recv_transfer_ns, send_wait_ns"
        " FROM p2p_pairs(1) ORDER BY src, dst, k"
    ).fetchall()
    assert got == expected


def test_rank_steps_add_up_each_side():
    con = store(CASES[2][1])
    got = con.execute(
        "SELECT rank, n_recv, recv_wait_ns, recv_transfer_ns, n_send, send_wait_ns"
        " FROM p2p_rank_steps(1) ORDER BY rank"
    ).fetchall()
    # rank 0: received one (wait 10, transfer 10), sent two (send waits 2 + 0)
    # rank 1: received two (waits 0 + 10, transfers 5 + 6), sent one (send wait 0)
    assert got == [(0, 1, 10, 10, 2, 2), (1, 2, 10, 11, 1, 0)]


def test_replay_rows_are_two_member_barriers_ending_with_the_receive():
    con = store(CASES[0][1])
    got = con.execute("SELECT rank, ik, ts, te, recv_te FROM p2p_replay_rows(1) ORDER BY rank")
    assert got.fetchall() == [(0, -1, 50, 60, 60), (1, -1, 10, 60, 60)]
