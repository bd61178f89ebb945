"""Distributed ingest: parse a run's files on an executor into Parquet shards, then register the
run in one transaction (docs/scale_out.md).

The executor runs the tasks of ingest/exec/shard_writer.py: in this process (`serial`, no
Dask) or on a Dask cluster (ingest/exec/cluster.py). Three phases: every file is parsed into
per-rank shards; the driver decides which files land (content already in the run is skipped,
a rank another file has fails, as in `store.ingest`); small shards of the landing files are
merged in rank order. Only then does the driver insert the run, its files rows, the small
tables and the shard manifest, in one transaction: until that commits no shard is part of any
run, so a crash leaves no half run behind. Shards no manifest lists are deleted afterwards.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Generator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from commwall.ingest import store
from commwall.ingest.errors import IngestError, log_parser_failure
from commwall.ingest.exec import shard_writer
from commwall.ingest.exec.shard_writer import MergeJob, Shard, ShardJob, ShardResult
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed

#: Runs `fn(item, **shared)` for every item; yields (index of the item, result) as they finish,
#: the result being the exception when the task failed for good.
#: An executor's results: (item index, result or exception), closed to cancel what is pending.
Results = Generator[tuple[int, Any], None, None]
Executor = Callable[[Callable[..., Any], list, dict[str, Any]], Results]

#: (file_id or None for a merged shard, shard): one row of the manifest.
Listed = tuple[int | None, Shard]


def serial(fn: Callable[..., Any], items: list, shared: dict[str, Any]) -> Results:
    """The in-process executor: one item after the other."""
    for i, item in enumerate(items):
        try:
            yield i, fn(item, **shared)
        except Exception as e:  # a task's failure is its file's, as on Dask
            yield i, e


def ingest(
    con: duckdb.DuckDBPyConnection,
    run: str,
    paths: list[Path],
    dataset: str | Path,
    opts: ParseOptions | None = None,
    notes: str | None = None,
    keep_going: bool = False,
    on_file: Callable[[Path, store.FileResult], None] | None = None,
    executor: Executor = serial,
    parse: Callable[[Path, ParseOptions], Parsed] | None = None,
) -> store.IngestSummary:
    """Store `paths` as run `run` with their activities and collectives as Parquet shards under
    `dataset` (directory or fsspec URL); same contract as `store.ingest`: all or nothing unless
    `keep_going`, content already in the run skipped. `on_file` sees each file's parse outcome
    (parsed | skipped | failed) as tasks finish; the summary holds the final statuses."""
    opts = opts or ParseOptions()
    if executor is not serial:  # the executor spreads files over cores: one process per file
        opts = replace(opts, jobs=1)
    row = con.execute("SELECT run_id FROM runs WHERE name = ?", [run]).fetchone()
    (rid,) = row or con.execute("SELECT nextval('run_id_seq')").fetchone() or (None,)
    known = frozenset(
        r[0] for r in con.execute("SELECT sha256 FROM files WHERE run_id = ?", [rid]).fetchall()
    )
    fids = con.execute("SELECT nextval('file_id_seq') FROM range(?)", [len(paths)]).fetchall()
    url = shard_writer.dataset_url(dataset)
    jobs = [
        ShardJob(str(p), run, rid, fid, url, opts, parse)
        for p, (fid,) in zip(paths, fids, strict=True)
    ]
    results: list[ShardResult | None] = [None] * len(jobs)
    written: list[str] = []  # every shard this ingest wrote
    kept: set[str] = set()  # those a committed manifest lists
    try:
        with contextlib.closing(
            executor(shard_writer.parse_to_shards, jobs, {"known": known})
        ) as it:
            for i, out in it:
                res = out if isinstance(out, ShardResult) else _crashed(jobs[i], out)
                if res.trace:
                    log_parser_failure(res.path, res.trace)
                results[i] = res
                written += [s.path for s in res.shards]
                if res.status == "failed" and not keep_going:
                    raise IngestError(res.path, res.problem or "failed")
                if on_file:
                    on_file(Path(res.path), _file_result(res))
        summary, accepted = _decide(con, run, rid, jobs, results, keep_going)
        listed = _merge(executor, run, url, accepted, written)
        _register(con, run, rid, notes, summary, accepted, listed)
        if summary.committed:
            kept = {s.path for _, s in listed}
    finally:
        shard_writer.remove([p for p in written if p not in kept])
    return summary


def _crashed(job: ShardJob, e: BaseException) -> ShardResult:
    """A task that raised (after Dask's retries), or whose workers kept dying."""
    return ShardResult(path=job.path, status="failed", problem=f"{type(e).__name__}: {e}")


def _file_result(res: ShardResult) -> store.FileResult:
    err = None if res.problem is None else str(IngestError(res.path, res.problem))
    parsed = res.parsed()
    out = store.FileResult(res.path, res.status, res.format, parsed.ranks(), res.n_rows, err)
    out.count(res.detail)
    return out


def _decide(
    con: duckdb.DuckDBPyConnection,
    run: str,
    rid: int,
    jobs: list[ShardJob],
    results: list[ShardResult | None],
    keep_going: bool,
) -> tuple[store.IngestSummary, list[tuple[ShardJob, ShardResult]]]:
    """Which parsed files land: de-dup and rank clashes as `store.ingest` (a later file loses),
    checked in bulk. Reads only: this process holds the store's write lock."""
    summary = store.IngestSummary(run=run, run_id=rid, committed=False)
    q = "SELECT sha256 FROM files WHERE run_id = ?"
    seen = {r[0] for r in con.execute(q, [rid]).fetchall()}
    owners = dict(
        con.execute(
            "SELECT r.rank, any_value(f.path) FROM ranks r LEFT JOIN files f USING (file_id) "
            "WHERE r.run_id = ? GROUP BY r.rank",
            [rid],
        ).fetchall()
    )
    accepted: list[tuple[ShardJob, ShardResult]] = []
    for job, res in zip(jobs, results, strict=True):
        assert res is not None  # every job has its outcome by now
        fr = _file_result(res)
        if res.status == "parsed":
            if res.sha256 in seen:
                fr.status = "skipped"
            elif (clash := next((r for r in fr.ranks if r in owners), None)) is not None:
                err = store.rank_clash(res.path, clash, owners[clash])
                if not keep_going:
                    raise err
                fr.status, fr.error = "failed", str(err)
            else:
                fr.status = "ingested"
                seen.add(res.sha256)
                owners.update(dict.fromkeys(fr.ranks, res.path))
                accepted.append((job, res))
        summary.files.append(fr)
    return summary, accepted


def _merge(
    executor: Executor,
    run: str,
    dataset: str,
    accepted: list[tuple[ShardJob, ShardResult]],
    written: list[str],
) -> list[Listed]:
    """The manifest of the accepted files: their shards, small ones merged per table in rank
    order (a merge that fails keeps its parts: slower to read, same rows). Appends the merged
    shards to `written`."""
    listed: list[Listed] = []
    merges: list[tuple[MergeJob, list[Listed]]] = []
    for table in shard_writer.SHARDED:
        fid_of = {s.path: j.file_id for j, r in accepted for s in r.shards if s.table == table}
        shards = [s for _, r in accepted for s in r.shards if s.table == table]
        for group in shard_writer.merge_groups(shards):
            parts: list[Listed] = [(fid_of[s.path], s) for s in group]
            if len(group) == 1:
                listed += parts
                continue
            first, last = group[0].rank, group[-1].rank
            name = f"{parts[0][0]}-{len(group)}"
            dest = shard_writer.shard_url(dataset, run, table, f"{first}-{last}", name)
            merges.append((MergeJob(table, tuple(s.path for s in group), dest), parts))
    jobs = [m for m, _ in merges]
    written += [m.dest for m in jobs]
    with contextlib.closing(executor(shard_writer.merge_shards, jobs, {})) as it:
        for i, out in it:
            listed += [(None, out)] if isinstance(out, Shard) else merges[i][1]
    return listed


def _register(
    con: duckdb.DuckDBPyConnection,
    run: str,
    rid: int,
    notes: str | None,
    summary: store.IngestSummary,
    accepted: list[tuple[ShardJob, ShardResult]],
    listed: list[Listed],
) -> None:
    """Insert the run's rows and manifest in one transaction (none when nothing lands)."""
    con.execute("BEGIN TRANSACTION")
    try:
        if store.ensure_run(con, run, notes, new_id=rid) != rid:
            raise IngestError(run, "this run was created by another ingest meanwhile; try again")
        if not _has_files(con, rid) and not accepted:
            con.execute("ROLLBACK")
            return
        _insert_all(con, rid, accepted, listed)
        con.execute("COMMIT")
        summary.committed = True
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _has_files(con: duckdb.DuckDBPyConnection, rid: int) -> bool:
    # fetchall, not fetchone: DuckDB refuses `register` while a result is unfinished
    return con.execute("SELECT count(*) FROM files WHERE run_id = ?", [rid]).fetchall()[0][0] > 0


def _insert_all(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    accepted: list[tuple[ShardJob, ShardResult]],
    listed: list[Listed],
) -> None:
    """Files rows, small tables and manifest of the accepted files: one INSERT per table."""
    if not accepted:
        return
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    files = pa.table(
        {
            "file_id": [j.file_id for j, _ in accepted],
            "path": [r.path for _, r in accepted],
            "sha256": [r.sha256 for _, r in accepted],
            "size_bytes": [r.size for _, r in accepted],
            "format": [r.format for _, r in accepted],
            "n_rows": [r.n_rows for _, r in accepted],
            "detail": [json.dumps(r.detail) for _, r in accepted],
            "ingested_at": [now] * len(accepted),
        }
    )
    manifest = pa.Table.from_pylist(
        [
            {"file_id": fid, "table_name": s.table, "rank": s.rank, "path": s.path,
             "n_rows": s.n_rows, "size_bytes": s.size_bytes}
            for fid, s in listed
        ]
    )  # fmt: skip
    small: dict[str, list[pa.Table]] = {}
    for j, r in accepted:
        for name, t in r.tables.items():
            if t.num_rows:
                fid = pa.array([j.file_id] * t.num_rows, pa.int32())
                small.setdefault(name, []).append(t.append_column("file_id", fid))
    batches = {"files": files, "shards": manifest}
    batches.update({k: pa.concat_tables(v, promote_options="default") for k, v in small.items()})
    for table, data in batches.items():
        if data.num_rows == 0:
            continue
        con.register("_new_rows", data)
        con.execute(f"INSERT INTO {table} BY NAME SELECT ? AS run_id, * FROM _new_rows", [rid])
        con.unregister("_new_rows")
