"""NCCL Inspector ingest: the README's example records (tests/data/inspector), the generator's
jobs of every format version, and damaged files that must fail naming the file and the line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from commwall.ingest.errors import IngestError
from commwall.ingest.formats import inspector, registry
from commwall.ingest.options import ParseOptions
from commwall.sample_traces.generate_inspector import JobSpec, write_job, write_prom

DATA = Path(__file__).parent / "data" / "inspector"


def rows(parsed, table):
    return parsed.tables[table].to_pylist()


def keep_going():
    return ParseOptions(keep_going=True)


# -- the README's records ---------------------------------------------------------------------


def test_readme_coll_perf_record():
    p = registry.parse(DATA / "readme_coll_perf.jsonl")
    assert p.format == "nccl_inspector"
    (c,) = rows(p, "inspector_colls")
    # "coll": "AllReduce", "coll_algo": "RING", "coll_proto": "LL", "coll_sn": 1407,
    # "coll_msg_size_bytes": 17179869184, "coll_exec_time_us": 61974, "coll_busbw_gbs": 485.119099
    assert (c["op"], c["coll"], c["algo"], c["proto"]) == ("allreduce", "AllReduce", "RING", "LL")
    assert (c["coll_sn"], c["msg_bytes"], c["exec_ns"]) == (1407, 17179869184, 61974 * 1000)
    assert c["busbw_gbs"] == 485.119099 and c["algobw_gbs"] == 277.210914
    assert c["size_log2"] == 34  # 17179869184 = 2**34
    # "dump_timestamp_us": 1748030377748202: a record without kernel times takes its dump's
    assert c["ts"] == 1748030377748202 * 1000 and c["kernel_start_ts"] is None
    (comm,) = rows(p, "inspector_comms")
    # "id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1, "hostname":
    # "example-hostname", "pid": 1639453, "inspector_output_format_version": "v4.3"
    assert (comm["comm_id"], comm["rank"], comm["n_ranks"], comm["nnodes"]) == (
        "0x7f8c496ae9f661", 2, 8, 1)  # fmt: skip
    assert (comm["hostname"], comm["pid"], comm["version"]) == ("example-hostname", 1639453, "v4.3")
    (d,) = rows(p, "inspector_dumps")
    # "coll_dropped_total": 4096, "coll_dropped_since_last_dump": 512,
    # "proxy_ops_dropped_since_last_dump": 1
    assert (d["coll_dropped"], d["coll_dropped_total"], d["proxy_ops_dropped"]) == (512, 4096, 1)
    assert p.detail["lost_records"]["coll"] == 4096


def test_readme_verbose_record_takes_its_kernel_times():
    p = registry.parse(DATA / "readme_verbose.jsonl")
    (c,) = rows(p, "inspector_colls")
    # "coll_start_ts": 1752867229235059, "kernel_start_ts": 1752867229235181,
    # "kernel_stop_ts": 1752867229275811
    assert c["ts"] == 1752867229275811 * 1000
    assert c["kernel_start_ts"] == 1752867229235181 * 1000
    assert c["coll_start_ts"] == 1752867229235059 * 1000
    assert (c["op"], c["coll_sn"], c["timing_source"]) == ("reduce_scatter", 1231, "kernel_gpu")
    assert p.detail["verbose"] is True


def test_readme_proxy_records_are_counted():
    p = registry.parse(DATA / "readme_proxy.jsonl")
    got = {r["record_type"]: r for r in rows(p, "inspector_proxy")}
    assert set(got) == {"proxy_step", "proxy_op"}
    # step: "proxy_step_start_ts": 1752867229235100 ... "proxy_step_stop_ts": 1752867229235140
    assert got["proxy_step"]["dur_ns"] == 40_000
    # op: "proxy_op_start_ts": 1752867229235080 ... "proxy_op_stop_ts": 1752867229235150
    assert got["proxy_op"]["dur_ns"] == 70_000
    # "trans_size_bytes": 1048576, "peer": 3, "direction": "send"
    assert {(r["trans_bytes"], r["peer"], r["direction"]) for r in got.values()} == {
        (1048576, 3, "send")}  # fmt: skip
    assert rows(p, "inspector_colls") == []


def test_readme_marker_alone_is_a_truncated_dump():
    with pytest.raises(IngestError) as e:
        registry.parse(DATA / "readme_dump_stats.jsonl")
    msg = str(e.value)
    assert "readme_dump_stats.jsonl" in msg and "line 1" in msg and "truncated" in msg
    assert "1026" in msg  # "coll_records": 1024 + "proxy_records": 2, none follow


def test_readme_payload_without_marker_is_refused():
    with pytest.raises(IngestError, match=r"readme_orphan_coll_perf.jsonl: line 1: .*without"):
        registry.parse(DATA / "readme_orphan_coll_perf.jsonl")


def test_readme_prometheus_samples():
    p = registry.parse(DATA / "readme_prometheus.prom")
    got = {r["metric"]: r for r in rows(p, "inspector_prom")}
    assert len(got) == 4
    bus = got["nccl_bus_bandwidth_gbs"]
    # ...,collective="AllReduce",message_size="4-5GB",algo_proto="Ring_ll"} 678.263
    assert (bus["value"], bus["op"], bus["message_size"], bus["algo_proto"]) == (
        678.263, "AllReduce", "4-5GB", "Ring_ll")  # fmt: skip
    assert bus["size_lo_bytes"] == 4 * 1024**3 and bus["kind"] == "coll"
    assert (bus["node"], bus["gpu"], bus["comm_name"], bus["nranks"]) == (
        "nvl72004-T01", "GPU0", "DP Group 0", 4)  # fmt: skip
    p2p = got["nccl_p2p_exec_time_microseconds"]
    # p2p_operation="Send",message_size="512-513MB"} 1154.87
    assert (p2p["kind"], p2p["op"], p2p["value"], p2p["size_lo_bytes"]) == (
        "p2p", "Send", 1154.87, 512 * 1024**2)  # fmt: skip


# -- generated jobs ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v4.0", "v4.1", "v4.2", "v4.3"])
@pytest.mark.parametrize("verbose", [False, True])
def test_every_version_reads_every_record(tmp_path, version, verbose):
    spec = JobSpec(hosts=2, gpus=2, minutes=6, version=version, verbose=verbose,
                   proxy=version == "v4.3", ring_size=4, stall_rank=1,
                   stall_minutes=(2.0, 4.0))  # fmt: skip
    truth = write_job(tmp_path, spec)
    n_coll = n_p2p = n_proxy = 0
    lost = 0
    for name in truth.files:
        p = registry.parse(tmp_path / name)
        assert p.format == "nccl_inspector"
        n_coll += p.tables["inspector_colls"].num_rows
        n_p2p += p.tables["inspector_p2p"].num_rows
        n_proxy += p.detail["records"]["proxy"]
        lost += p.detail["lost_records"]["coll"]
        assert p.detail["versions"] == [version]
        assert p.detail["verbose"] is verbose
    assert (n_coll, n_p2p, n_proxy) == (truth.n_coll_records, truth.n_p2p_records,
                                        truth.n_proxy_records)  # fmt: skip
    truth_lost = sum(n for per in truth.dropped.values() for n in per.values())
    assert truth_lost > 0  # the stall overflowed rank 1's rings
    # v4.0 writes no dump_stats: its losses are unknown (0 reported), later versions say them
    assert lost == (0 if version == "v4.0" else truth_lost)


def test_aggregates_only_keeps_no_instance(tmp_path):
    truth = write_job(tmp_path, JobSpec(hosts=2, gpus=2, minutes=4))
    p = inspector.parse(tmp_path / truth.files[0], ParseOptions(inspector_instances=False))
    assert p.tables["inspector_colls"].num_rows == 0
    minutes = rows(p, "inspector_minutes")
    # every coll record of the file is in one minute's count
    assert sum(m["n"] for m in minutes if m["kind"] == "coll") == p.detail["records"]["coll"]
    lines = (tmp_path / truth.files[0]).read_text().splitlines()
    assert p.detail["records"]["coll"] == sum('"coll_perf"' in line for line in lines)


def test_gzip_and_prometheus_from_the_generator(tmp_path):
    truth = write_job(tmp_path / "j", JobSpec(hosts=2, gpus=2, minutes=3))
    raw = (tmp_path / "j" / truth.files[0]).read_bytes()
    gz = tmp_path / "one.log.gz"
    gz.write_bytes(gzip.compress(raw))
    assert registry.parse(gz).n_rows == registry.parse(tmp_path / "j" / truth.files[0]).n_rows
    written = write_prom(tmp_path / "prom", JobSpec(hosts=2, gpus=2, minutes=3), stats=True)
    for name, values in written.items():
        p = registry.parse(tmp_path / "prom" / name)
        got = {(r["metric"], r["comm_name"], r["op"]): r["value"]
               for r in rows(p, "inspector_prom")}  # fmt: skip
        for key, v in values.items():
            if key[0] == "bus":
                assert got[("nccl_bus_bandwidth_gbs", key[1], key[2])] == v
        assert got[("nccl_collectives_total", None, None)] == values[("collectives_total",)]


# -- damaged files ----------------------------------------------------------------------------


def _job_lines(tmp_path):
    truth = write_job(tmp_path / "j", JobSpec(hosts=2, gpus=2, minutes=3))
    return (tmp_path / "j" / truth.files[0]).read_text().splitlines()


def _markers(lines):
    return [i for i, line in enumerate(lines) if '"dump_stats"' in line]


def test_truncated_dump_names_file_and_line(tmp_path):
    lines = _job_lines(tmp_path)
    m = _markers(lines)[-1]
    f = tmp_path / "cut.log"
    f.write_text("\n".join(lines[: m + 1]) + "\n")  # the last marker, none of its records
    with pytest.raises(IngestError, match=rf"cut.log: line {m + 1}: .*truncated dump"):
        registry.parse(f)


def test_interleaved_batches_name_the_line(tmp_path):
    lines = _job_lines(tmp_path)
    m = _markers(lines)
    a, b = m[0], m[1]
    # the second dump's marker moved into the first dump, before its first record
    bad = [*lines[: a + 1], lines[b], *lines[a + 1 : b], *lines[b + 1 :]]
    f = tmp_path / "mixed.log"
    f.write_text("\n".join(bad) + "\n")
    with pytest.raises(IngestError, match=rf"mixed.log: line {a + 2} .*another dump starts"):
        registry.parse(f)


def test_over_long_batch_and_damaged_line(tmp_path):
    lines = _job_lines(tmp_path)
    m = _markers(lines)
    extra = [*lines[: m[1]], lines[m[1] - 1], *lines[m[1] :]]  # one record too many
    f = tmp_path / "long.log"
    f.write_text("\n".join(extra) + "\n")
    with pytest.raises(IngestError, match=rf"long.log: line {m[1] + 1} .*over-long batch"):
        registry.parse(f)
    broken = [*lines[: m[0] + 1], lines[m[0] + 1][:40], *lines[m[0] + 2 :]]
    g = tmp_path / "broken.log"
    g.write_text("\n".join(broken) + "\n")
    with pytest.raises(IngestError, match=rf"broken.log: line {m[0] + 2} .*not JSON"):
        registry.parse(g)


def test_keep_going_skips_and_counts_the_bad_batch(tmp_path):
    lines = _job_lines(tmp_path)
    m = _markers(lines)
    size = m[1] - m[0]  # the first dump: its marker and its records
    n_records = size - 1
    broken = [*lines[: m[0] + 1], "{not json", *lines[m[0] + 2 :]]
    f = tmp_path / "broken.log"
    f.write_text("\n".join(broken) + "\n")
    p = inspector.parse(f, keep_going())
    whole = inspector.parse(tmp_path / "j" / "h00-1000.log")
    (s,) = rows(p, "inspector_skipped")
    assert (s["line"], s["bad_line"]) == (m[0] + 1, m[0] + 2)
    assert p.detail["skipped_batches"] == 1
    # the whole first dump is left out, nothing else
    got = p.detail["records"]["coll"] + p.detail["records"]["p2p"]
    want = whole.detail["records"]["coll"] + whole.detail["records"]["p2p"]
    assert got == want - n_records


def test_sniff_leaves_other_json_alone(tmp_path):
    other = tmp_path / "ground_truth.json"
    other.write_text(json.dumps({"coll_perf": 1, "x": 2}, indent=1))
    assert not inspector.sniff(other, other.read_bytes())
    kineto = b'{"schemaVersion": 1, "traceEvents": []}'
    assert not inspector.sniff(other, kineto)
    assert inspector.sniff(other, (DATA / "readme_prometheus.prom").read_bytes())
