"""Distributed ingest at scale: throughput with 1 and 2 Dask workers, cross-rank matching on the
shards in DuckDB, and the per-file rates docs/scale_out.md extrapolates from.

1. A generated run (tests/synthetic_traces.py) of `--ranks` Kineto files is ingested the embedded
   way (store.ingest), as shards in process (no Dask), and on LocalClusters of each `--workers`
   count. Cluster start is timed apart; "register" is what follows the last parse on the driver:
   deciding which files land, merging small shards, the one transaction, deleting merged parts.
2. Cross-rank matching (MACROS: match, clock fit, straggler scores) on the sharded and the
   embedded store of that run.
3. The worker task alone (parse_to_shards) on the largest real trace in the repository, for the
   per-core rate of large files (the run above is many small ones).
4. Registration and matching at `--match-ranks` ranks (4,096 by default): the same simulation's
   rows, built directly (store_tables), sharded through distributed.ingest in process, so the
   driver's part and DuckDB's cross-rank queries are measured at that scale without JSON.

    python benchmarks/distributed.py [--ranks 256] [--workers 1 2] [--repeat 2] [--match-ranks 4096]
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
# the generator lives in tests/; this folder goes: its ingest.py and distributed.py shadow packages
sys.path[0:1] = [str(ROOT), str(ROOT / "tests")]

from synthetic_traces import Scenario, simulate, store_tables, write_kineto  # noqa: E402

from commwall.analysis import db  # noqa: E402
from commwall.ingest import store  # noqa: E402
from commwall.ingest.exec import cluster, distributed  # noqa: E402
from commwall.ingest.exec.shard_writer import ShardJob, parse_to_shards  # noqa: E402
from commwall.ingest.parsed import Parsed  # noqa: E402

BIG = ROOT / "tests/data/kineto/hta_df_index_resolver_rank1of2/df_index_resolver.json.gz"


def scenario(ranks: int, steps: int, per_step: int) -> Scenario:
    """`ranks` ranks, 8 per host, a compute straggler and skewed host clocks."""
    hosts = max(1, ranks // 8)
    offsets = tuple(float(h * 7 % 50) for h in range(hosts))
    return Scenario(
        hosts=hosts, ranks_per_host=min(8, ranks), steps=steps, collectives_per_step=per_step,
        straggler=ranks // 3, delay_us=2000.0, clock_offsets_us=offsets,
    )  # fmt: skip


#: The cross-rank pipeline: match calls into instances, fit clock offsets, score stragglers.
MACROS = ("collective_matches", "clock_offsets", "straggler_ranks")


def timed(fn, *args, **kw):
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t


def ingest_sharded(db_path: Path, paths, dataset: Path, executor=distributed.serial, parse=None):
    """(summary, total seconds, seconds from the last task's result to the commit: the
    driver's registering transaction)."""
    con = store.connect(db_path)
    last = [0.0]

    def on_file(path, result):
        last[0] = time.perf_counter()

    try:
        summary, total = timed(
            distributed.ingest, con, "gen", paths, dataset, executor=executor, on_file=on_file,
            parse=parse,
        )  # fmt: skip
        return summary, total, time.perf_counter() - last[0]
    finally:
        con.close()


def best_of(con, sql: str, n: int = 3) -> tuple[float, int]:
    """(best seconds of n runs, its single value) of a query."""
    times, value = [], 0
    for _ in range(n):
        value, s = timed(lambda: con.execute(sql).fetchone()[0])
        times.append(s)
    return min(times), value


def matching(db_path: Path, label: str) -> None:
    """Time the cross-rank queries on a store."""
    con, opened = timed(db.open_db, db_path)
    rid = db.run_id(con, "gen")
    calls = con.execute("SELECT count(*) FROM collectives WHERE run_id = ?", [rid]).fetchone()[0]
    for macro in MACROS:
        s, rows = best_of(con, f"SELECT count(*) FROM {macro}({int(rid)})")
        print(f"  {label:9} {macro:21} {s:7.3f} s  ({calls:,} calls -> {rows:,} rows; open {opened:.2f} s)")  # fmt: skip
    con.close()


def throughput(args, tmp: Path) -> None:
    sim = simulate(scenario(args.ranks, args.steps, args.per_step))
    paths, gen_s = timed(write_kineto, sim, tmp / "traces")
    mb = sum(p.stat().st_size for p in paths) / 1e6
    print(f"generated {len(paths)} rank files, {mb:.1f} MB ({mb / len(paths):.2f} MB each) in {gen_s:.1f} s")  # fmt: skip
    print(f"best of {args.repeat}; 'register' = after the last parse: decide, merge, commit, clean")
    print(f"{'mode':32} {'total s':>8} {'files/s':>8} {'MB/s':>7} {'register s':>10}")

    def row(label, runs):
        s, reg = min(runs)
        extra = "" if reg is None else f"{reg:10.2f}"
        print(f"{label:32} {s:8.2f} {len(paths) / s:8.1f} {mb / s:7.1f} {extra}")

    def embedded(i):
        con = store.connect(tmp / f"embedded{i}.duckdb")
        try:
            return timed(store.ingest, con, "gen", paths)[1], None
        finally:
            con.close()

    row("embedded (store.ingest)", [embedded(i) for i in range(args.repeat)])
    runs = [
        ingest_sharded(tmp / f"serial{i}.duckdb", paths, tmp / f"ds_serial{i}")[1:]
        for i in range(args.repeat)
    ]
    row("shards, in process", runs)
    for n in args.workers:
        t0 = time.perf_counter()
        with cluster.client(n) as c:
            start = time.perf_counter() - t0
            runs = [
                ingest_sharded(
                    tmp / f"w{n}_{i}.duckdb", paths, tmp / f"ds_w{n}_{i}", cluster.executor(c)
                )[1:]  # fmt: skip
                for i in range(args.repeat)
            ]
        row(f"Dask LocalCluster, {n} worker(s)", runs)
        print(f"{'':32} (cluster start {start:.1f} s, not included)")
    print("cross-rank matching, best of 3:")
    matching(tmp / f"w{args.workers[-1]}_0.duckdb", "shards")
    matching(tmp / "embedded0.duckdb", "embedded")


def big_file(tmp: Path) -> None:
    """The worker task on one large real trace: seconds, MB/s of JSON, shard bytes."""
    mb = uncompressed_mb(BIG)
    best = min(
        timed(parse_to_shards, ShardJob(str(BIG), "big", 1, i, str(tmp / f"big{i}")))[1]
        for i in range(3)
    )
    res = parse_to_shards(ShardJob(str(BIG), "big", 1, 9, str(tmp / "big9")))
    shards = sum(s.size_bytes for s in res.shards) / 1e6
    print(f"worker task on {BIG.name} ({mb:.1f} MB of JSON, {res.n_rows:,} rows): {best:.2f} s = {mb / best:.0f} MB/s per core; shards {shards:.2f} MB ({mb / shards:.0f}x smaller)")  # fmt: skip


def uncompressed_mb(path: Path) -> float:
    with gzip.open(path, "rb") as f:
        return sum(len(b) for b in iter(lambda: f.read(1 << 24), b"")) / 1e6


def at_scale(ranks: int, args, tmp: Path) -> None:
    """Registration and matching of `ranks` ranks, rows built without JSON."""
    sim = simulate(scenario(ranks, args.match_steps, args.match_per_step))
    tables, build_s = timed(store_tables, sim)
    parts = {name: split_by_rank(t) for name, t in tables.items()}
    stubs = tmp / f"stubs{ranks}"
    stubs.mkdir()
    paths = []
    for r in range(ranks):  # one small file per rank: its content names the rank
        paths.append(stubs / f"rank{r}")
        paths[-1].write_text(str(r))

    def parse(path, opts):
        r = int(path.read_text())
        return Parsed("kineto", {name: by_rank[r] for name, by_rank in parts.items()})

    summary, total, reg = ingest_sharded(tmp / f"scale{ranks}.duckdb", paths, tmp / f"ds{ranks}", parse=parse)  # fmt: skip
    assert summary.committed
    print(f"{ranks} ranks (rows built in {build_s:.1f} s): sharded + registered in {total:.1f} s, {reg:.2f} s of it after the last parse (decide, merge, commit, clean)")  # fmt: skip
    matching(tmp / f"scale{ranks}.duckdb", "shards")


def split_by_rank(t: pa.Table) -> dict[int, pa.Table]:
    """The rows of each rank (zero-copy slices of the table sorted by rank)."""
    t = t.sort_by("rank")
    ranks = t.column("rank").to_numpy()
    cuts = np.flatnonzero(np.diff(ranks)) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(ranks)]
    return {int(ranks[a]): t.slice(a, b - a) for a, b in zip(starts, ends, strict=True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--per-step", type=int, default=100, help="collectives per step")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=2, help="runs per mode (the best is shown)")
    ap.add_argument("--match-ranks", type=int, nargs="*", default=[4096])
    ap.add_argument("--match-steps", type=int, default=4)
    ap.add_argument("--match-per-step", type=int, default=50)
    args = ap.parse_args()
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other work on the machine)"
    )
    with tempfile.TemporaryDirectory(prefix="commwall-bench-") as d:
        throughput(args, Path(d))
        big_file(Path(d))
        for n in args.match_ranks:
            at_scale(n, args, Path(d))


if __name__ == "__main__":
    main()
