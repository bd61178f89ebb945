"""Line shapes found in NCCL logs as users publish them (issue: NCCL logs in the wild), one
small log each, written here line by line with what each line means: version lines outside
init, networks named only at init, NET inside one host, watchdog timeouts inside crash
output, glued or wrapped, old warnings without the word NCCL, prefix-stripped lines."""

from __future__ import annotations

import pytest
from test_nccl_lines import run

from commwall.analysis.db import load_modules
from commwall.analysis.nccl.section import nccl_section
from commwall.ingest import store


@pytest.fixture
def section(tmp_path):
    """Ingest lines as one log and return the run's `nccl` report section."""

    def make(*lines: str) -> dict:
        p = tmp_path / "job.log"
        p.write_text("".join(f"{s}\n" for s in lines))
        con = store.connect(tmp_path / "s.duckdb")
        try:
            summary = store.ingest(con, "job", [p])
            assert summary.committed and not summary.failed
            load_modules(con)
            return nccl_section(con, summary.run_id)
        finally:
            con.close()

    return make


A = "nodeA:100:100 [0] NCCL INFO "
B = "nodeB:200:200 [0] NCCL INFO "


def test_ras_client_version_line():
    out = run("NCCL version 2.26.2 compiled with CUDA 12.8", A + "cudaDriverVersion 12080")
    assert out["nccl_files"][0]["versions"] == ["2.26.2"]
    assert out["_count"][0]["recognised"] == 2


def test_rccl_version_line():
    out = run("mi300x-01:399:399 [0] NCCL INFO RCCL version : 2.22.3-HEAD:271856d")
    assert out["nccl_processes"][0]["nccl_version"] == "2.22.3"
    assert out["nccl_processes"][0]["version_suffix"] == "-HEAD:271856d"


def test_network_named_only_at_init(section):
    # 2.4/2.5: no `Using network`, no NET connection lines; the IB devices name the network.
    s = section(
        A + "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
        B + "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.2<0>",
    )
    assert s["inter_node"] == {"value": True, "basis": "hosts", "network": "IB",
                               "network_basis": "devices"}  # fmt: skip


def test_network_named_by_using_network_only(section):
    s = section(A + "Using network AWS Libfabric", B + "Using network AWS Libfabric")
    assert (s["inter_node"]["value"], s["inter_node"]["network"]) == (True, "AWS Libfabric")


def test_net_between_ranks_of_one_host_is_not_inter_node(section):
    s = section(
        A + "comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0xaa - Init START",
        "nodeA:101:101 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2000 commId 0xaa"
        " - Init START",
        A + "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0",
        A + "comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0xaa - Init COMPLETE",
        "nodeA:101:101 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2000 commId 0xaa"
        " - Init COMPLETE",
    )
    assert s["inter_node"]["value"] is False
    assert [(t["scope"], t["transport"]) for t in s["transports"]] == [("intra-node", "NET/IB")]


TIMEOUT = (
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out."
)


@pytest.mark.parametrize(
    "lines",
    [
        # the exception text of a crashed process
        ["terminate called after throwing an instance of 'c10::DistBackendError'",
         f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread "
         f"terminated with exception: [Rank 3] {TIMEOUT}"],
        # glued to the end of another program's output (no newline before it)
        [f"epoch 3 loss 0.25[rank3]:[E1104 10:15:42.1 ProcessGroupNCCL.cpp:616] [Rank 3] {TIMEOUT}"],
        # hard-wrapped mid-word by a terminal
        [f"[rank3]:[E1104 10:15:42.1 ProcessGroupNCCL.cpp:616] [Rank 3] {TIMEOUT[:40]}",
         TIMEOUT[40:]],
        # wrapped at a space by a web page
        [f"[rank3]:[E1104 10:15:42.1 ProcessGroupNCCL.cpp:616] [Rank 3] {TIMEOUT[:78].rstrip()}",
         TIMEOUT[78:]],
        # wrapped inside the word Watchdog: the first half is a c10d line of no known kind
        [f"[rank3]:[E1104 10:15:42.1 ProcessGroupNCCL.cpp:616] [Rank 3] {TIMEOUT[:5]}",
         TIMEOUT[5:]],
    ],
    ids=["what", "glued", "wrapped_mid_word", "wrapped_at_space", "wrapped_in_watchdog"],
)  # fmt: skip
def test_watchdog_timeout_wherever_it_is_printed(lines):
    out = run(*lines)
    timeouts = [t for t in out["nccl_timeouts"] if t["seq"] is not None]
    assert [(t["rank"], t["seq"], t["op_type"], t["timeout_ms"]) for t in timeouts] == [
        (3, 7, "ALLREDUCE", 600000)
    ]


def test_timeout_quoted_only_by_a_crash_is_reported(section):
    s = section(
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread "
        f"terminated with exception: [Rank 3] {TIMEOUT}",
    )
    assert s["timeouts"]["count"] == 1
    assert [(c["seq"], c["op_type"], c["waiting"]) for c in s["timeouts"]["collectives"]] == [
        (7, "ALLREDUCE", [3])
    ]


def test_wrapped_timeout_counts_both_lines():
    out = run(f"[rank3]:[E1104 10:15:42.1 ProcessGroupNCCL.cpp:616] [Rank 3] {TIMEOUT[:40]}",
              TIMEOUT[40:], "epoch 4")  # fmt: skip
    c = out["_count"][0]
    assert (c["nccl"], c["torch"], c["recognised"], c["unknown"]) == (2, 2, 2, 0)


def test_old_warning_without_the_word_nccl():
    out = run("node01:4100:4110 [2] transport/net_ib.cu:120 WARN NET/IB : Got completion with "
              "error 12, opcode 1, len 0, vendor err 129")  # fmt: skip
    (w,) = out["nccl_warnings"]
    assert (w["level"], w["src_file"], w["src_line"], w["kind"]) == (
        "WARN",
        "transport/net_ib.cu",
        120,
        "other",
    )


def test_prefix_stripped_lines():
    out = run(
        "[0] NCCL INFO 4096 Bytes -> Algo 1 proto 2 time 12.500000",
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        "text before NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",  # damaged: kept as such
    )
    (tune,) = out["nccl_tuning"]
    assert (tune["bytes"], tune["algo"], tune["proto"], tune["time_us"]) == (
        4096,
        "RING",
        "SIMPLE",
        12.5,
    )
    assert [c["transport"] for c in out["nccl_connections"]] == ["P2P/IPC"]
    c = out["_count"][0]
    assert (c["nccl"], c["recognised"], c["damaged"]) == (3, 2, 1)
    assert out["nccl_processes"][0]["host"] is None


@pytest.mark.parametrize(
    "via,transport,printed",
    [("P2P/direct pointer/read", "P2P/direct", "P2P/direct pointer/read"),
     ("P2P/IPC/read", "P2P/IPC", "P2P/IPC/read"),
     ("NET/IBext/3(7)/GDRDMA", "NET/IBext", "NET/IBext/N(N)/GDRDMA")],
)  # fmt: skip
def test_transport_family_keeps_what_nccl_printed(section, via, transport, printed):
    s = section(A + f"Channel 00/0 : 0[0] -> 1[1] [send] via {via}")
    assert [(t["transport"], t["as_printed"]) for t in s["transports"]] == [(transport, [printed])]


def test_informational_families_are_recognised():
    out = run(
        A + "NET/OFI Selected Provider is efa (found 4 nics)",
        A + "Cuda Host Alloc Size 4 pointer 0x7f0000000000",
        A + "init.cc:490 Cuda Host Alloc Size 1048576 pointer 0x7fbbada00200",
        A + '<system version="1">',
        A + "New proxy send connection 0 from local rank 1, transport 0",
        A + "TUNER/Plugin: Could not find: libnccl-tuner.so",
        A + "RAS client listening socket at 127.0.0.1<28028>",
    )
    c = out["_count"][0]
    assert (c["nccl"], c["recognised"]) == (7, 7)
