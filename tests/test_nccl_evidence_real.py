"""What the NCCL section and the checklist claim on real logs (tests/data/nccl/), against lines
read from each file by hand: a claim goes only as far as the log's evidence."""

from __future__ import annotations

import pytest
from nccl_real import ingest_all, real_logs

from commwall.analysis.report import checklist

LOGS = {log.name[:3]: log for log in real_logs()}


@pytest.fixture(scope="module")
def sections(tmp_path_factory):
    logs = [LOGS[k] for k in ("001", "016", "020", "021", "025")]
    got = ingest_all(tmp_path_factory.mktemp("nccl") / "s.duckdb", logs)
    return {name[:3]: s for name, s in got.items()}


def test_gdr_off_on_one_host_is_no_alert(sections):
    """025: `NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'` (line 43), but one host
    (line 146: `comm 0x55b6aa64a990 rank 0 nRanks 2 nNodes 1`) and no `via NET` line at all:
    its two GPUs talk `via P2P/direct pointer/read` (line 1052). Nothing goes through the NIC,
    so GDR being off costs nothing; the report used to send the reader to nvidia-peermem."""
    s = sections["025"]
    assert s["gdr"] is False and s["inter_node"]["value"] is False
    item = checklist.gdr({"nccl": s})
    assert item["status"] == checklist.OK and "costs nothing" in item["evidence"]
    assert not any("GPU Direct RDMA" in f for f in s["findings"])


def test_gdr_off_across_nodes_is_an_alert_and_the_network_is_named(sections):
    """021: two hosts, s95 and s96 (lines 43-44 print the version from each), talking
    `via NET/IB/1` without /GDRDMA (line 65); no `Using network` line. GDR off matters here,
    and the network is the connections' IB, not "a single-node job"."""
    s = sections["021"]
    assert checklist.gdr({"nccl": s})["status"] == checklist.ATTENTION
    tcp = checklist.socket_transport({"nccl": s})
    assert tcp["status"] == checklist.OK and "IB" in tcp["evidence"]
    assert "single-node" not in tcp["evidence"]


def test_one_version_line_does_not_vouch_for_64_processes(sections):
    """001: 64 ranks on 8 hosts, and the only version line is line 158 (`NCCL version
    2.6.4+cuda10.2`, with no process prefix): the checklist used to say "Every process logged
    NCCL 2.6.4"."""
    s = sections["001"]
    assert s["ranks"]["processes"] == 64 and s["versions"] == ["2.6.4"]
    item = checklist.nccl_versions({"nccl": s})
    assert item["status"] == checklist.NOT_OBSERVABLE and "0 of the 64" in item["evidence"]


def test_a_multi_node_job_without_a_named_network_is_not_called_single_node(sections):
    """016: NCCL WARN lines from eight hosts (GPU-790 at line 2179, GPU-1006 at 2195, GPU-47 at
    2211, ...), and no `Using network`, NET/ or `via NET` line anywhere: the network between
    the nodes is unknown, and the checklist used to call it "a single-node job"."""
    s = sections["016"]
    assert s["inter_node"]["value"] is True
    tcp = checklist.socket_transport({"nccl": s})
    assert tcp["status"] == checklist.NOT_OBSERVABLE and "crosses nodes" in tcp["evidence"]


@pytest.fixture(scope="module")
def collnet(tmp_path_factory):
    logs = [LOGS[k] for k in ("009", "025")]
    got = ingest_all(tmp_path_factory.mktemp("collnet") / "s.duckdb", logs)
    return {name[:3]: s for name, s in got.items()}


def test_collnet_that_fell_back_is_not_in_use(collnet):
    """009 (2.12.10, SHARP): CollNet connections are set up (line 1309: `CollNet 00 : 0
    [receive] via COLLNET/SHARP/0/GDRDMA`), then NCCL gives up on them: lines 1468 and 1511,
    `transport.cc:253 NCCL WARN Cannot initialize CollNet, using point-to-point network
    instead`, after `Cannot create SHArP job(-11)`. The report said CollNet was in use and left
    the reader with 34 errors and no explanation."""
    s = collnet["009"]
    assert [c["collnet"] for c in s["communicators"]] == [False]
    assert (
        s["collnet_fallback"]["processes"] == 2 and s["collnet_fallback"]["first"]["line"] == 1468
    )
    assert any(f.startswith("CollNet could not be initialised") for f in s["findings"])


def test_collnet_channel_count_of_nccl_2_20_and_later_is_no_evidence(collnet):
    """025 (2.27.7, one host, two GPUs): line 475 `24 coll channels, 24 collnet channels, 0 nvls
    channels`: NCCL 2.20+ prints the coll channel count in the collnet field; no line of the
    file connects anything via COLLNET."""
    assert [c["collnet"] for c in collnet["025"]["communicators"]] == [False]
    assert collnet["025"]["collnet_fallback"] == {"processes": 0, "first": None}


def test_the_rank_that_died_is_the_watchdog_timeouts_culprit(tmp_path):
    """029 (PyTorch watchdog, 8 ranks under `srun -l`): line 242 `7: RANK 7: ... WORLD_SIZE 8`;
    ranks 0-6 each report `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=92,
    OpType=ALLREDUCE ...` (line 4837 for rank 2 ...) and quote it again when the watchdog thread
    terminates (line 4865 for rank 3 ...); rank 7 never does: it ran out of GPU memory at line
    4513 (`7: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB ...`) and
    ended on line 5136 `7: [rank7]: RuntimeError: Time out when prefetcher gets embed data at
    600 seconds.` The report said world size 7, "no log -", no culprit and 14 timeouts; then
    it named the line-5136 timeout, a consequence, as what rank 7 died of (test_nccl_oom.py)."""
    (s,) = ingest_all(tmp_path / "s.duckdb", [LOGS["029"]]).values()
    assert s["ranks"]["world_size"] == 8 and s["ranks"]["without_log"] == []
    assert s["timeouts"]["count"] == 7
    (t,) = s["timeouts"]["collectives"]
    assert (t["seq"], t["waiting"], t["crashed"]) == (92, list(range(7)), [7])
    assert t["likely_culprits"] == [7]
    assert t["crashes"][7].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    later = t["crash_details"][7]["later_crash"]
    assert later.startswith("RuntimeError: Time out when prefetcher gets embed data")
    assert any("rank 7 died: it ran out of GPU memory" in f for f in s["findings"])


def _abort_chains(path) -> tuple[int, int]:
    """Read from the raw text by plain Python: error-return chains (`file.cc:N -> code` lines,
    consecutive on one host:pid:tid) that start right after that thread's `socketProgressOpt:
    abort called`, and the other chains."""
    import gzip
    import re

    line = re.compile(r"(\S+:\d+:\d+) \[\d+\] NCCL INFO (.*)$")
    frame = re.compile(r"^[\w/.]+\.(?:cc|h|cpp|c):\d+ -> \d+")
    last: dict[str, str] = {}
    aborted = other = 0
    for text in gzip.open(path, "rt", errors="replace"):
        m = line.search(text.rstrip("\n"))
        if not m:
            continue
        thread, msg = m.groups()
        if frame.match(msg) and not frame.match(last.get(thread, "")):
            if last.get(thread, "").startswith("socketProgressOpt: abort called"):
                aborted += 1
            else:
                other += 1
        last[thread] = msg
    return aborted, other


def test_errors_that_unwind_an_abort_are_no_failures(tmp_path):
    """020 (a successful MLPerf run, line 772: `"key": "status", "value": "success"`): every
    error return in the file follows its thread's `socketProgressOpt: abort called` (lines
    919-922: `abort called`, then `misc/socket.cc:64 -> 3` ...): the proxies' sockets torn down
    at exit. 019 crashed: its first real error is line 4376, `7:   what():  NCCL error in:
    .../NCCLUtils.cpp:77, invalid usage`, which the socket unwinding before it used to hide."""
    logs = {k: LOGS[k] for k in ("019", "020")}
    got = ingest_all(tmp_path / "s.duckdb", list(logs.values()))
    s020, s019 = got[logs["020"].name], got[logs["019"].name]
    aborted, other = _abort_chains(logs["020"].path)
    assert other == 0 and aborted > 0
    assert s020["errors"]["count"] == 0 and s020["aborts"]["count"] == aborted
    assert not any(f.startswith("NCCL errors") for f in s020["findings"])
    assert s019["errors"]["first"]["line"] == 4376
    assert s019["aborts"]["count"] == _abort_chains(logs["019"].path)[0] > 0


def test_the_queue_pairs_mtu_is_read_from_the_log(sections):
    """021 (RoCE, 2 hosts): line 87 `NET/IB: NCCL Dev 1 IbDev 0 Port 1 qpn 199 mtu 3`: verbs
    MTU 3 is 1024 bytes, a quarter of what RoCE can carry. 020 (IB): line 4 `... qpn 9484 mtu 5`
    (4096). The checklist used to say no log records the MTU."""
    low = checklist.mtu({"nccl": sections["021"]})
    assert low["status"] == checklist.ATTENTION and "1024 bytes" in low["evidence"]
    assert sections["021"]["ib_mtu"][0]["line"] == 87
    full = checklist.mtu({"nccl": sections["020"]})
    assert full["status"] == checklist.OK and [
        m["mtu_bytes"] for m in sections["020"]["ib_mtu"]
    ] == [4096]
    assert checklist.mtu({"nccl": sections["025"]})["status"] == checklist.NOT_OBSERVABLE


def test_a_ring_line_nccl_cut_at_20_ranks_is_marked_truncated(sections):
    """001 (NCCL 2.6.4, 64 ranks): line 1037 `Channel 00/08 :    0   3   2   1 ... 16  19  18  17`
    holds 20 ranks: NCCL up to 2.22 prints at most 20 (MAXWIDTH in its rings.cc) and no `...`."""
    (c,) = sections["001"]["communicators"]
    assert c["nranks"] == 64 and len(c["ring"]) == 20 and c["ring_truncated"]
    assert not any(x["ring_truncated"] for x in sections["025"]["communicators"])  # 2 ranks


def test_a_process_first_seen_glued_to_a_table_row_is_one_process(tmp_path):
    """013 (nccl-tests, 4 hosts oneflow-25..28): line 41 `... 16     float     sumoneflow-27:
    433602:433862 [5] NCCL INFO AllReduce ...` glues the table's `sum` to the host, and line 42
    `oneflow-27:433602:433860 [7] NCCL INFO ...` is the same process. Counted by plain Python
    over the lines that start with `host:pid:tid [dev] NCCL`: 32 processes; the report said 38."""
    import gzip
    import re

    log = LOGS["013"]
    start = re.compile(r"^([\w.-]+):(\d+):\d+ \[\d+\] NCCL")
    clean = {m.groups() for t in gzip.open(log.path, "rt") if (m := start.match(t))}
    (s,) = ingest_all(tmp_path / "s.duckdb", [log]).values()
    assert len(clean) == 32 and s["ranks"]["processes"] == len(clean)


def test_the_aws_ofi_plugin_names_the_network(tmp_path):
    """023 (p5 nodes, 4 hosts): line 14 `NET/OFI Initializing aws-ofi-nccl 1.13.2-aws`, and no
    `Using network` or NET connection line: the network between the nodes is the plugin's
    (NCCL calls it AWS Libfabric), which the report left unnamed."""
    (s,) = ingest_all(tmp_path / "s.duckdb", [LOGS["023"]]).values()
    inter = s["inter_node"]
    assert (inter["value"], inter["network"], inter["network_basis"]) == (
        True,
        "AWS Libfabric",
        "plugin",
    )
    assert checklist.socket_transport({"nccl": s})["status"] == checklist.OK


def test_launcher_tags_shared_by_processes_name_no_rank(tmp_path):
    """023 (`torchrun --nproc_per_node=8 --nnodes=4` under `srun -l`, line 1): the srun label is
    the node's task number, so two processes of one node carry `1:` (`1: p5-dy-gpu-3:47930` and
    `1: p5-dy-gpu-3:47936`); the report mapped both to rank 1."""
    (s,) = ingest_all(tmp_path / "s.duckdb", [LOGS["023"]]).values()
    assert s["ranks"]["mapped_by"] == {} and s["ranks"]["unmapped_processes"] == 3
    assert s["version_by_rank"] == []


def test_data_path_settings_from_the_environment_are_findings(tmp_path):
    """027: line 3 `NCCL_P2P_DISABLE set by environment to 1`; 011: lines 178-180
    `NCCL_ALGO set by environment to Tree` (and NCCL_SOCKET_IFNAME=eth0 at line 137, which
    changes no data path). Both were parsed and never shown."""
    logs = {k: LOGS[k] for k in ("011", "027")}
    got = ingest_all(tmp_path / "s.duckdb", list(logs.values()))
    s011, s027 = got[logs["011"].name], got[logs["027"].name]
    (p2p,) = [e for e in s027["env"] if e["name"] == "NCCL_P2P_DISABLE"]
    assert (p2p["value"], p2p["line"]) == ("1", 3)
    assert any(f.startswith("NCCL_P2P_DISABLE=1 set by environment") for f in s027["findings"])
    assert any(f.startswith("NCCL_ALGO=Tree set by environment") for f in s011["findings"])
    assert not any("NCCL_SOCKET_IFNAME" in f for f in s011["findings"])
    assert any(e["name"] == "NCCL_SOCKET_IFNAME" and e["value"] == "eth0" for e in s011["env"])


def test_one_process_driving_every_gpu_holds_one_communicator(tmp_path):
    """010 (NCCL 2.12.10, no commId): pid 12288 drives all 8 GPUs (ncclCommInitAll): lines
    493-500 are its 8 `comm 0x... rank r nranks 8 cudaDev r ... Init COMPLETE`, line 69 the one
    ring `Channel 00/24 :    0   1   2   3   4   5   6   7`. The report showed 8 communicators
    of one rank each and said no rank had a log."""
    (s,) = ingest_all(tmp_path / "s.duckdb", [LOGS["010"]]).values()
    (c,) = s["communicators"]
    assert (c["nranks"], c["ranks_logged"], c["ring"]) == (8, 8, list(range(8)))
    assert s["ranks"]["with_log"] == list(range(8)) and s["ranks"]["without_log"] == []


def _died_by_hand(path) -> tuple[dict[int, int], dict[int, str], dict[int, str]]:
    """Read from the raw text by plain Python: the rank each srun tag's NCCL process holds
    (`N: host:pid:tid [d] NCCL INFO ncclCommInitRankConfig ... rank R nranks ...`), the tags
    whose lines carry `what():  NCCL error in:` and, per tag, the line after its `N: Last
    error:`."""
    import gzip
    import re

    init = re.compile(r"^(\d+): \S+ \[\d+\] NCCL INFO ncclCommInitRank\w* comm \S+ rank (\d+) ")
    lines = gzip.open(path, "rt", errors="replace").read().splitlines()
    rank_of: dict[int, set[int]] = {}
    died, last = {}, {}
    for i, text in enumerate(lines):
        if m := init.match(text):
            rank_of.setdefault(int(m[1]), set()).add(int(m[2]))
        if m := re.match(r"^(\d+):\s+what\(\):\s+(NCCL error in: .*)$", text):
            died[int(m[1])] = m[2]
        if m := re.match(r"^(\d+): Last error:$", text):
            last[int(m[1])] = lines[i + 1].split(": ", 1)[1]
    return {t: min(r) for t, r in rank_of.items() if len(r) == 1}, died, last


def test_ranks_that_died_of_an_nccl_error_are_named_with_nccls_last_error(tmp_path):
    """019 died at communicator creation: `7: terminate called after throwing an instance of
    'c10::DistBackendError'` (line 4375), `7:   what():  NCCL error in: .../NCCLUtils.cpp:77,
    invalid usage` (line 4376), and two lines below `7: Last error:` / `7: NET/IB : Requested
    properties for vNic 8, only 8 vNics have been created` (lines 4378-4379); the same for the
    tags 1-6, whose NCCL processes hold ranks 1-6 (line 60 for tag 7: `ncclCommInitRankConfig
    ... rank 7 nranks 8`); no watchdog timeout anywhere. The report said "no step time could be
    measured" and named no rank."""
    from commwall.analysis.hangs.stopped import crash_stop

    (s,) = ingest_all(tmp_path / "s.duckdb", [LOGS["019"]]).values()
    rank_of, died, last = _died_by_hand(LOGS["019"].path)
    assert sorted(died) == [1, 2, 3, 4, 5, 6, 7] and all(rank_of[t] == t for t in died)
    assert s["timeouts"]["count"] == 0
    c = s["crashed"]
    assert c["ranks"] == sorted(rank_of[t] for t in died) and c["unattributed"] == 0
    for r in c["by_rank"]:
        tag = next(t for t in died if rank_of[t] == r["rank"])
        assert (r["crash"], r["last_error"]) == (died[tag], last[tag])
    assert c["by_rank"][-1]["line"] == 4376  # rank 7's what(), the first in the file
    sentence = crash_stop({"nccl": s})
    assert sentence.startswith("The job died: ranks 1-7 died of NCCL error in:")
    assert "Requested properties for vNic 8, only 8 vNics have been created" in sentence
    assert sentence.count("died of") == 1  # one cause, said once for the seven ranks
    assert any(f.startswith("ranks 1-7 died of") for f in s["findings"])
