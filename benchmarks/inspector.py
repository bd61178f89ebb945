"""NCCL Inspector ingest speed: records per CPU second and peak memory of parsing one v4.3 file,
beside the floor of reading the same lines with a plain JSON decoder, in the same run.

    python benchmarks/inspector.py [--records N] [--aggregates-only] [--keep FILE]
    python benchmarks/inspector.py --workers 2 [--hosts 128 --gpus 8 --minutes 2]

The file is one process's output: dumps of 1,000 collective records (one communicator, 8
ranks, a 1 GiB all-reduce every 100 ms). The goal is 10^8 records (about 30 GB) per file
streamed in bounded memory; the default is 10^6 so that it runs in a minute on two cores. Each
measurement runs in a fresh process, so that its peak RSS is its own.

With `--workers N`, a whole job instead: sample_traces/generate_inspector.py writes a
`--hosts` × `--gpus` job (default 128 × 8 = 1,024 ranks, one file per process, four
communicators per rank) over `--minutes`; the floor (json.loads over every line of every file),
the plain ingest into a store (`commwall ingest`, one process) and the Dask ingest (`commwall
ingest --workers N`, a local cluster) each run in a fresh process. CPU seconds include the
process's children (the Dask workers, once the cluster is closed); peak memory is the largest
of the process and any one child. Both ingests must store the same records.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH = 1000


def write(path: Path, n: int) -> int:
    """Write a v4.3 file of about `n` collective records; return its size in bytes."""
    head = (
        '{"header":{"id":"0x7f8c496ae9f661","comm_name":"DP","rank":2,"n_ranks":8,"nnodes":2},'
        '"metadata":{"inspector_output_format_version":"v4.3","git_rev":"","rec_mechanism":'
        '"nccl_profiler_interface","dump_timestamp_us":%d,"hostname":"h01","pid":4242},'
        '"dump_stats":{"coll_records":%d,"coll_dropped_total":0,"coll_dropped_since_last_dump":0,'
        '"p2p_records":0,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0}}\n'
    )
    rec = (
        '{"coll_perf":{"coll":"AllReduce","coll_algo":"RING","coll_proto":"SIMPLE","coll_sn":%d,'
        '"coll_msg_size_bytes":1073741824,"coll_exec_time_us":%d,"coll_timing_source":'
        '"kernel_gpu","coll_algobw_gbs":%.6f,"coll_busbw_gbs":%.6f}}\n'
    )
    t0 = 1_767_225_600_000_000
    with open(path, "w") as f:
        sn = 0
        while sn < n:
            f.write(head % (t0 + (sn + BATCH) * 100_000, BATCH))
            lines = []
            for _ in range(BATCH):
                sn += 1
                e = 4000 + sn % 97
                bw = 1073741824 / (e * 1000)
                lines.append(rec % (sn, e, bw, bw * 1.75))
            f.write("".join(lines))
    return path.stat().st_size


def _child(mode: str, path: str, aggregates_only: bool) -> None:
    t = time.process_time()
    if mode == "floor":
        n = 0
        with open(path, "rb") as f:
            for line in f:
                json.loads(line)
                n += 1
    else:
        from commwall.ingest.formats import inspector
        from commwall.ingest.options import ParseOptions

        # as `commwall ingest --max-file-size` above the file's size (the default cap is 8 GB)
        size = Path(path).stat().st_size
        opts = ParseOptions(inspector_instances=not aggregates_only, max_bytes=size + 1)
        p = inspector.parse(Path(path), opts)
        n = p.detail["lines"]
    cpu = time.process_time() - t
    peak = _own_peak()
    print(json.dumps({"mode": mode, "lines": n, "cpu_s": cpu, "peak_bytes": peak}))


def measure(mode: str, path: Path, aggregates_only: bool) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, str(path)]
    if aggregates_only:
        cmd.append("--aggregates-only")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{mode} on {path} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _job_child(mode: str, folder: str, workers: int) -> None:
    """One measurement of a whole job (module docstring): floor | plain | dask."""
    here = Path(__file__).resolve().parent  # benchmarks/distributed.py would shadow Dask's
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    t, w = time.process_time(), time.perf_counter()
    files = sorted(Path(folder).glob("*.log"))
    out: dict = {"mode": mode}
    if mode == "floor":
        n = 0
        for f in files:
            with open(f, "rb") as fh:
                for line in fh:
                    json.loads(line)
                    n += 1
        out["lines"] = n
    else:
        from commwall.ingest import store
        from commwall.ingest.options import ParseOptions

        db = Path(folder).parent / f"{mode}.duckdb"
        con = store.connect(db)
        opts = ParseOptions(jobs=1)
        if mode == "plain":
            summary = store.ingest(con, "job", files, opts)
        else:
            from commwall.ingest.exec import cluster, distributed

            with cluster.client(workers, None) as client:
                summary = distributed.ingest(
                    con, "job", files, f"{db}.shards", opts, executor=cluster.executor(client)
                )
        assert summary.committed and not summary.failed, summary.failed
        out["colls"] = con.execute("SELECT count(*) FROM inspector_colls").fetchone()[0]
        out["minutes_n"] = con.execute(
            "SELECT sum(n) FROM inspector_minutes WHERE kind = 'coll'"
        ).fetchone()[0]
        con.close()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["cpu_s"] = time.process_time() - t + kids.ru_utime + kids.ru_stime
    out["wall_s"] = time.perf_counter() - w
    out["peak_bytes"] = max(_own_peak(), kids.ru_maxrss * 1024)
    print(json.dumps(out))


def _own_peak() -> int:
    """This process's peak resident memory since it started (VmHWM: ru_maxrss would carry the
    parent's size over fork and exec on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _generate(folder: str, hosts: int, gpus: int, minutes: int, per_minute: int) -> None:
    """Write the job (in its own process, so that the measuring processes start small)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from commwall.sample_traces.generate_inspector import JobSpec, write_job

    spec = JobSpec(hosts=hosts, gpus=gpus, minutes=minutes, colls_per_minute=per_minute,
                   slow_rank=None, nic_host=None)  # fmt: skip
    truth = write_job(folder, spec)
    print(json.dumps({"files": len(truth.files), "coll": truth.n_coll_records,
                      "p2p": truth.n_p2p_records}))  # fmt: skip


def job(args: argparse.Namespace) -> int:
    """The Dask path on a generated job, beside the plain ingest and the floor."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "job"
        t = time.perf_counter()
        gen = [str(a) for a in (folder, args.hosts, args.gpus, args.minutes,
                                args.colls_per_minute)]  # fmt: skip
        cmd = [sys.executable, __file__, "--gen-child", *gen]
        truth = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        gen_s = time.perf_counter() - t
        n = truth["coll"] + truth["p2p"]
        size = sum(f.stat().st_size for f in folder.glob("*.log"))
        print(
            f"{args.hosts * args.gpus:,} ranks ({args.hosts} hosts × {args.gpus}), "
            f"{truth['files']:,} files, {n:,} records ({truth['coll']:,} collective), "
            f"{size / 1e6:,.0f} MB; generated in {gen_s:.0f} s"
        )
        got = {}
        for mode in ("floor", "plain", "dask"):
            cmd = [sys.executable, __file__, "--job-child", mode, str(folder), str(args.workers)]
            r = json.loads(
                subprocess.run(cmd, check=True, capture_output=True, text=True)
                .stdout.strip()
                .splitlines()[-1]
            )
            got[mode] = r
            label = mode if mode != "dask" else f"dask ×{args.workers}"
            print(
                f"{label:9s} {n / r['cpu_s']:>12,.0f} records per CPU second  "
                f"{r['cpu_s']:6.1f} CPU s  {r['wall_s']:6.1f} s wall  "
                f"peak {r['peak_bytes'] / 1e6:,.0f} MB"
            )
        same = all(got["plain"][k] == got["dask"][k] for k in ("colls", "minutes_n"))
        want = truth["coll"]
        print(
            f"same records stored: {same} ({got['dask']['colls']:,} collective rows, "
            f"{got['dask']['minutes_n']:,} in the minute aggregates; the generator wrote {want:,})"
        )
        return 0 if same and got["dask"]["colls"] == want else 1


def main(argv: list[str] | None = None) -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--records", type=int, default=1_000_000)
    a.add_argument("--aggregates-only", action="store_true")
    a.add_argument("--keep", help="write the file here (default: a temporary file)")
    a.add_argument("--workers", type=int, help="a whole generated job, ingested with Dask too")
    a.add_argument("--hosts", type=int, default=128)
    a.add_argument("--gpus", type=int, default=8)
    a.add_argument("--minutes", type=int, default=2)
    a.add_argument("--colls-per-minute", type=int, default=6)
    a.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a.add_argument("--job-child", nargs=3, help=argparse.SUPPRESS)
    a.add_argument("--gen-child", nargs=5, help=argparse.SUPPRESS)
    args = a.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], args.aggregates_only)
        return 0
    if args.gen_child:
        _generate(args.gen_child[0], *map(int, args.gen_child[1:]))
        return 0
    if args.job_child:
        _job_child(args.job_child[0], args.job_child[1], int(args.job_child[2]))
        return 0
    if args.workers:
        return job(args)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "inspector.log"
        size = write(path, args.records)
        n = args.records
        print(f"{n:,} collective records, {size / 1e6:,.0f} MB")
        for mode in ("floor", "commwall"):
            r = measure(mode, path, args.aggregates_only)
            print(
                f"{mode:9s} {n / r['cpu_s']:>12,.0f} records per CPU second  "
                f"{r['cpu_s']:6.1f} s  peak {r['peak_bytes'] / 1e6:,.0f} MB"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
