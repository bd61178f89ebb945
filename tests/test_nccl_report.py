"""The `nccl` report section end to end: generated logs (and real traces) ingested into a
store, then the findings checked against the ground truth the generator planted."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import DLRM
from nccl_log_gen import Job, make_log

from commwall.analysis import db
from commwall.analysis.db import load_modules
from commwall.analysis.nccl.section import empty_section, nccl_section
from commwall.ingest import store

REQUIRED = ("versions", "lines", "transports", "gdr", "warnings", "timeouts")


JOBS = {
    "ib": [Job(version="2.24.3", nodes=2, gpus=4, warn_rank=6)],
    "socket": [Job(version="2.18.3", nodes=3, gpus=2, network="socket", gdr=False)],
    "ib_socket": [Job(version="2.21.5", nodes=2, gpus=2, network="ib_socket", gdr=False)],
    "ib_disabled": [Job(version="2.9.9", nodes=2, gpus=1, network="socket", gdr=False,
                        env={"NCCL_IB_DISABLE": "1"})],
    "single_node": [Job(version="2.21.5", nodes=1, gpus=8, network="nvlink", gdr=False)],
    "timeout": [Job(version="2.23.4", nodes=2, gpus=4, timeout_culprit=5, launcher="rank")],
    "mismatch": [Job(version="2.22.3", nodes=1, gpus=2, network="nvlink"),
                 Job(version="2.23.4", nodes=1, gpus=2, network="nvlink", hosts=("other",),
                     pid_base=5000)],
    "nvls": [Job(version="2.19.3", nodes=1, gpus=8, network="nvlink", nvls=True, colls=24,
                 gdr=False)],
}  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One store, one run per entry of JOBS: name → (nccl section, logs)."""
    d = tmp_path_factory.mktemp("report")
    con = store.connect(d / "s.duckdb")
    out = {}
    for name, jobs in JOBS.items():
        logs = [make_log(j) for j in jobs]
        paths = [log.write(d / f"{name}{i}.log") for i, log in enumerate(logs)]
        summary = store.ingest(con, name, paths)
        assert summary.committed and not summary.failed
        out[name] = (summary.run_id, logs)
    load_modules(con)
    return {name: (nccl_section(con, rid), logs) for name, (rid, logs) in out.items()}


def expected_transports(log) -> Counter:
    scope = {True: "inter-node", False: "intra-node"}
    return Counter((scope[c["inter"]], c["transport"]) for c in log.truth.connections)


def tree_depth(trees: list[dict], channel: int) -> int:
    up = {t["me"]: t["up"] for t in trees if t["channel"] == channel}

    def depth(r: int) -> int:
        return 0 if up[r] == -1 else 1 + depth(up[r])

    return max(depth(r) for r in up)


def test_multi_node_ib_with_gdr(runs):
    s, (log,) = runs["ib"]
    t = log.truth
    assert set(REQUIRED) <= set(s) and s["present"] and s["hint"] is None
    assert {k: s["lines"][k] for k in t.lines} == t.lines
    assert s["versions"] == ["2.24.3"] and not s["version_mismatch"]
    assert [r["nccl_version"] for r in s["version_by_rank"]] == ["2.24.3"] * 8
    assert s["ranks"]["with_log"] == list(range(8)) and s["ranks"]["without_log"] == []
    assert s["ranks"]["mapped_by"] == {"comm_rank": 8}
    got = Counter({(x["scope"], x["transport"]): x["count"] for x in s["transports"]})
    assert got == expected_transports(log)
    assert all(x["scope_source"] == "hosts" for x in s["transports"])
    inter = [x for x in s["transports"] if x["scope"] == "inter-node"]
    assert inter[0]["n_gdr"] == inter[0]["count"] > 0
    assert s["gdr"] is True and s["gdr_evidence"]["basis"] == "connections"
    assert s["gdr_evidence"]["file"].endswith("ib0.log") and "GDRDMA" in s["gdr_evidence"]["text"]
    assert not s["tcp_fallback"]["detected"]
    assert [(n["network"], n["n_processes"]) for n in s["networks"]] == [("IB", 8)]
    assert [(n["device"], n["link"]) for n in s["nics"]] == [("mlx5_0", "IB"), ("mlx5_1", "IB")]
    (c,) = s["communicators"]
    assert (c["nranks"], c["n_nodes"], c["ranks_logged"], c["ring_channels"]) == (8, 2, 8, 2)
    assert c["ring"] == t.rings[0]["ranks"] and c["rings_distinct"] == 2
    assert c["tree_depth"] == max(tree_depth(t.trees, ch) for ch in (0, 1))
    assert c["tree_roots"] == sorted({x["me"] for x in t.trees if x["up"] == -1})
    assert s["warnings"]["count"] == 1 and s["errors"]["count"] == 1
    assert s["warnings"]["first"]["rank"] == 6 and s["warnings"]["first"]["kind"] == "ib_completion"
    assert s["errors"]["first"]["text"] == "transport/net.cc:1100 -> 6 [Proxy Thread]"
    assert s["timeouts"]["count"] == 0


@pytest.mark.parametrize(
    "name,reason",
    [("socket", "no_ib_device"), ("ib_socket", "rdma_devices"), ("ib_disabled", "ib_disabled")],
)
def test_tcp_sockets_between_nodes(runs, name, reason):
    s, (log,) = runs[name]
    tcp = s["tcp_fallback"]
    assert tcp["detected"] and tcp["reason"] == reason
    assert "via NET/Socket/0" in tcp["evidence"]["text"]
    assert s["gdr"] is None
    got = Counter({(x["scope"], x["transport"]): x["count"] for x in s["transports"]})
    assert got == expected_transports(log)
    assert any(reason.split("_")[0] in f or "TCP" in f for f in s["findings"])


def test_single_node_is_no_tcp_finding(runs):
    s, _ = runs["single_node"]
    assert not s["tcp_fallback"]["detected"]
    assert {x["scope"] for x in s["transports"]} == {"intra-node"}
    assert s["gdr"] is None and s["findings"] == []
    assert [n["network"] for n in s["networks"]] == ["Socket"]


def test_watchdog_timeout_names_the_culprit(runs):
    s, _ = runs["timeout"]
    (t,) = s["timeouts"]["collectives"]
    assert (t["pg"], t["seq"], t["op_type"]) == ("0", 1201, "ALLREDUCE")
    assert t["likely_culprits"] == t["not_enqueued"] == [5]
    assert t["waiting"] == [0, 1, 2, 3, 4, 6, 7] and t["no_log"] == t["completed"] == []
    assert s["timeouts"]["count"] == 7 and s["timeouts"]["first"]["kind"] == "timeout"
    assert s["findings"][0].startswith("watchdog timeout on ALLREDUCE SeqNum 1201")


def test_version_mismatch_across_logs(runs):
    s, _ = runs["mismatch"]
    assert s["versions"] == ["2.22.3", "2.23.4"] and s["version_mismatch"]
    assert "NCCL versions differ" in " ".join(s["findings"])
    assert s["files"] == 2


def test_nvls_and_collectives(runs):
    s, (log,) = runs["nvls"]
    assert s["communicators"][0]["nvls"] is True
    by_op = {r["op"]: r for r in s["collectives"]["by_op"]}
    want = Counter()
    for c in log.truth.colls:
        want[c["op"]] += c["bytes"]
    assert {op: r["total_bytes"] for op, r in by_op.items()} == dict(want)
    assert s["collectives"]["calls"] == len(log.truth.colls)
    assert s["collectives"]["per_step"] == []


def test_logs_join_real_traces_by_pid_and_steps(tmp_path):
    """The DLRM traces (8 ranks, pids 59811..59818, no host names) and a COLL log of the
    same pids: ranks map by pid, and the trace's 3 all-reduces of step 10 are found in the
    log after two decoys."""
    trace = [(7, 394241), (7, 112), (7, 226960)]
    plan = [("AllReduce", 7, 112, 0), ("AllReduce", 7, 5, 0), ("AllReduce", *trace[0], 0),
            ("Send", 7, 100, 1), ("AllReduce", *trace[1], 0), ("AllReduce", *trace[2], 0),
            ("AllReduce", 7, 394241, 0)]  # fmt: skip
    job = Job(version="2.18.3", nodes=1, gpus=8, network="nvlink", pid_base=59811,
              coll_plan=tuple(plan), gdr=False)  # fmt: skip
    log = make_log(job).write(tmp_path / "dlrm.log")
    con = store.connect(tmp_path / "s.duckdb")
    store.ingest(con, "dlrm", [*sorted(DLRM.glob("*.json.gz")), log])
    load_modules(con)
    s = nccl_section(con, db.run_id(con, "dlrm"))
    assert s["ranks"]["mapped_by"] == {"host_pid": 8}
    assert s["ranks"]["with_log"] == list(range(8))
    assert s["collectives"]["aligned_ranks"] == list(range(8))
    per_rank = 4 * (394241 + 112 + 226960)
    assert s["collectives"]["per_step"] == [
        {"step": 10, "ranks": 8, "calls": 24, "bytes": 8 * per_rank, "bytes_per_rank": per_rank}
    ]


def test_run_without_nccl_log(tmp_path):
    con = store.connect(tmp_path / "s.duckdb")
    summary = store.ingest(con, "run", [sorted(DLRM.glob("*.json.gz"))[0]])
    load_modules(con)
    s = nccl_section(con, summary.run_id)
    assert s == empty_section()
    assert s["present"] is False and "NCCL_DEBUG=INFO" in s["hint"]
    assert set(REQUIRED) <= set(s) and s["gdr"] is None and s["transports"] == []


CRASH_TAIL = [
    "{tag}   what():  NCCL error in: x.cpp:1, unhandled system error",
    "{tag} Last error:",
    "{tag} socketPollConnect: Connect returned Connection refused",
]


@pytest.mark.parametrize(
    "tags,crash_tag,ranks,unattributed",
    [
        # srun -l, one task per GPU: tag N is the process of rank N (its init line says so)
        (("2:", "3:"), "3:", [3], 0),
        # srun -l over one torchrun per node: both of node 1's processes carry `1:`, so the
        # tag is the node's task number, no rank: the crash is of no known rank
        (("1:", "1:"), "1:", [], 1),
    ],
)
def test_a_crash_under_a_launcher_tag_is_a_rank_only_where_the_tag_is_one(
    tmp_path, tags, crash_tag, ranks, unattributed
):
    """Two processes (ranks 2 and 3 of a 4-rank communicator, by their init lines), then one
    of them dies of an NCCL error under a launcher tag."""
    from commwall.analysis.hangs.stopped import crash_stop

    lines = [
        f"{tag} nodeA:{100 + i}:{110 + i} [{i}] NCCL INFO ncclCommInitRank comm 0x{i + 1} rank "
        f"{2 + i} nranks 4 cudaDev {i} busId {i + 1}000 commId 0xabc - Init START"
        for i, tag in enumerate(tags)
    ] + [s.format(tag=crash_tag) for s in CRASH_TAIL]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    con = store.connect(tmp_path / "s.duckdb")
    assert store.ingest(con, "r", [log]).committed
    s = nccl_section(load_modules(con), 1)
    c = s["crashed"]
    assert (c["ranks"], c["unattributed"]) == (ranks, unattributed)
    died = crash_stop({"nccl": s})
    cause = "NCCL error in: x.cpp:1, unhandled system error (NCCL's last error: "
    who = f"rank {ranks[0]} died of " if ranks else "a process of no known rank died of "
    assert (
        died
        == f"The job died: {who}{cause}socketPollConnect: Connect returned Connection refused)."
    )
