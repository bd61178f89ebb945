"""The worker tasks of distributed ingest: parse one file and write its big tables as Parquet;
merge small shards of neighbouring ranks. Tasks touch no database: the driver
(ingest/exec/distributed.py) registers what they return.

A shard holds rows of one table with every column of that store table (run_id and file_id
included, so analysis reads it as is). Parsing writes one shard per (table, file, rank):

    <dataset>/run=<run>/table=<table>/rank=<rank>/<file_id>-<sha256[:16]>.parquet

and small ones (under MERGE_SMALL) are then merged, in rank order, into shards of about
MERGE_BYTES:

    <dataset>/run=<run>/table=<table>/rank=<first>-<last>/<file_id>-<count>.parquet

`dataset` is a local directory or an fsspec URL. Local shards are written under a temporary name
and renamed (atomic); object stores publish an object only once it is closed, and a shard left
half-written by a crash is in no manifest, hence in no run.
"""

from __future__ import annotations

import re
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from commwall.ingest.errors import IngestError, parser_failure
from commwall.ingest.formats import registry as formats
from commwall.ingest.options import ParseOptions
from commwall.ingest.parsed import Parsed
from commwall.ingest.sources import sha256_of

#: Tables written as shards; every other table a parser returns goes back to the driver inline.
SHARDED = ("activities", "collectives")
#: Target size of a merged shard: every query opens every shard of a run, and thousands of small
#: files cost more to open than to read (docs/scale_out.md).
MERGE_BYTES = 64 << 20
#: Shards of at least this size stay as they are: opening one costs little next to reading it.
MERGE_SMALL = 8 << 20
#: Most shards merged into one (more groups: more merge tasks run side by side).
MERGE_PARTS = 512
#: Rows per Parquet row group of a merged shard.
ROW_GROUP_ROWS = 1 << 17


@dataclass(frozen=True)
class ShardJob:
    """One file to parse into run `run` (id `run_id`) as file `file_id`; `parse` replaces
    format detection (tests)."""

    path: str
    run: str
    run_id: int
    file_id: int
    dataset: str
    opts: ParseOptions = ParseOptions()
    parse: Callable[[Path, ParseOptions], Parsed] | None = None


@dataclass(frozen=True)
class Shard:
    """One Parquet shard: its table, rank (None: several), absolute path or URL, rows, bytes."""

    table: str
    rank: int | None
    path: str
    n_rows: int
    size_bytes: int


@dataclass
class ShardResult:
    """What a task did with one file: `status` is parsed | skipped (content already in the run)
    | failed (`problem` says why). `tables` are the small tables, returned inline."""

    path: str
    status: str
    sha256: str = ""
    size: int = 0
    format: str | None = None
    detail: dict = field(default_factory=dict)
    n_rows: int = 0
    tables: dict[str, pa.Table] = field(default_factory=dict)
    shards: list[Shard] = field(default_factory=list)
    problem: str | None = None
    trace: str | None = None  # the traceback of a parser bug

    def parsed(self) -> Parsed:
        """The inline part as a Parsed (format, small tables, detail)."""
        return Parsed(self.format or "", self.tables, self.detail)


@dataclass(frozen=True)
class MergeJob:
    """Shards of one table and neighbouring ranks to merge into `dest`."""

    table: str
    parts: tuple[str, ...]
    dest: str


def dataset_url(dataset: str | Path) -> str:
    """`dataset` made absolute: a URL as is, a local path resolved (workers have other cwds)."""
    s = str(dataset)
    return s if "://" in s else str(Path(s).expanduser().resolve())


def shard_url(dataset: str, run: str, table: str, ranks: str, name: str) -> str:
    """Where a shard of `table` for rank (or rank range) `ranks` of run `run` goes: a local
    path or a URL, as the manifest names it."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run) or "_"
    return f"{dataset.rstrip('/')}/run={safe}/table={table}/rank={ranks}/{name}.parquet"


def _write(url: str, tables: Iterable[pa.Table]) -> int:
    """Write `tables` (one schema) to `url` as one Parquet file, whole or not at all; returns its
    size in bytes."""
    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    local = isinstance(fs, LocalFileSystem)
    target = f"{path}.tmp-{uuid.uuid4().hex}" if local else path
    with fs.open(target, "wb") as f:
        writer = None
        for t in tables:
            writer = writer or pq.ParquetWriter(f, t.schema, compression="zstd")
            writer.write_table(t)
        if writer is None:
            raise ValueError(f"{url}: no tables to write")
        writer.close()
        size = f.tell()
    if local:
        fs.mv(target, path)
    return size


def write_shards(job: ShardJob, sha256: str, parsed: Parsed) -> list[Shard]:
    """Write the SHARDED tables of `parsed`, one shard per rank; returns what was written."""
    out: list[Shard] = []
    try:
        for name in SHARDED:
            table = parsed.tables.get(name)
            if table is None or table.num_rows == 0:
                continue
            n = table.num_rows
            table = table.add_column(0, "file_id", pa.array([job.file_id] * n, pa.int32()))
            table = table.add_column(0, "run_id", pa.array([job.run_id] * n, pa.int32()))
            for rank in sorted(pc.unique(table.column("rank")).to_pylist()):
                part = table.filter(pc.equal(table.column("rank"), rank))
                url = shard_url(
                    job.dataset, job.run, name, str(rank), f"{job.file_id}-{sha256[:16]}"
                )
                out.append(Shard(name, rank, url, part.num_rows, _write(url, [part])))
    except BaseException:
        remove([s.path for s in out])
        raise
    return out


def parse_to_shards(job: ShardJob, known: frozenset[str] = frozenset()) -> ShardResult:
    """Hash, parse and shard one file. A file whose sha256 is in `known` is skipped unparsed.
    A bad file (IngestError, OSError) comes back as failed rather than raising, and so does a
    parser bug (any other exception: the problem asks for a report, `trace` holds the
    traceback for the driver to log), so that Dask retries only workers that died."""
    path = Path(job.path)
    res = ShardResult(path=job.path, status="parsed")
    try:
        res.sha256, res.size = sha256_of(path, job.opts.max_bytes), path.stat().st_size
        if res.sha256 in known:
            res.status = "skipped"
            return res
        parsed = (job.parse or formats.parse)(path, job.opts)
        res.format, res.detail, res.n_rows = parsed.format, parsed.detail, parsed.n_rows
        res.tables = {k: t for k, t in parsed.tables.items() if k not in SHARDED}
        res.shards = write_shards(job, res.sha256, parsed)
    except Exception as e:  # noqa: BLE001 (a parser bug fails its file, as in store.ingest)
        res.status = "failed"
        if isinstance(e, IngestError | OSError):
            res.problem = e.problem if isinstance(e, IngestError) else str(e)
        else:
            res.problem, res.trace = parser_failure(path, e).problem, traceback.format_exc()
        res.tables, res.shards = {}, []
    return res


def merge_groups(shards: list[Shard], limit: int | None = None) -> list[list[Shard]]:
    """Shards of one table in rank order, cut into runs of about `limit` bytes (MERGE_BYTES)
    and at most MERGE_PARTS shards; a shard of MERGE_SMALL bytes or more is a run alone."""
    limit = MERGE_BYTES if limit is None else limit
    groups: list[list[Shard]] = [[]]
    size = 0
    for s in sorted(shards, key=lambda s: (s.rank, s.path)):
        big = s.size_bytes >= MERGE_SMALL
        full = big or len(groups[-1]) >= MERGE_PARTS or size + s.size_bytes > limit
        if groups[-1] and full:
            groups.append([])
            size = 0
        groups[-1].append(s)
        size += s.size_bytes
        if big:
            groups.append([])
            size = 0
    return [g for g in groups if g]


def _row_groups(urls: Iterable[str]) -> Iterator[pa.Table]:
    """The rows of the shards at `urls`, in order, in tables of about ROW_GROUP_ROWS rows."""
    batch: list[pa.Table] = []
    for url in urls:
        fs, path = fsspec.core.url_to_fs(url)
        with fs.open(path, "rb") as f:
            batch.append(pq.read_table(f))
        if sum(t.num_rows for t in batch) >= ROW_GROUP_ROWS:
            yield pa.concat_tables(batch)
            batch = []
    if batch:
        yield pa.concat_tables(batch)


def merge_shards(job: MergeJob) -> Shard:
    """Write the rows of `job.parts` as one shard at `job.dest` (the parts stay: the driver
    deletes them once the manifest lists the merged shard)."""
    rows = 0

    def counted() -> Iterator[pa.Table]:
        nonlocal rows
        for t in _row_groups(job.parts):
            rows += t.num_rows
            yield t

    size = _write(job.dest, counted())
    return Shard(job.table, None, job.dest, rows, size)


def remove(paths: list[str]) -> None:
    """Delete shards of one dataset (best effort: a missing one is fine), in one bulk call
    where the store has one (object stores delete a thousand keys per request)."""
    if not paths:
        return
    fs = fsspec.core.url_to_fs(paths[0])[0]
    inner = [fsspec.core.url_to_fs(p)[1] for p in paths]
    try:
        fs.rm(inner)
    except FileNotFoundError:
        for p in inner:
            try:
                fs.rm_file(p)
            except FileNotFoundError:
                pass
