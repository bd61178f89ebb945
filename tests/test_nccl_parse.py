"""NCCL logs of every version family and scenario, generated with known ground truth
(tests/nccl_log_gen.py), parsed and compared field by field."""

from __future__ import annotations

from collections import Counter

import pytest
from nccl_log_gen import Job, Log, make_log, v

from commwall.ingest.formats import registry as formats
from commwall.ingest.formats.nccl_log import parse

#: version → lowest version its line shapes must imply (nccl_logs.md §17), None: no clue.
FAMILIES = {
    "2.4.8": None, "2.7.8": "2.7", "2.12.12": "2.12.7", "2.16.5": "2.16", "2.18.3": "2.18.1",
    "2.21.5": "2.21", "2.22.3": "2.22", "2.23.4": "2.23", "2.24.3": "2.24.3", "2.26.2": "2.26.2",
    "2.27.5": "2.27", "2.29.2": "2.29",
}  # fmt: skip


def vt(text: str) -> tuple[int, ...]:
    """'2.18' → (2, 18, 0)."""
    parts = [int(x) for x in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def tables(log: Log, tmp_path, **write) -> tuple[dict[str, list[dict]], dict]:
    """Parse the log; rows per table with (host, pid) in place of proc."""
    path = log.write(tmp_path / ("x.log.gz" if write.get("gz") else "x.log"), **write)
    assert formats.detect(path).name == "nccl_log"
    parsed = parse(path)
    out = {k: t.to_pylist() for k, t in parsed.tables.items()}
    procs = {p["proc"]: (p["host"], p["pid"]) for p in out["nccl_processes"]}
    for rows in out.values():
        for r in rows:
            if r.get("proc") is not None and "host" not in r:
                r["host"], r["pid"] = procs[r["proc"]]
    return out, parsed.detail


def same(parsed: list[dict], truth: list[dict], keys: tuple[str, ...]) -> None:
    """The rows agree on `keys` as multisets."""

    def norm(x):
        return tuple(x) if isinstance(x, list) else x

    got = Counter(tuple(norm(r.get(k)) for k in keys) for r in parsed)
    want = Counter(tuple(norm(r.get(k)) for k in keys) for r in truth)
    assert got == want, (got - want, want - got)


def check_all(log: Log, out: dict, detail: dict, version: str, floor: str | None = None) -> None:
    t = log.truth
    assert detail["lines"] == t.lines
    assert out["nccl_files"][0]["lines_total"] == t.lines["total"]
    assert set(detail["versions"]) == t.versions
    shape = detail["shape_version"]
    assert shape is None or vt(shape) <= v(version)
    if floor is not None:
        assert shape is not None and vt(floor) <= vt(shape)
    procs = {(p["host"], p["pid"]): p for p in out["nccl_processes"]}
    assert set(procs) == set(t.processes)
    for key, want in t.processes.items():
        got = procs[key]
        for k in (
            "devices",
            "nccl_version",
            "cuda_version",
            "tag_rank",
            "cuda_driver",
            "git_version",
        ):
            if k in want:
                assert got[k] == want[k], (key, k)
    comms = {(c["host"], c["pid"], c["comm"]): c for c in out["nccl_communicators"]}
    assert len(comms) == len(t.communicators)
    for want in t.communicators:
        got = comms[(want["host"], want["pid"], want["comm"])]
        for k, val in want.items():
            if k not in ("host", "pid"):
                assert got[k] == val, (want["host"], want["pid"], k)
    rings = [r for r in out["nccl_channels"] if r["kind"] == "ring"]
    same(rings, [{**r, "ring": r["ranks"]} for r in t.rings],
         ("host", "pid", "comm", "channel", "n_channels", "ring", "truncated"))  # fmt: skip
    trees = [
        {**r, "tree_down": sorted(r["tree_down"])}
        for r in out["nccl_channels"]
        if r["kind"] == "tree"
    ]
    same(trees, [{**r, "tree_rank": r["me"], "tree_up": r["up"], "tree_down": sorted(r["down"])} for r in t.trees],
         ("host", "pid", "comm", "channel", "tree_rank", "tree_up", "tree_down"))  # fmt: skip
    same(out["nccl_connections"], t.connections,
         ("host", "pid", "comm", "channel", "conn", "src", "dst", "direction", "peer",
          "transport", "via", "net", "net_dev", "gdr"))  # fmt: skip
    for kind in {n["kind"] for n in t.network} | {n["kind"] for n in out["nccl_network"]}:
        want = [n for n in t.network if n["kind"] == kind]
        keys = tuple(sorted(set().union(*(n.keys() for n in want)))) if want else ("host",)
        same([n for n in out["nccl_network"] if n["kind"] == kind], want, keys)
    same(out["nccl_tuning"], t.tuning,
         ("kind", "func", "bytes", "algo", "proto", "time_us", "channel_lo", "channel_hi",
          "latency_us", "bw_gbps", "max_threads"))  # fmt: skip
    same(out["nccl_env"], t.env, ("host", "pid", "name", "value"))
    same(out["nccl_colls"], t.colls,
         ("host", "pid", "comm", "op_count", "op", "nccl_op", "count", "datatype", "dtype",
          "bytes", "root", "nranks", "stream"))  # fmt: skip
    same(out["nccl_warnings"], t.warnings,
         ("host", "pid", "level", "kind", "src_file", "src_line", "ts", "code"))  # fmt: skip
    same(out["nccl_timeouts"], t.timeouts, ("kind", "rank", "seq", "last_enqueued"))
    timeouts = [r for r in out["nccl_timeouts"] if r["kind"] == "timeout"]
    for r in timeouts:
        assert (r["op_type"], r["numel_in"], r["timeout_ms"], r["ran_ms"]) == (
            "ALLREDUCE", 26214400, 600000, 600045,
        )  # fmt: skip
        assert (r["pg"], r["pg_desc"], r["rank_source"]) == ("0", "default_pg", "header")
    kinds = Counter(u["kind"] for u in out["nccl_unknown"])
    assert kinds["damaged"] == t.lines["damaged"]
    assert sum(kinds.values()) == t.lines["unknown"]


@pytest.mark.parametrize("version", list(FAMILIES))
def test_every_version_family_multi_node_ib(version, tmp_path):
    job = Job(version=version, nodes=2, gpus=4, network="ib", colls=30, tuning=True,
              warn_rank=5, timeout_culprit=2, launcher="srun", seed=len(version))  # fmt: skip
    log = make_log(job)
    out, detail = tables(log, tmp_path)
    check_all(log, out, detail, version, FAMILIES[version])
    assert len(out["nccl_colls"]) == 30 * 8
    assert {c["transport"] for c in out["nccl_connections"]} >= {"NET/IB"}


SCENARIOS = {
    "single_node_nvlink": Job(version="2.21.5", nodes=1, gpus=8, network="nvlink", gdr=False),
    "roce": Job(version="2.20.5", nodes=2, gpus=2, network="roce"),
    "socket": Job(version="2.18.3", nodes=3, gpus=2, network="socket", gdr=False,
                  env={"NCCL_SOCKET_IFNAME": "eth0"}),
    "ofi_efa": Job(version="2.27.5", nodes=2, gpus=8, network="ofi", colls=12),
    "nvls": Job(version="2.19.3", nodes=1, gpus=8, network="nvlink", nvls=True, gdr=False),
    "shm_old": Job(version="2.10.3", nodes=1, gpus=4, network="nvlink", intra="shm", gdr=False),
    "shm_new": Job(version="2.24.3", nodes=2, gpus=4, intra="shm", channels=4),
    "coll_trace": Job(version="2.28.3", nodes=2, gpus=2, colls=200),
    "warn_unwind_2_26": Job(version="2.26.2", warn_rank=3),
    "warn_unwind_2_17": Job(version="2.17.1", warn_rank=0),
    "watchdog_timeout": Job(version="2.23.4", nodes=2, gpus=4, timeout_culprit=6, launcher="rank"),
    "mpi_tags": Job(version="2.14.3", launcher="mpi", colls=5),
    "torchrun_tags": Job(version="2.15.5", nodes=1, gpus=4, network="nvlink", launcher="torchrun"),
    "info_timestamps": Job(version="2.27.5", colls=40, info_timestamps=True, launcher="rank"),
    "big_ring_compact": Job(version="2.25.1", nodes=8, gpus=8, channels=2),
    "big_ring_old_cap": Job(version="2.19.3", nodes=4, gpus=8, channels=2),
    "single_process": Job(version="2.18.3", nodes=1, gpus=1, network="nvlink", colls=10),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenarios(name, tmp_path):
    job = SCENARIOS[name]
    log = make_log(job)
    out, detail = tables(log, tmp_path)
    check_all(log, out, detail, job.version)


def test_scenario_specifics(tmp_path):
    out, _ = tables(make_log(SCENARIOS["ofi_efa"]), tmp_path)
    assert {c["transport"] for c in out["nccl_connections"]} == {"P2P/CUMEM", "NET/AWS Libfabric"}
    ofi = [n for n in out["nccl_network"] if n["kind"] == "ofi" and n["device"] == "efa"]
    assert ofi and all(n["idx"] == 4 for n in ofi)
    out, _ = tables(make_log(SCENARIOS["nvls"]), tmp_path)
    assert all(c["nvls_heads"] == 8 and c["nvls_support"] for c in out["nccl_communicators"])
    out, _ = tables(make_log(SCENARIOS["big_ring_compact"]), tmp_path)
    ring = [r for r in out["nccl_channels"] if r["kind"] == "ring"][0]
    assert ring["truncated"] and 0 < len(ring["ring"]) < 64
    out, _ = tables(make_log(SCENARIOS["big_ring_old_cap"]), tmp_path)
    assert all(len(r["ring"]) == 20 for r in out["nccl_channels"] if r["kind"] == "ring")
    out, _ = tables(make_log(SCENARIOS["roce"]), tmp_path)
    assert {n["link"] for n in out["nccl_network"] if n["kind"] == "ib"} == {"RoCE"}


@pytest.mark.parametrize(
    "write",
    [{"gz": True}, {"crlf": True}, {"gz": True, "crlf": True}],
    ids=["gz", "crlf", "gz+crlf"],
)
def test_gzip_and_windows_line_ends(write, tmp_path):
    job = Job(version="2.24.3", colls=20, warn_rank=1, timeout_culprit=0, launcher="srun")
    log = make_log(job)
    out, detail = tables(log, tmp_path, **write)
    check_all(log, out, detail, job.version)


def test_bare_version_credited_by_launcher_tag_only(tmp_path):
    out, _ = tables(make_log(Job(version="2.19.3", launcher=None)), tmp_path)
    assert all(p["nccl_version"] is None for p in out["nccl_processes"])
    assert out["nccl_files"][0]["versions"] == ["2.19.3"]
    out, _ = tables(make_log(Job(version="2.19.3", launcher="srun")), tmp_path)
    credited = [p for p in out["nccl_processes"] if p["nccl_version"]]
    assert [(p["tag_rank"], p["nccl_version"]) for p in credited] == [(0, "2.19.3")]
