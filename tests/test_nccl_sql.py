"""Table-driven tests of the analysis/sql/nccl_*.sql macros on tiny inline tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from commwall.analysis.db import load_modules
from commwall.ingest import store
from commwall.ingest.formats.nccl_log.tables import SCHEMAS

RID = 1


@pytest.fixture(scope="module")
def store_con():
    """One in-memory store with the macros loaded (loading them takes most of a second)."""
    return load_modules(store.connect(":memory:"))


@pytest.fixture
def con(store_con):
    """The store with a run and two files, rolled back after the test."""
    store_con.execute("BEGIN TRANSACTION")
    store_con.execute("INSERT INTO runs VALUES (1, 'r', NULL, NULL)")
    store_con.execute("INSERT INTO files (file_id, run_id, path, sha256, format) VALUES "
                      "(1, 1, 'a.log', 'x', 'nccl_log'), (2, 1, 'b.log', 'y', 'nccl_log')")  # fmt: skip
    yield store_con
    store_con.execute("ROLLBACK")


def put(con, table: str, *rows: dict) -> None:
    """Insert rows (dicts, run_id 1 and file_id 1 unless given)."""
    rows = [{"run_id": RID, "file_id": 1, **r} for r in rows]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    data = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])
    con.register("_rows", data)
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
    con.unregister("_rows")


def q(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def procs(con, *hosts_pids, tag_ranks=None, versions=None):
    for i, (host, pid) in enumerate(hosts_pids):
        put(con, "nccl_processes", {"proc": i, "host": host, "pid": pid,
            "tag_rank": (tag_ranks or {}).get(i), "nccl_version": (versions or {}).get(i)})  # fmt: skip


def comm(con, proc, rank, nranks, comm_id="0xc1", comm="0x1", **kw):
    put(con, "nccl_communicators", {"proc": proc, "comm": comm, "rank": rank, "nranks": nranks,
        "comm_id": comm_id, "line_no": 10 + proc, **kw})  # fmt: skip


def test_world_size_sources(con):
    assert q(con, "SELECT * FROM nccl_world(1)") == [(None,)]
    put(con, "nccl_timeouts", {"line_no": 1, "kind": "timeout", "rank": 20})
    assert q(con, "SELECT * FROM nccl_world(1)") == [(21,)]
    comm(con, 0, 0, 32)
    assert q(con, "SELECT * FROM nccl_world(1)") == [(32,)]
    put(con, "nccl_colls", {"proc": 0, "line_no": 2, "nranks": 48})
    assert q(con, "SELECT * FROM nccl_world(1)") == [(48,)]
    ring = list(range(64))
    put(con, "nccl_channels", {"proc": 0, "line_no": 3, "kind": "ring", "ring": ring,
        "truncated": False}, {"proc": 0, "line_no": 4, "kind": "ring",
        "ring": list(range(100)), "truncated": True})  # fmt: skip
    assert q(con, "SELECT * FROM nccl_world(1)") == [(64,)]


def test_proc_ranks_by_each_source(con):
    procs(con, ("nodeA", 1), ("nodeA", 2), ("nodeB", 3), ("nodeB", 4), ("nodeC", 5),
          ("nodeD", 9), tag_ranks={2: 7, 4: 6})  # fmt: skip
    con.execute("INSERT INTO ranks (run_id, rank, host, pid, world_size) VALUES "
                "(1, 5, 'NodeA.cluster.example', 1, 8), (1, 9, NULL, 9, 8)")  # fmt: skip
    comm(con, 1, 3, 8)
    comm(con, 2, 1, 8)  # the comm wins over its tag 7
    comm(con, 3, 2, 8, comm_id="0xc1")
    comm(con, 3, 4, 8, comm_id="0xc2", comm="0x2")  # two world comms disagree: tag 6
    got = q(con, "SELECT proc, rank, rank_source FROM nccl_proc_ranks(1) ORDER BY proc")
    assert got == [(0, 5, "host_pid"), (1, 3, "comm_rank"), (2, 1, "comm_rank"),
                   (3, None, None), (4, 6, "launcher_tag"), (5, 9, "host_pid")]  # fmt: skip
    cover = q(con, "SELECT rank, has_log, n_processes, in_trace FROM nccl_rank_coverage(1)")
    assert [r[0] for r in cover if r[1]] == [1, 3, 5, 6, 9]
    assert (0, False, 0, False) in cover and (9, True, 1, True) in cover
    assert len(cover) == 9


def test_versions_with_and_without_ranks(con):
    procs(con, ("a", 1), ("a", 2), ("b", 3), tag_ranks={0: 0, 1: 1, 2: 2},
          versions={0: "2.18.3", 1: "2.18.3", 2: "2.19.3"})  # fmt: skip
    put(con, "nccl_files", {"versions": ["2.18.3", "2.19.3", "2.9.6"]},
        {"file_id": 2, "versions": ["2.18.3"]})  # fmt: skip
    assert q(con, "SELECT * FROM nccl_versions(1)") == [
        ("2.9.6", [], 0, 1), ("2.18.3", [0, 1], 2, 2), ("2.19.3", [2], 1, 1)]  # fmt: skip


def _two_hosts(con):
    procs(con, ("a", 1), ("a", 2), ("b", 3))
    comm(con, 0, 0, 3)
    comm(con, 1, 1, 3)
    comm(con, 2, 2, 3)


def conn(con, proc, src, dst, transport, direction=None, gdr=None, line=1, ch=0):
    peer = src if direction == "receive" else dst
    put(con, "nccl_connections", {"proc": proc, "comm": "0x1", "line_no": line, "channel": ch,
        "src": src, "dst": dst, "peer": peer, "direction": direction, "transport": transport,
        "via": transport + ("/0/GDRDMA" if gdr else "/0"), "gdr": gdr})  # fmt: skip


def test_connection_scopes_from_hosts_and_from_transport(con):
    _two_hosts(con)
    conn(con, 0, 0, 1, "P2P/IPC", line=5)
    conn(con, 1, 1, 2, "NET/IB", "send", True, line=6)
    conn(con, 2, 1, 2, "NET/IB", "receive", False, line=7)
    conn(con, 0, 0, 1, "NET/Socket", "send", False, line=8)  # NET within a node
    conn(con, 2, 2, 5, "SHM", line=9)  # peer 5 has no log
    got = q(con, "SELECT line_no, own_rank, peer_host, scope, scope_source "
                 "FROM nccl_connection_scopes(1) ORDER BY line_no")  # fmt: skip
    assert got == [(5, 0, "a", "intra-node", "hosts"), (6, 1, "b", "inter-node", "hosts"),
                   (7, 2, "a", "inter-node", "hosts"), (8, 0, "a", "intra-node", "hosts"),
                   (9, 2, None, "intra-node", "transport")]  # fmt: skip
    got = q(con, "SELECT * EXCLUDE (as_printed) FROM nccl_transports(1)")
    assert got == [
        ("intra-node", "NET/Socket", 1, 1, 0, "hosts"), ("intra-node", "P2P/IPC", 1, 1, 0, "hosts"),
        ("intra-node", "SHM", 1, 1, 0, "transport"), ("inter-node", "NET/IB", 2, 2, 1, "hosts"),
    ]  # fmt: skip
    printed = q(con, "SELECT as_printed FROM nccl_transports(1) WHERE transport = 'NET/IB'")
    assert sorted(printed[0][0]) == ["NET/IB/N", "NET/IB/N/GDRDMA"]


def _net(con, kind, device, line):
    put(con, "nccl_network", {"proc": 0, "line_no": line, "kind": kind, "device": device})


# name: (hosts of the processes, nNodes of the comm, connections (src, dst, transport),
#        nccl_network rows (kind, device)) -> (inter_node, basis, network, network_basis)
INTER_NODE_CASES = {
    "no_process": ([], None, [], [], (None, None, None, None)),
    "one_host": (["a", "a"], None, [(0, 1, "NET/IB")], [("network", "IB")],
                 (False, "one_host", None, None)),
    "two_hosts_chosen": (["a", "b"], None, [(0, 1, "P2P/IPC")], [("network", "IBext")],
                         (True, "hosts", "IBext", "chosen")),
    "two_hosts_connection_wins": (["a", "b"], None, [(0, 2, "NET/Socket")], [("network", "IB")],
                                  (True, "hosts", "Socket", "connections")),
    "nodes": (["a"], 2, [], [("ib", "mlx5_0")], (True, "nodes", "IB", "devices")),
    "unknown_peer": (["a"], None, [(0, 7, "NET/AWS Libfabric")], [],
                     (True, "connections", "AWS Libfabric", "connections")),
    "sockets_listed": (["a", "b"], None, [], [("socket", "eth0")],
                       (True, "hosts", "Socket", "devices")),
}  # fmt: skip


@pytest.mark.parametrize("case", list(INTER_NODE_CASES))
def test_inter_node(con, case):
    hosts, nodes, conns, nets, want = INTER_NODE_CASES[case]
    procs(con, *[(h, i + 1) for i, h in enumerate(hosts)])
    for i in range(len(hosts)):
        comm(con, i, i, 3, n_nodes=nodes)
    for line, (src, dst, transport) in enumerate(conns, 20):
        conn(con, 0, src, dst, transport, "send", False, line=line)
        con.execute("UPDATE nccl_connections SET net = ? WHERE line_no = ?",
                    [transport.removeprefix("NET/") if transport.startswith("NET/") else None,
                     line])  # fmt: skip
    for line, (kind, device) in enumerate(nets, 40):
        _net(con, kind, device, line)
    assert q(con, "SELECT * FROM nccl_inter_node(1)") == [want]


GDR_CASES = {
    "one_gdr_connection": (
        [("conn", "NET/IB", False, 3), ("conn", "NET/IB", True, 4)], (True, "connections", 4)),
    "no_gdr_connection": ([("conn", "NET/IB", False, 3)], (False, "connections", 3)),
    "sockets_do_not_count": (
        [("conn", "NET/Socket", False, 3), ("cap", None, True, 2)], (True, "capability", 2)),
    # 2.27 on one host (real log 025): every HCA says `GPU Direct RDMA Disabled`, the ring
    # line says `use ring PXN 0 GDR 1`; the HCAs decide.
    "capability_over_ring_flag": (
        [("ring", None, 1, 7), ("cap", None, False, 2)], (False, "capability", 2)),
    "ring_flag": ([("ring", None, 1, 7)], (True, "ring_gdr", 7)),
    "capability_off": ([("cap", None, False, 2)], (False, "capability", 2)),
    "nothing": ([], None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(GDR_CASES))
def test_gdr(con, case):
    procs(con, ("a", 1))
    comm(con, 0, 0, 2)
    rows, want = GDR_CASES[case]
    for kind, transport, flag, line in rows:
        if kind == "conn":
            conn(con, 0, 0, 1, transport, "send", flag, line=line)
        elif kind == "ring":
            con.execute(
                f"UPDATE nccl_communicators SET ring_gdr = {flag}, ring_pxn = 0, line_no = {line}"
            )
        else:
            put(con, "nccl_network", {"proc": 0, "line_no": line, "kind": "gdr", "enabled": flag,
                                      "detail": "GPU Direct RDMA ..."})  # fmt: skip
    got = q(con, "SELECT gdr, basis, line_no FROM nccl_gdr(1)")
    assert got == ([] if want is None else [want])


TCP_CASES = {
    "rdma_devices": ({"ib": True}, True, "rdma_devices"),
    "ib_disabled": ({"env": ("NCCL_IB_DISABLE", "1")}, True, "ib_disabled"),
    "net_forced": ({"env": ("NCCL_NET", "Socket")}, True, "net_forced"),
    "no_ib_device": ({"no_ib": True}, True, "no_ib_device"),
    "no_rdma_seen": ({}, True, "no_rdma_seen"),
    "one_host_only": ({"single": True}, False, None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TCP_CASES))
def test_tcp_fallback(con, case):
    hints, detected, reason = TCP_CASES[case]
    if hints.get("single"):
        procs(con, ("a", 1), ("a", 2))
    else:
        _two_hosts(con)
    put(con, "nccl_network", {"proc": 0, "line_no": 4, "kind": "network", "device": "Socket"})
    if hints.get("ib"):
        put(con, "nccl_network", {"proc": 0, "line_no": 2, "kind": "ib", "device": "mlx5_0"})
    if hints.get("no_ib"):
        put(con, "nccl_network", {"proc": 0, "line_no": 2, "kind": "no_ib"})
    if "env" in hints:
        put(
            con,
            "nccl_env",
            {"proc": 0, "line_no": 1, "name": hints["env"][0], "value": hints["env"][1]},
        )
    got = q(con, "SELECT detected, reason, line_no, evidence FROM nccl_tcp_fallback(1)")
    want_line = 4 if detected else None
    assert got == [(detected, reason, want_line, "Using network Socket" if detected else None)]


def test_tcp_fallback_prefers_connection_evidence(con):
    _two_hosts(con)
    put(con, "nccl_network", {"proc": 0, "line_no": 4, "kind": "network", "device": "Socket"})
    conn(con, 1, 1, 2, "NET/Socket", "send", False, line=9)
    got = q(con, "SELECT detected, line_no, evidence FROM nccl_tcp_fallback(1)")
    assert got == [(True, 9, "channel 0: rank 1 -> rank 2 via NET/Socket/0")]


def _tree(con, proc, rank, up, down, ch=0):
    put(con, "nccl_channels", {"proc": proc, "comm": "0x1", "line_no": 30 + rank, "kind": "tree",
        "channel": ch, "tree_rank": rank, "tree_up": up, "tree_down": down})  # fmt: skip


def test_comm_shapes_rings_and_trees(con):
    procs(con, ("a", 1), ("a", 2), ("b", 3), ("b", 4))
    for p in range(4):
        comm(con, p, p, 4, n_nodes=2, local_ranks=2, connected=["rings", "trees"])
    put(con, "nccl_channels",
        {"proc": 0, "comm": "0x1", "line_no": 20, "kind": "ring", "channel": 1, "ring": [0, 2, 3, 1]},
        {"proc": 0, "comm": "0x1", "line_no": 21, "kind": "ring", "channel": 0, "ring": [0, 1, 2, 3],
         "truncated": False})  # fmt: skip
    _tree(con, 0, 0, -1, [1, 2])
    _tree(con, 1, 1, 0, [])
    _tree(con, 2, 2, 0, [3])
    _tree(con, 3, 3, 2, [])
    _tree(con, 3, 3, -1, [2], ch=1)
    assert q(con, "SELECT * FROM nccl_tree_depths(1) ORDER BY channel") == [
        ("0xc1", 0, 2, [0]), ("0xc1", 1, 0, [3])]  # fmt: skip
    got = q(con, "SELECT comm_key, nranks, n_nodes, n_processes, ranks_logged, ring_channels, "
                 "ring, rings_distinct, tree_channels, tree_roots, tree_depth, max_children, "
                 "nvls, collnet, connected FROM nccl_comm_shapes(1)")  # fmt: skip
    assert got == [("0xc1", 4, 2, 4, 4, 2, [0, 1, 2, 3], 2, 2, [0, 3], 2, 2, False, False,
                    ["rings", "trees"])]  # fmt: skip


def test_comm_keys_without_comm_id(con):
    procs(con, ("a", 1))
    comm(con, 0, 0, 4, comm_id=None, comm="0x1")
    comm(con, 0, 0, 4, comm_id=None, comm="0x2", line_no=50)
    comm(con, 0, 0, 2, comm_id=None, comm="0x3", line_no=60)
    got = q(con, "SELECT comm, comm_key FROM nccl_comm_keys(1) ORDER BY comm")
    assert got == [("0x1", "n4#1@1"), ("0x2", "n4#2@1"), ("0x3", "n2#1@1")]


def test_problem_counts(con):
    procs(con, ("a", 1), tag_ranks={0: 4})
    put(con, "nccl_warnings",
        {"proc": 0, "line_no": 5, "level": "WARN", "kind": "ib_completion", "src_file": "net_ib.cc",
         "src_line": 12, "message": "Got completion"},
        {"proc": 0, "line_no": 6, "level": "ERROR", "kind": "unwind", "chain": 1, "message": "a.cc:1 -> 6"},
        {"proc": 0, "line_no": 7, "level": "ERROR", "kind": "unwind", "chain": 1, "message": "b.cc:2 -> 6"},
        {"proc": 0, "line_no": 9, "level": "ERROR", "kind": "unwind", "chain": 2, "message": "c.cc:3 -> 3"},
        {"proc": None, "line_no": 3, "file_id": 2, "level": "ERROR", "kind": "torch_nccl_error",
         "message": "NCCL error in: x"},
        {"proc": 0, "line_no": 8, "level": "WARN", "kind": "other", "message": "later"},
        {"proc": 0, "line_no": 11, "level": "ERROR", "kind": "abort_unwind", "chain": 3, "message": "s.cc:64 -> 3"},
        {"proc": 0, "line_no": 12, "level": "ERROR", "kind": "abort_unwind", "chain": 3, "message": "s.cc:80 -> 3"},
        {"proc": 0, "line_no": 14, "level": "ERROR", "kind": "handled_unwind", "chain": 4, "message": "n.cc:708 -> 2"},
        {"proc": 0, "line_no": 20, "level": "ERROR", "kind": "handled_unwind", "chain": 5, "message": "n.cc:708 -> 2"},
    )  # fmt: skip
    got = q(con, "SELECT * FROM nccl_problem_counts(1) ORDER BY category")
    assert got == [
        ("abort", 1, 1, 11, 4, "abort_unwind", "s.cc:64 -> 3"),  # one chain, not an error
        ("error", 3, 1, 6, 4, "unwind", "a.cc:1 -> 6"),
        ("handled", 2, 1, 14, 4, "handled_unwind", "n.cc:708 -> 2"),  # two chains, not errors
        ("timeout", 0, None, None, None, None, None),
        ("warning", 2, 1, 5, 4, "ib_completion", "net_ib.cc:12 Got completion"),
    ]


def test_timeout_ranks_find_the_culprit(con):
    comm(con, 0, 0, 5)
    put(con, "nccl_timeouts",
        {"line_no": 1, "kind": "timeout", "rank": 0, "pg": "0", "seq": 10, "op_type": "ALLREDUCE"},
        {"line_no": 2, "kind": "timeout", "rank": 1, "pg": "0", "seq": 10, "op_type": "ALLREDUCE"},
        {"line_no": 3, "kind": "progress", "rank": 2, "pg": "0", "last_enqueued": 9, "last_completed": 9},
        {"line_no": 4, "kind": "progress", "rank": 3, "pg": "0", "last_enqueued": 10, "last_completed": 10},
        {"line_no": 5, "kind": "progress", "rank": 1, "pg": "0", "last_enqueued": 11, "last_completed": 9},
        {"line_no": 6, "kind": "progress", "rank": 2, "pg": "1", "last_enqueued": 50, "last_completed": 50},
    )  # fmt: skip
    got = q(con, "SELECT rank, status, last_enqueued FROM nccl_timeout_ranks(1)")
    assert got == [(0, "waiting", None), (1, "waiting", 11), (2, "not_enqueued", 9),
                   (3, "completed", 10), (4, "no_log", None)]  # fmt: skip


MS = 1_000_000  # ns


@pytest.mark.parametrize(
    "timeouts,comm_durs,expected",
    [
        ([600_000], [8 * MS, 40 * MS], (600_000, 40 * MS, False)),  # an earlier window
        ([600_000], [2 * MS, 600_011 * MS], (600_000, 600_011 * MS, True)),  # traced hang
        ([600_000, 60_000], [31_000 * MS], (60_000, 31_000 * MS, True)),  # shortest timeout
        ([600_000], [], (600_000, None, None)),  # no traces
        ([None], [5 * MS], (None, 5 * MS, None)),  # no timeout stated
    ],
)
def test_timeout_traced_by_the_longest_collective(con, timeouts, comm_durs, expected):
    put(con, "nccl_timeouts", *({"line_no": i, "kind": "timeout", "rank": 0, "timeout_ms": t}
                                for i, t in enumerate(timeouts)))  # fmt: skip
    for i, d in enumerate(comm_durs):
        con.execute(
            "INSERT INTO activities (run_id, rank, file_id, ts, dur, kind) "
            f"VALUES (1, 0, 3, {i}, {d}, 'comm'), (1, 0, 3, {i}, {10 * d}, 'compute')"
        )
    assert q(con, "SELECT * FROM nccl_timeout_traced(1)") == [expected]


def test_coll_sizes(con):
    procs(con, ("a", 1), ("a", 2), tag_ranks={0: 0, 1: 1})
    put(con, "nccl_colls",
        {"proc": 0, "line_no": 1, "op": "allreduce", "bytes": 100, "dtype": "float32"},
        {"proc": 1, "line_no": 2, "op": "allreduce", "bytes": 300, "dtype": "bfloat16"},
        {"proc": 1, "line_no": 3, "op": "allreduce", "bytes": 200, "dtype": "float32"},
        {"proc": 1, "line_no": 4, "op": "send", "bytes": None, "dtype": None},
    )  # fmt: skip
    assert q(con, "SELECT * FROM nccl_coll_sizes(1)") == [
        ("allreduce", 3, 2, 600, 100, 200.0, 300, ["bfloat16", "float32"]),
        ("send", 1, 1, None, None, None, None, None),
    ]  # fmt: skip


def test_coll_steps_align_by_order_and_size(con):
    procs(con, ("a", 1), tag_ranks={0: 0})
    con.execute("INSERT INTO steps VALUES (1, 9, 0, 1, 1000, 100), (1, 9, 0, 2, 1100, 100)")
    for ts, op, nbytes in ((1010, "allreduce", 100), (1020, "allreduce", 200),
                           (1030, "alltoall", 64), (1110, "reduce_scatter", 50)):  # fmt: skip
        con.execute(
            "INSERT INTO collectives (run_id, rank, file_id, ts, dur, launch_ts, op, in_bytes, "
            "out_bytes) VALUES (1, 0, 9, ?, 5, ?, ?, ?, ?)",
            [ts, ts, op, nbytes * 4 if op == "reduce_scatter" else nbytes, nbytes],
        )
    for i, (op, nbytes) in enumerate([("allreduce", 100), ("allreduce", 999), ("send", 8),
                                      ("allreduce", 100), ("allreduce", 200),
                                      ("reduce_scatter", 50), ("allreduce", 100)]):  # fmt: skip
        put(con, "nccl_colls", {"proc": 0, "line_no": 10 + i, "op": op, "bytes": nbytes})
    assert q(con, "SELECT * FROM nccl_coll_steps(1)") == [(0, 1, 2, 300), (0, 2, 1, 50)]


def test_coll_steps_need_a_full_match(con):
    procs(con, ("a", 1), tag_ranks={0: 0})
    con.execute("INSERT INTO steps VALUES (1, 9, 0, 1, 1000, 100)")
    con.execute("INSERT INTO collectives (run_id, rank, file_id, ts, dur, op, in_bytes) VALUES "
                "(1, 0, 9, 1010, 5, 'allreduce', 100), (1, 0, 9, 1020, 5, 'allgather', 10)")  # fmt: skip
    put(con, "nccl_colls", {"proc": 0, "line_no": 1, "op": "allreduce", "bytes": 100},
        {"proc": 0, "line_no": 2, "op": "allreduce", "bytes": 10})  # fmt: skip
    assert q(con, "SELECT * FROM nccl_coll_steps(1)") == []


def test_line_counts(con):
    assert q(con, "SELECT * FROM nccl_line_counts(1)") == [(0, 0, 0, 0, 0, 0, 0)]
    put(con, "nccl_files",
        {"lines_total": 10, "lines_nccl": 8, "lines_recognised": 6, "lines_unknown": 2,
         "lines_damaged": 1, "lines_torch": 3},
        {"file_id": 2, "lines_total": 5, "lines_nccl": 5, "lines_recognised": 5, "lines_unknown": 0,
         "lines_damaged": 0, "lines_torch": 0},
    )  # fmt: skip
    assert q(con, "SELECT * FROM nccl_line_counts(1)") == [(2, 15, 13, 11, 2, 1, 3)]


def test_arrow_shapes_match_the_ddl(store_con):
    """Every nccl_* table is (run_id, file_id, the parser's columns) with matching types."""
    duck = {"int32": "INTEGER", "int64": "BIGINT", "string": "VARCHAR", "double": "DOUBLE",
            "bool": "BOOLEAN", "list<item: int32>": "INTEGER[]",
            "list<item: string>": "VARCHAR[]"}  # fmt: skip
    for name, schema in SCHEMAS.items():
        cols = q(store_con, f"SELECT column_name, data_type FROM information_schema.columns "
                            f"WHERE table_name = '{name}' ORDER BY ordinal_position")  # fmt: skip
        assert cols[:2] == [("run_id", "INTEGER"), ("file_id", "INTEGER")], name
        assert cols[2:] == [(f.name, duck[str(f.type)]) for f in schema], name


# (case, ring rows as (channel, n_channels), ring_channels): NCCL's `Channel NN/MM` says MM
RING_COUNT_CASES = [
    ("every channel's line, MM printed", [(0, 2), (1, 2)], 2),
    # log 028's excerpt: `Channel 00/64 : 0` (line 28) to `Channel 22/64 : 0`, then other lines
    ("an excerpt stopping at channel 22 of 64 (log 028)", [(c, 64) for c in range(23)], 64),
    ("old lines without MM: the channels seen", [(0, None), (1, None), (2, None)], 3),
]  # fmt: skip


@pytest.mark.parametrize("case,rows,n", RING_COUNT_CASES, ids=[c[0] for c in RING_COUNT_CASES])
def test_ring_channels_count(con, case, rows, n):
    procs(con, ("a", 1))
    comm(con, 0, 0, 1)
    put(con, "nccl_channels", *({"proc": 0, "comm": "0x1", "line_no": 20 + c, "kind": "ring",
        "channel": c, "n_channels": m, "ring": [0]} for c, m in rows))  # fmt: skip
    assert q(con, "SELECT ring_channels FROM nccl_comm_shapes(1)") == [(n,)]
