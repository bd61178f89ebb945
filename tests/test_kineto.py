"""The Kineto parser on real traces: timestamps, ranks, classification, steps, collectives."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import DATA, DLRM, SAMPLES

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.kineto import reader as kineto

DLRM_FILES = sorted(DLRM.glob("*.pt.trace.json.gz"))
B200 = DATA / "kineto/tracelens_b200_eager_rank0/eager_trace.json.gz"
A100 = DATA / "kineto/hta_nccl_parser_config_rank0of2/nccl_data.json.gz"
GLOO = SAMPLES / "gloo_4rank_compute"


def raw(path):
    with gzip.open(path) as f:
        return json.load(f)


def test_dlrm_epoch_microseconds_become_exact_nanoseconds():
    p = kineto.parse(DLRM_FILES[0])
    ev = raw(DLRM_FILES[0])["traceEvents"]
    step = next(e for e in ev if e.get("name") == "ProfilerStep#10")
    steps = p.tables["steps"].to_pylist()
    assert steps == [{"rank": 0, "step": 10, "ts": step["ts"] * 1000, "dur": step["dur"] * 1000}]
    assert p.detail["time_base"] == "epoch_us"


def test_relative_timestamps_add_base_nanoseconds():
    doc = raw(B200)
    p = kineto.parse(B200)
    k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    acts = p.tables["activities"].to_pandas()
    row = acts[(acts.cat == "kernel") & (acts.correlation == k["args"]["correlation"])].iloc[0]
    expected = doc["baseTimeNanoseconds"] + round(k["ts"] * 1000)
    assert abs(int(row.ts) - expected) <= 1
    assert int(row.dur) == pytest.approx(k["dur"] * 1000, abs=1)
    assert p.detail["time_base"] == "base_ns"


def test_dlrm_all_ranks_and_classification_counts():
    ranks = [kineto.parse(f).tables["ranks"].to_pylist()[0] for f in DLRM_FILES]
    assert [r["rank"] for r in ranks] == list(range(8))
    assert {r["gpu_name"] for r in ranks} == {"Tesla V100-SXM2-32GB"}
    assert {r["world_size"] for r in ranks} == {8}
    for f in DLRM_FILES:
        ev = raw(f)["traceEvents"]
        acts = kineto.parse(f).tables["activities"].to_pandas()
        kernels = [e for e in ev if e.get("cat") == "kernel"]
        nccl = [e for e in kernels if e["name"].startswith("ncclKernel")]
        assert (acts.kind == "comm").sum() == len(nccl) == 8
        assert (acts.kind == "compute").sum() == len(kernels) - len(nccl)
        mem = [e for e in ev if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
        assert (acts.kind == "memory").sum() == len(mem)


def test_dlrm_collective_sizes_from_launching_host_ops():
    p = kineto.parse(DLRM_FILES[0])
    co = p.tables["collectives"].to_pandas().sort_values("ts")
    assert list(co.op.value_counts().sort_index().items()) == [("allreduce", 3), ("alltoall", 5)]
    ar = co[co.op == "allreduce"]
    # nccl:all_reduce Input Dims [[394241]] float in rank 0's trace
    assert 394241 * 4 in set(ar.in_bytes)
    assert co.in_bytes.notna().all()
    assert (co.group_size == 8).all()


def test_kernel_args_give_process_group_and_dtype():
    co = kineto.parse(A100).tables["collectives"].to_pandas()
    assert set(co.op) == {"allreduce", "broadcast"}
    assert (co.op == "allreduce").sum() == 15 and (co.op == "broadcast").sum() == 6
    assert set(co.pg_name) == {"0"} and (co.group_size == 2).all()
    first = co.sort_values("ts").iloc[0]
    assert first.in_bytes == first.in_nelems * {"Float": 4, "Long": 8}[first["dtype"]]


def test_modern_nccl_dev_kernel_names():
    co = kineto.parse(B200).tables["collectives"].to_pandas()
    assert len(co) == 1
    row = co.iloc[0]
    assert row.op == "allgather" and row.pg_name == "3" and row.group_size == 8
    assert row.in_nelems == 25136 and row.out_nelems == 201088
    assert row.in_bytes == 25136 * 2  # BFloat16


def test_gloo_cpu_trace_classification():
    f = GLOO / "rank0.pt.trace.json.gz"
    p = kineto.parse(f)
    ev = raw(f)["traceEvents"]
    acts = p.tables["activities"].to_pandas()
    gloo = [e for e in ev if e.get("ph") == "X" and e.get("name", "").startswith("gloo:")]
    assert (acts.kind == "comm").sum() == len(gloo) == 48
    main = {(e["pid"], e["tid"]) for e in ev if e.get("name", "").startswith("ProfilerStep#")}
    assert len(main) == 1
    compute = acts[acts.kind == "compute"]
    assert set(zip(compute.pid, compute.tid, strict=True)) == main
    assert not compute.name.str.startswith("c10d::").any()
    assert p.detail["trace_kind"] == "cpu"
    assert p.tables["steps"].column("step").to_pylist() == [2, 3, 4, 5, 6, 7]
    co = p.tables["collectives"].to_pandas()
    assert (co.op == "allreduce").all() and co.in_bytes.notna().all()
    assert (co.in_bytes == 4).sum() == 6  # the 0-d loss all-reduce, once per step


def write_trace(path, doc):
    path.write_text(json.dumps(doc))
    return path


def test_rank_from_file_name_then_option(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 2}]
    p = write_trace(tmp_path / "trace_rank3.json", {"traceEvents": ev})
    r = kineto.parse(p).tables["ranks"].to_pylist()[0]
    assert (r["rank"], r["rank_source"], r["time_base"]) == (3, "file name", "unknown")
    q = write_trace(tmp_path / "anon.json", {"traceEvents": ev})
    with pytest.raises(IngestError, match="--rank"):
        kineto.parse(q)
    assert kineto.parse(q, rank=5).tables["ranks"].column("rank").to_pylist() == [5]


def test_legacy_bare_array_and_categories(tmp_path):
    ev = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 7, "tid": 7, "ts": 1.6e15, "dur": 100},
        {"ph": "X", "cat": "Kernel", "name": "ncclAllReduceRingLLKernel_sum_f32", "pid": 0, "tid": "stream 7", "ts": 1.6e15 + 10, "dur": 50},
        {"ph": "X", "cat": "Kernel", "name": "volta_sgemm", "pid": 0, "tid": "stream 7", "ts": 1.6e15 + 70, "dur": 20},
    ]  # fmt: skip
    p = kineto.parse(write_trace(tmp_path / "rank0.json", ev))
    acts = p.tables["activities"].to_pandas().sort_values("ts")
    assert list(acts.kind) == ["other", "comm", "compute"]
    assert acts.tid.isna().sum() == 2  # "stream 7" is not an integer tid
    co = p.tables["collectives"].to_pandas()
    assert list(co.op) == ["allreduce"] and list(co.algo) == ["RING"]


def test_distributed_info_ranks_as_string(tmp_path):
    doc = {
        "distributedInfo": {
            "backend": "nccl",
            "rank": 1,
            "world_size": 2,
            "nccl_version": "unknown",
            "pg_config": [
                {"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": "[0, 1]"}
            ],
        },
        "baseTimeNanoseconds": 1790857026000000000,
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1.5, "dur": 0.25}
        ],
    }
    p = kineto.parse(write_trace(tmp_path / "t.json", doc))
    assert p.tables["process_groups"].to_pylist() == [
        {"rank": 1, "pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": "[0, 1]"}
    ]
    r = p.tables["ranks"].to_pylist()[0]
    assert r["nccl_version"] is None and r["rank_source"] == "distributedInfo"
    a = p.tables["activities"].to_pylist()[0]
    assert (a["ts"], a["dur"]) == (1790857026000001500, 250)


def test_gpu_events_get_launch_time_from_runtime_call():
    p = kineto.parse(DLRM_FILES[0])
    acts = p.tables["activities"].to_pandas()
    rt = acts[acts.cat == "cuda_runtime"].set_index("correlation").ts
    k = acts[(acts.cat == "kernel") & acts.correlation.isin(rt.index)]
    assert len(k) > 200
    assert np.array_equal(k.launch_ts.to_numpy(), rt.loc[k.correlation].to_numpy())
    assert (k.launch_ts <= k.ts).all()
