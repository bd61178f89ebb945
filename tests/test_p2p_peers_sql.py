"""Table-driven tests of analysis/sql/p2p_peers.sql (a send's or receive's peer, named by its
rank in the program's process group, read as a global rank) and of groups.sql's lanes (gloo
thread pools whose thread ids other ranks' threads interleave), on stores built row by row.
Expected values are worked out by hand from the rows."""

from __future__ import annotations

import pytest
from conftest import memory_store

WORLD = [0, 1, 2, 3]
#: a pp x dp mesh's groups as each rank lists them: (pg_name, desc, ranks)
MESH = {
    0: [("0", "default_pg", WORLD), ("1", "pp_replica0", [0, 1]), ("3", "dp_stage0", [0, 2])],
    1: [("0", "default_pg", WORLD), ("1", "pp_replica0", [0, 1]), ("4", "dp_stage1", [1, 3])],
    2: [("0", "default_pg", WORLD), ("2", "pp_replica1", [2, 3]), ("3", "dp_stage0", [0, 2])],
    3: [("0", "default_pg", WORLD), ("2", "pp_replica1", [2, 3]), ("4", "dp_stage1", [1, 3])],
}


def store(groups, hosts=None):
    """Four ranks (world size 4) on host 'h' (or `hosts`: rank -> host), one step [0, 1000)
    each; `groups`: rank -> [(pg_name, pg_desc, ranks)] as its pg_config lists them."""
    con = memory_store()
    con.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    for r in WORLD:
        host = (hosts or {}).get(r, "h")
        con.execute(
            "INSERT INTO ranks (run_id, rank, host, world_size) VALUES (1, ?, ?, 4)", [r, host]
        )
        con.execute("INSERT INTO steps VALUES (1, 1, ?, 1, 0, 1000)", [r])
        for name, desc, ranks in groups.get(r, []):
            con.execute(
                "INSERT INTO process_groups VALUES (1, 1, ?, ?, ?, ?, ?)",
                [r, name, desc, len(ranks), str(ranks)],
            )
    return con


def add_p2p(con, calls):
    """calls: (rank, op, peer as the trace names it, ts, dur)."""
    for rank, op, peer, ts, dur in calls:
        con.execute(
            "INSERT INTO collectives (run_id, rank, file_id, ts, dur, op, peer, dtype, in_nelems,"
            " in_bytes) VALUES (1, ?, 1, ?, ?, ?, ?, 'float', 8, 32)",
            [rank, ts, dur, op, peer],
        )


# (case, groups, calls, expected pairs (src, dst, matched))
CASES = [
    (
        "each replica's own group: rank 2's peer 1 is rank 3, rank 3's peer 0 is rank 2",
        MESH,
        [
            (0, "send", 1, 10, 5),
            (1, "recv", 0, 10, 5),
            (2, "send", 1, 20, 5),
            (3, "recv", 0, 20, 5),
        ],
        [(0, 1, True), (2, 3, True)],
    ),
    (
        "the default group: the sender names global rank 3; the receive's peer 0 is read where "
        "its sender agrees (rank 0 sent to it, rank 2 did not)",
        MESH,
        [(0, "send", 3, 10, 5), (3, "recv", 0, 10, 5)],
        [(0, 3, True)],
    ),
    (
        "no group listed: the peers as the trace names them",
        {},
        [(0, "send", 1, 10, 5), (1, "recv", 0, 10, 5)],
        [(0, 1, True)],
    ),
    (
        "nobody agrees (the receive is missing): the trace's peer is kept, unmatched",
        MESH,
        [(2, "send", 1, 20, 5)],
        [(2, 1, False)],
    ),
    (
        "both readings name the same rank (replica 0: its group and the default group): matched",
        {0: MESH[0], 1: [("0", "default_pg", WORLD)]},
        [(0, "send", 1, 10, 5), (1, "recv", 0, 10, 5)],
        [(0, 1, True)],
    ),
]


@pytest.mark.parametrize("case,groups,calls,expected", CASES, ids=[c[0] for c in CASES])
def test_peers_are_global_ranks(case, groups, calls, expected):
    con = store(groups)
    add_p2p(con, calls)
    got = con.execute("SELECT src, dst, matched FROM p2p_pairs(1) ORDER BY src, dst").fetchall()
    assert got == expected


def test_the_peer_map_says_which_group_it_read():
    con = store(MESH)
    add_p2p(con, CASES[0][2])
    got = con.execute(
        "SELECT rank, op, peer, global_peer, pg_name, n, same_count FROM p2p_peer_map(1) "
        "ORDER BY rank"
    ).fetchall()
    # replica 0: default and pp_replica0 both agree; the smaller group is named
    assert got == [
        (0, "send", 1, 1, "1", 1, True),
        (1, "recv", 0, 0, "1", 1, True),
        (2, "send", 1, 3, "2", 1, True),
        (3, "recv", 0, 2, "2", 1, True),
    ]


def add_threads(con, threads):
    """threads: (rank, tid): one gloo all-reduce on that thread of the rank's process
    (pid 100 + rank), at ts = tid."""
    for rank, tid in threads:
        con.execute(
            "INSERT INTO collectives (run_id, rank, file_id, ts, dur, op, name, dtype, "
            "in_nelems) VALUES (1, ?, 1, ?, 5, 'allreduce', 'gloo:all_reduce', 'float', 8)",
            [rank, tid],
        )
        con.execute(
            "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind, name, pid, tid) "
            "VALUES (1, ?, 1, ?, 5, 'comm', 'gloo:all_reduce', ?, ?)",
            [rank, tid, 100 + rank, tid],
        )


# (case, threads, hosts, expected lanes of rank 0: [(tid, lane)])
LANES = [
    (
        "ids 11 and 12 are rank 2's threads: rank 0's 10 and 13 are one pool",
        [(0, 10), (0, 13), (2, 11), (2, 12)],
        None,
        [(10, 0), (13, 0)],
    ),
    (
        "id 12 is nobody's calling thread: two lanes",
        [(0, 10), (0, 13), (2, 11)],
        None,
        [(10, 0), (13, 1)],
    ),
    (
        "the threads in between are another host's: two lanes",
        [(0, 10), (0, 13), (2, 11), (2, 12)],
        {2: "g"},
        [(10, 0), (13, 1)],
    ),
    (
        "consecutive ids: one lane",
        [(0, 10), (0, 11)],
        None,
        [(10, 0), (11, 0)],
    ),
]


@pytest.mark.parametrize("case,threads,hosts,expected", LANES, ids=[c[0] for c in LANES])
def test_lanes_skip_other_ranks_threads(case, threads, hosts, expected):
    con = store(MESH, hosts)
    add_threads(con, threads)
    got = con.execute(
        "SELECT DISTINCT tid, lane FROM _lane_calls(1) WHERE rank = 0 ORDER BY tid"
    ).fetchall()
    assert got == expected
