"""Table-driven tests of single NCCL and PyTorch line shapes (constructed after nccl_logs.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from commwall.ingest.formats.nccl_log.parser import LogParser
from commwall.ingest.formats.nccl_log.prefix import outer
from commwall.ingest.formats.nccl_log.torch_lines import classify

P = "node01:4100:4100 [0] NCCL INFO "


def run(*lines: str) -> dict[str, list[dict]]:
    """Parse lines in memory; every table as rows."""
    parser = LogParser(Path("mem.log"))
    parser.feed("".join(f"{s}\n" for s in lines).encode())
    parser.finish()
    out = {k: t.to_pylist() for k, t in parser.tables().items()}
    out["_count"] = [parser.count]
    return out


@pytest.mark.parametrize(
    "text,tag,tag_rank,ts",
    [
        ("[rank3]:", "[rank3]:", 3, None),
        ("3: ", "3:", 3, None),
        ("[1,5]<stdout>:", "[1,5]<stdout>:", 5, None),
        ("[12] ", "[12]", 12, None),
        ("[default0]:", "[default0]:", None, None),
        ("node01: ", "node01:", None, None),
        (
            "(RayTrainWorker pid=4100, ip=192.0.2.11) ",
            "(RayTrainWorker pid=4100, ip=192.0.2.11)",
            None,
            None,
        ),
        ("[2025-01-01 12:00:00] ", None, None, 1735732800 * 10**9),
        ("[rank2]:[2025-01-01 12:00:01.5] ", "[rank2]:", 2, 1735732801_500_000_000),
        ("| 2025-01-01T00:00:00.000Z | ", None, None, None),
        ("", None, None, None),
    ],
)
def test_outer_prefixes(text, tag, tag_rank, ts):
    o = outer(text)
    assert (o.tag, o.tag_rank, o.ts) == (tag, tag_rank, ts)


def test_core_prefix_variants():
    out = run(
        "node01:4100:4101 [0] 1234.567890 enqueue.cc:100 NCCL TRACE Ring 00 : 3 -> 0 -> 1",
        "node01:4100:4100 NCCL CALL ncclAllReduce(0x7f,0x7f,1024,7,0,0x55aa,0x55bb)",
        "node02.cluster.example.com:4200:4200 [1] NCCL INFO Using network IB",
        "node03:4300:4300 [2] init.cc:10 NCCL WARN Invalid NCCL_NTHREADS 100",
    )
    assert out["_count"][0]["recognised"] == 4
    assert [p["host"] for p in out["nccl_processes"]] == [
        "node01",
        "node02.cluster.example.com",
        "node03",
    ]
    assert out["nccl_warnings"][0]["src_file"] == "init.cc"


NET = {
    "NET/IB : Using [0]={[0] mlx5_0:1/RoCE, [1] mlx5_1:1/RoCE} [1]mlx5_2:1/IB/SHARP [RO]; OOB eth0:192.0.2.11<0>": [
        ("ib", 0, "mlx5_0", 1, "RoCE"), ("ib", 1, "mlx5_1", 1, "RoCE"), ("ib", 1, "mlx5_2", 1, "IB")],
    "NET/Socket : Using [0]eth0:192.0.2.11<0> [1]eth1:fe80::1%eth1<0>": [
        ("socket", 0, "eth0", 0, None), ("socket", 1, "eth1", 0, None)],
    "Bootstrap: Using ib0:192.0.2.11<0>": [("bootstrap", None, "ib0", 0, None)],
    "NET/IB : No device found.": [("no_ib", None, None, None, None)],
    "NET/Socket: Using 2 threads and 8 sockets per thread": [("socket_threads", 2, None, None, None)],
    "Assigned GIN plugin IBext_v8 to comm": [("plugin", None, "IBext_v8", None, None)],
    "Assigned NET plugin AWS Libfabric to comm": [("plugin", None, "AWS Libfabric", None, None)],
    "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation": [
        ("plugin", None, None, None, None)],
    "TUNER/Plugin: Using tuner plugin example": [("plugin", None, "tuner", None, None)],
    "NET/OFI Selected Provider is efa (found 4 nics)": [("ofi", 4, "efa", None, None)],
    "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'": [("gdr", None, None, None, None)],
    "Using network IBext_v8": [("network", None, "IBext_v8", None, None)],
}  # fmt: skip


@pytest.mark.parametrize("msg", list(NET))
def test_network_lines(msg):
    rows = run(P + msg)["nccl_network"]
    assert [(r["kind"], r["idx"], r["device"], r["port"], r["link"]) for r in rows] == NET[msg]


def test_gdr_flag_and_relaxed_ordering():
    out = run(
        P + "GPU Direct RDMA Enabled for GPU 1b000 / HCA 0 (distance 4 <= 4), read 0",
        P + "NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'",
        P + "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:192.0.2.11<0>",
    )["nccl_network"]
    assert [r["enabled"] for r in out[:2]] == [True, False]
    assert out[2]["detail"] == "relaxed ordering" and out[2]["address"] == "eth0:192.0.2.11"


VIAS = {
    "NET/IB/0(7)/GDRDMA": ("NET/IB", "IB", 0, 7, True, False),
    "NET/IB/1/GDRDMA(PCI)/Shared": ("NET/IB", "IB", 1, None, True, True),
    "NET/AWS Libfabric/3/GDRDMA": ("NET/AWS Libfabric", "AWS Libfabric", 3, None, True, False),
    "NET/Socket/0": ("NET/Socket", "Socket", 0, None, False, False),
    "P2P/CUMEM/CE": ("P2P/CUMEM", None, None, None, None, False),
    "P2P/direct pointer/read": ("P2P/direct", None, None, None, None, False),
    "P2P/indirect/2[1c000]": ("P2P/indirect", None, None, None, None, False),
    "P2P/MNNVL": ("P2P/MNNVL", None, None, None, None, False),
    "SHM/CE/direct": ("SHM", None, None, None, None, False),
    "direct shared memory": ("SHM", None, None, None, None, False),
}  # fmt: skip


@pytest.mark.parametrize("via", list(VIAS))
def test_connection_transports(via):
    rows = run(P + f"Channel 01/1 : 3[1c000] -> 0[0] [receive] via {via}")["nccl_connections"]
    r = rows[0]
    assert (r["channel"], r["conn"], r["src"], r["dst"], r["peer"], r["direction"]) == (
        1,
        1,
        3,
        0,
        3,
        "receive",
    )
    assert (r["transport"], r["net"], r["net_dev"], r["proxy_rank"], r["gdr"], r["shared"]) == VIAS[
        via
    ]


def test_collnet_and_legacy_ring_connections():
    out = run(
        P + "CollNet 00/1 : 2 [send] via COLLNET/SHARP/0/GDRDMA",
        P + "Ring 00 : 15 -> 0 [receive] via NET/IB/0/GDRDMA",
        P + "Ring 01 : 0[1b000] -> 1[1c000] via P2P/IPC",
    )["nccl_connections"]
    assert [(r["transport"], r["src"], r["dst"], r["conn"], r["gdr"]) for r in out] == [
        ("COLLNET/SHARP", 2, None, 1, True), ("NET/IB", 15, 0, None, True),
        ("P2P/IPC", 0, 1, None, None),
    ]  # fmt: skip


COMMS = {
    "comm 0x55aa00000000 rank 0 nranks 16 cudaDev 0 nvmlDev 0 - Init COMPLETE":
        dict(rank=0, nranks=16, nvml_dev=0, bus_id=None, status="Init COMPLETE"),
    "comm 0x55aa00000000 rank 3 nranks 16 cudaDev 3 busId 3e000 - Abort COMPLETE":
        dict(rank=3, bus_id="3e000", status="Abort COMPLETE"),
    "ncclCommSplit comm 0x55aa00000000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 1c000 parent "
    "0x55aa11110000 splitCount 1 color 0 key 1- Init START":
        dict(api="ncclCommSplit", parent="0x55aa11110000", status="Init START", comm_id=None),
    "[Rank 4] ncclCommInitRankConfig comm 0x55aa00000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
    "busId 1b000 parent 0x55aa11110000 childCount 2 color 1 key 0 commId 0xabc - Init START":
        dict(api="ncclCommInitRankConfig", comm_id="0xabc", nranks=2),
}  # fmt: skip


@pytest.mark.parametrize("msg", list(COMMS))
def test_communicator_lines(msg):
    rows = run(P + msg)["nccl_communicators"]
    assert len(rows) == 1
    for k, val in COMMS[msg].items():
        assert rows[0][k] == val, k


def test_communicator_companions_and_reuse():
    c = "0x55aa00000000"
    out = run(
        P + f"comm {c} rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE",
        P + f"comm {c} rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 1",
        P + "Init timings: rank 0 nranks 2 total 1.25 (kernels 0.10)",
        P + f"comm {c} rank 0 nranks 2 cudaDev 0 busId 1b000 - Destroy COMPLETE",
        P + f"comm {c} rank 1 nranks 4 cudaDev 0 busId 1b000 - Init COMPLETE",
    )["nccl_communicators"]
    assert [(r["rank"], r["nranks"], r["status"]) for r in out] == [
        (0, 2, "Destroy COMPLETE"), (1, 4, "Init COMPLETE")]  # fmt: skip
    assert (out[0]["n_nodes"], out[0]["mnnvl"], out[0]["init_seconds"]) == (1, True, 1.25)


def test_topology_lines_wait_for_their_communicator():
    """Before 2.18 topology lines precede the only comm line: they are held until it."""
    c = "0x55aa00000000"
    out = run(
        P + "Channel 00/02 :    0   1",
        P + "Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1",
        P + "NVLS multicast support is not available on dev 0",
        P
        + "32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
        P + "Connected collnet + chain",
        P + f"comm {c} rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE",
    )
    assert {r["comm"] for r in out["nccl_channels"]} == {c}
    comm = out["nccl_communicators"][0]
    assert (comm["nvls_support"], comm["coll_channels"], comm["collnet_channels"]) == (
        False,
        32,
        32,
    )
    assert comm["connected"] == ["collnet + chain"]
    trees = [
        (r["channel"], r["tree_up"], r["tree_down"])
        for r in out["nccl_channels"]
        if r["kind"] == "tree"
    ]
    assert trees == [(0, -1, [1]), (1, 1, [])]


def test_tree_shapes_of_old_versions():
    out = run(
        P + "Trees [0] -1->0->1/2/-1",
        P + "Trees [0] 1/2/-1->0->-1|-1->0->1/2/-1",
    )["nccl_channels"]
    assert [(r["tree_up"], r["tree_down"]) for r in out] == [(-1, [1, 2]), (-1, [1, 2])]


TUNING = {
    "1048576 Bytes -> Algo 0 proto 1 time 12.500000": (None, 1048576, "TREE", "LL128", 12.5, None),
    "AllGather: 4096 Bytes -> Algo 6 proto 0 time 3.000000": ("AllGather", 4096, "PAT", "LL", 3.0, None),
    "AllReduce: 64 Bytes -> Algo NVLS_TREE proto LL channel{Lo..Hi}={0..3}":
        ("AllReduce", 64, "NVLS_TREE", "LL", None, 3),
}  # fmt: skip


@pytest.mark.parametrize("msg", list(TUNING))
def test_tuning_choices(msg):
    r = run(P + msg)["nccl_tuning"][0]
    assert (r["func"], r["bytes"], r["algo"], r["proto"], r["time_us"], r["channel_hi"]) == TUNING[
        msg
    ]


def test_env_unwind_and_warn_kinds():
    out = run(
        P + "NCCL_IB_DISABLE set by environment to 1.",
        P + "NCCL_ALGO set to Ring",
        "",
        "node01:4100:4190 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node02<43210>",
        "node01:4100:4190 [0] NCCL INFO misc/socket.cc:750 -> 6",
        "node01:4100:4190 [0] NCCL INFO transport/net_socket.cc:474 -> 6 [Async thread]",
        "node01:4100:4191 [0] NCCL INFO proxy.cc:1000 -> 3 [Service thread]",
        "node01:4100:4100 [0] enqueue.cc:1500 NCCL WARN Cuda failure 'out of memory'",
    )
    assert [(e["name"], e["value"]) for e in out["nccl_env"]] == [
        ("NCCL_IB_DISABLE", "1"), ("NCCL_ALGO", "Ring")]  # fmt: skip
    w = out["nccl_warnings"]
    assert [(x["level"], x["kind"], x["code"], x["chain"], x["thread"]) for x in w] == [
        ("WARN", "socket_closed", None, None, None),
        ("ERROR", "unwind", 6, 1, None),
        ("ERROR", "unwind", 6, 1, "Async thread"),
        ("ERROR", "unwind", 3, 2, "Service thread"),
        ("WARN", "cuda_failure", None, None, None),
    ]  # fmt: skip


def test_error_returns_unwinding_an_abort():
    """Only the chain a thread logs right after its own `abort called` unwinds the abort (the
    shape of 020, lines 919-922); another thread's chain, or a later one, is an error."""
    out = run(
        "h:9:11 [1] NCCL INFO socketProgressOpt: abort called",
        "h:9:12 [1] NCCL INFO proxy.cc:10 -> 3",
        "h:9:11 [1] NCCL INFO misc/socket.cc:64 -> 3",
        "h:9:11 [1] NCCL INFO misc/socket.cc:80 -> 3",
        "h:9:11 [1] NCCL INFO Connected all rings",
        "h:9:11 [1] NCCL INFO misc/socket.cc:64 -> 3",
    )
    w = out["nccl_warnings"]
    assert [(x["kind"], x["chain"], x["tid"]) for x in w] == [
        ("unwind", 1, 12),
        ("abort_unwind", 2, 11),
        ("abort_unwind", 2, 11),
        ("unwind", 3, 11),
    ]


# (case, lines after P's process "h:9", kinds of the error-return rows in file order)
HANDLED_CASES = [
    ("a lone return between two INFO lines of its thread: handled (RCCL 018, lines 160-162)",
     ["h:9:11 [3] NCCL INFO Found /sys/kernel/mm/memory_peers/amdkfd/version",
      "h:9:11 [3] NCCL INFO transport/net_ib.cc:708 -> 2",
      "h:9:11 [3] NCCL INFO Using network IB"], ["handled_unwind"]),
    ("a WARN of the thread before it: an error",
     ["h:9:11 [0] net.cc:5 NCCL WARN NET/IB : bad", "h:9:11 [0] NCCL INFO net.cc:9 -> 2",
      "h:9:11 [0] NCCL INFO Using network IB"], ["unwind"]),
    ("a WARN in another thread, the chain going on in the caller's (009, lines 1321-1324)",
     ["h:9:12 [0] sharp.c:288 NCCL WARN NET/IB :SHARP coll init error",
      "h:9:12 [0] NCCL INFO include/coll_net.h:21 -> 3", "h:9:11 [0] NCCL INFO transport.cc:222 -> 2",
      "h:9:11 [0] NCCL INFO Connected all rings"], ["unwind", "unwind"]),
    ("the thread's next line is a WARN: an error",
     ["h:9:11 [0] NCCL INFO Found x", "h:9:11 [0] NCCL INFO a.cc:1 -> 2",
      "h:9:11 [0] b.cc:2 NCCL WARN failed"], ["unwind"]),
    ("the log ends in the chain: an error",
     ["h:9:11 [0] NCCL INFO Found x", "h:9:11 [0] NCCL INFO a.cc:1 -> 2",
      "h:9:11 [0] NCCL INFO b.cc:3 -> 2"], ["unwind", "unwind"]),
    ("a WARN of the process, another thread's line, then the caller's chain: an error",
     ["h:9:11 [0] NCCL INFO Found x", "h:9:12 [0] sharp.c:288 NCCL WARN SHARP coll init error",
      "h:9:13 [0] NCCL INFO Using network IB", "h:9:11 [0] NCCL INFO coll_net.h:21 -> 3",
      "h:9:11 [0] NCCL INFO Connected all rings"], ["unwind"]),
]  # fmt: skip


@pytest.mark.parametrize("case,lines,kinds", HANDLED_CASES, ids=[c[0] for c in HANDLED_CASES])
def test_error_returns_a_thread_went_on_from(case, lines, kinds):
    w = run(*lines)["nccl_warnings"]
    assert [x["kind"] for x in w if x["level"] == "ERROR"] == kinds
    assert [x["line_no"] for x in w] == sorted(x["line_no"] for x in w)


def test_a_coll_line_read_late_settles_no_chain(monkeypatch):
    """COLL lines the fast path rejects are read after the lines that follow them (the regex
    path, at the chunk's landing): such a line must not end a later chain as handled."""
    from pyarrow import RecordBatch

    from commwall.ingest.formats.nccl_log import parser as parser_module
    from commwall.ingest.formats.nccl_log import tables

    empty = RecordBatch.from_pylist([], schema=tables.SCHEMAS["nccl_colls"])
    monkeypatch.setattr(
        parser_module, "parse_tails", lambda tails, *_: (empty, list(range(len(tails))))
    )
    lines = [
        "h:9:11 [0] NCCL INFO Found x",
        "h:9:11 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 "
        "op 0 root 0 comm 0x5 [nranks=2] stream 0x9",
        "h:9:11 [0] NCCL INFO a.cc:1 -> 2",
    ]
    for ending in ([], ["h:9:11 [0] b.cc:2 NCCL WARN failed"]):
        w = run(*lines, *ending)["nccl_warnings"]
        assert [x["kind"] for x in w if x["level"] == "ERROR"] == ["unwind"], ending


def test_a_process_glued_to_other_output_before_its_own_lines():
    out = run(
        "   64    16     float     sumnode-7:4336:4338 [5] NCCL INFO Connected all rings",
        "node-7:4336:4339 [7] NCCL INFO Connected all rings",
        "node-7:4337:4340 [0] NCCL INFO Connected all rings",
    )
    assert [(p["host"], p["pid"], p["n_lines"]) for p in out["nccl_processes"]] == [
        ("node-7", 4336, 2),
        ("node-7", 4337, 1),
    ]


def test_unknown_benign_and_damaged_lines():
    out = run(
        P + "Setting affinity for GPU 0 to ffff,ffffffff",
        P + "Something brand new 1 2 3",
        "garbage before NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        "NCCL_DEBUG=INFO is set",
    )
    c = out["_count"][0]
    assert (c["nccl"], c["recognised"], c["unknown"], c["damaged"]) == (3, 1, 2, 1)
    assert [u["kind"] for u in out["nccl_unknown"]] == ["unknown", "damaged"]


TORCH = {
    "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=12, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800123 milliseconds "
    "before timing out.": ("timeout", dict(seq=12, op_type="BROADCAST", numel_in=None, ran_ms=1800123)),
    "E1119 08:01:02.123456 140000 ProcessGroupNCCL.cpp:1234] [PG 2 Rank 5] Timeout at NCCL work: "
    "77, last enqueued NCCL work: 77, last completed NCCL work: 76.":
        ("progress", dict(seq=77, last_enqueued=77, last_completed=76, pg="2", rank=None)),
    "[rank0]:[E305 01:02:03.000000 ProcessGroupNCCL.cpp:1600] [PG ID 1 PG GUID 1(mesh_dp) Rank 0] "
    "Process group watchdog thread terminated with exception: failure detected by watchdog at "
    "work sequence id: 9 PG status: last enqueued work: 9, last completed work: 8":
        ("progress", dict(seq=9, last_enqueued=9, pg="1", pg_desc="mesh_dp", rank=0, time_text="305 01:02:03.000000")),
    "[rank1]:[F1104 10:25:42.000000 ProcessGroupNCCL.cpp:1400] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 1] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 "
    "seconds without making progress in monitoring enqueued collectives.":
        ("heartbeat", dict(ran_ms=480000, rank=1)),
    "[rank2]:[E1104 10:15:43.000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 2] First PG on this rank that detected no heartbeat, preparing to dump debug info.":
        ("dump", dict(rank=2)),
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), "
    "NCCL version 2.19.3": ("error", dict(version="2.19.3")),
    "Test NCCL failure common.cu:1000 'remote process exited or there was a network error'":
        ("error", dict(what="remote process exited or there was a network error")),
    # the rank that died instead of reaching the collective (029, line 5136)
    "7: [rank7]: RuntimeError: Time out when prefetcher gets embed data at 600 seconds.":
        ("crash", dict(rank=7, rank_source="header")),
    "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator":
        ("crash", dict(rank=3)),
}  # fmt: skip


@pytest.mark.parametrize("line", list(TORCH))
def test_pytorch_lines(line):
    t = classify(line)
    kind, fields = TORCH[line]
    assert t is not None and t.kind == kind
    for k, val in fields.items():
        assert t.fields.get(k) == val, k


def test_pytorch_lines_land_in_tables():
    lines = list(TORCH)
    out = run(*lines)
    assert [r["kind"] for r in out["nccl_timeouts"]] == [
        "timeout",
        "progress",
        "progress",
        "heartbeat",
        "dump",
        "crash",
        "crash",
    ]
    errors = [(w["kind"], w["src_line"]) for w in out["nccl_warnings"]]
    assert errors == [("torch_nccl_error", 1970), ("test_failure", 1000)]
    assert out["nccl_files"][0]["versions"] == ["2.19.3"]
    assert out["_count"][0]["torch"] == len(lines)
    # a Python exception is PyTorch's line, not NCCL's: it is not among the NCCL lines
    assert out["_count"][0]["nccl"] == len(lines) - 1


@pytest.mark.parametrize(
    "line",
    [
        "[rank0]: Traceback (most recent call last):",
        '[rank7]:   File "/workspace/gnn/train.py", line 1236, in <module>',
        "[rank7]: _queue.Empty",  # no message: a link of the chain, not the fatal one
        "ValueError: no rank prefix",
    ],
)
def test_lines_that_are_no_fatal_exception(line):
    assert classify(line) is None


@pytest.mark.parametrize(
    "lines,expected",
    [
        # srun --label: the exception's what() and NCCL's last error two lines below it
        (
            ["3: terminate called after throwing an instance of 'c10::DistBackendError'",
             "3:   what():  NCCL error in: NCCLUtils.cpp:77, invalid usage (run with "
             "NCCL_DEBUG=WARN for details), NCCL version 2.25.1",
             "3: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
             "3: Last error:",
             "3: NET/IB : Requested properties for vNic 8, only 8 vNics have been created"],
            [("crash", 3, "launcher_tag", "NCCL error in: NCCLUtils.cpp:77, invalid usage (run "
              "with NCCL_DEBUG=WARN for details), NCCL version 2.25.1"),
             ("last_error", 3, "launcher_tag",
              "NET/IB : Requested properties for vNic 8, only 8 vNics have been created")],
        ),
        # PyTorch's own rank prefix names the rank for sure
        (
            ["[rank5]:   what():  NCCL error in: x.cpp:1, unhandled system error",
             "[rank5]: Last error:", "[rank5]: socketPollConnect: Connect returned Connection refused"],
            [("crash", 5, "header", "NCCL error in: x.cpp:1, unhandled system error"),
             ("last_error", 5, "header", "socketPollConnect: Connect returned Connection refused")],
        ),
        # the next line is another rank's: no last error is read from it
        (
            ["2: Last error:", "4: NET/IB : something of rank 4"],
            [],
        ),
        # no tag at all: the crash is kept, of no known rank
        (
            ["  what():  NCCL error in: x.cpp:1, internal error", "Last error:", "bad thing"],
            [("crash", None, None, "NCCL error in: x.cpp:1, internal error"),
             ("last_error", None, None, "bad thing")],
        ),
    ],
)  # fmt: skip
def test_the_error_a_rank_died_of_and_nccls_last_error(lines, expected):
    out = run(*lines)
    got = [
        (r["kind"], r["rank"], r["rank_source"], r["message"])
        for r in out["nccl_timeouts"]
        if r["kind"] in ("crash", "last_error")
    ]
    assert got == expected
    # the what() is still counted among the NCCL errors
    n_what = sum("what():" in s and "NCCL error" in s for s in lines)
    assert sum(w["kind"] == "torch_nccl_error" for w in out["nccl_warnings"]) == n_what
