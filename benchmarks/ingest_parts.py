"""Where one core's time goes when commwall reads a Kineto trace, and what DuckDB's JSON reader
would do instead (the figures behind the README's "≥ 300 MB/s: not met").

On the largest real trace in the repo (53.7 MB, benchmarks/ingest.py's REAL), in this process,
best of --repeat runs each:
  * decode: msgspec into the typed structs only (pieces as the fast path cuts them);
  * decode + columns: the same, each piece turned into the column chunks as `parse` does;
  * parse: the whole `parse` with one process (columns, collectives, tables).
Then DuckDB's `read_json` (its own threads) on --scale files each holding the trace's event
array (the array alone: DuckDB cannot read the array inside Kineto's top-level object in
pieces; one file per copy, since DuckDB reads one array file on one thread):
bare events, with the three args every event needs, and with the sixteen args commwall reads;
no checks of what it reads (DuckDB converts "12" to a time of 12 and true to a duration of 1,
where the msgspec decoder refuses the file); then the same with every field of the event read
as JSON and its JSON type returned beside its value, what checking types as the decoder does
would need (the types of the sixteen args not even included); what copying the arrays out
into those files costs (the step a reader of Kineto files through DuckDB would add); and, for
comparison, commwall's own parse of the trace scaled the same way (benchmarks/ingest.py's
`scaled`) in its default processes. Last, what importing pandas costs a fresh process (pyarrow
imports it on its first array). Usage:

    python benchmarks/ingest_parts.py [--repeat 3] [--scale 10]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from commwall.ingest.formats.kineto import columns as kineto_columns  # noqa: E402
from commwall.ingest.formats.kineto import events as kineto_events  # noqa: E402
from commwall.ingest.formats.kineto import reader as kineto  # noqa: E402
from commwall.ingest.sources import read_bytes  # noqa: E402

REAL = ROOT / "tests/data/kineto/hta_df_index_resolver_rank1of2/df_index_resolver.json.gz"
THREE = ["$.stream", "$.correlation", '$."External id"']
SIXTEEN = THREE + [
    '$."external id"', "$.device", '$."Collective name"', '$."In msg nelems"',
    '$."Out msg nelems"', '$."Group size"', "$.dtype", '$."Process Group Name"',
    '$."Process Group Description"', "$.Seq", '$."Input Dims"', '$."Input type"',
    '$."Concrete Inputs"',
]  # fmt: skip
COLUMNS = (
    "{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'VARCHAR', tid: 'VARCHAR', "
    "ts: 'DOUBLE', dur: 'DOUBLE', args: 'JSON'}"
)


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def decode(path: Path, columns: bool) -> None:
    trace = kineto_events.Trace(path, read_bytes(path))  # memory-mapped, as `parse` reads it
    batches = trace.events(trace.spans())
    if columns:
        kineto_columns.Chunks().collect(batches, re.compile("nccl|gloo"))
    else:
        for _ in batches:
            pass


def read_json(con: duckdb.DuckDBPyConnection, files: list[str], args: list[str] | None) -> None:
    picked = "" if args is None else f", json_extract(args, {args}) AS a"
    con.sql(
        f"SELECT * EXCLUDE (args){picked} FROM read_json({files}, format = 'array', "
        f"maximum_object_size = 1000000, columns = {COLUMNS}) WHERE ph = 'X'"
    ).to_arrow_table()


def read_json_typed(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    """The events with each field's JSON type beside its value, for checking types."""
    fields = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
    as_json = "{" + ", ".join(f"{f}: 'JSON'" for f in (*fields, "args")) + "}"
    typed = ", ".join(f"json_type({f}) AS {f}_type, {f}->>'$' AS {f}" for f in fields)
    con.sql(
        f"SELECT {typed}, json_type(args) AS args_type, json_extract(args, {SIXTEEN}) AS a "
        f"FROM read_json({files}, format = 'array', maximum_object_size = 1000000, "
        f"columns = {as_json})"
    ).to_arrow_table()


def _scaled(text: bytes, k: int) -> bytes:
    """The trace with its events repeated k times (benchmarks/ingest.py's `scaled`)."""
    spec = importlib.util.spec_from_file_location("ingest_bench", ROOT / "benchmarks/ingest.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.scaled(text, k)


def pandas_import() -> tuple[float, float]:
    """(seconds, MB of resident memory) that `import pandas` adds to a fresh process with
    numpy, pyarrow and DuckDB already imported."""
    code = (
        "import time, resource, numpy, pyarrow, duckdb\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * 4096 / 1e6\n"
        "r, t = rss(), time.perf_counter()\n"
        "import pandas\n"
        "print(time.perf_counter() - t, rss() - r)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    s, mb = out.stdout.split()
    return float(s), float(mb)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=int, default=10, help="copies of the event array for DuckDB")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank1.json"
        path.write_bytes(gzip.decompress(REAL.read_bytes()))
        mb = path.stat().st_size / 1e6
        print(f"one process, {mb:.1f} MB real trace, best of {args.repeat}:")
        parts = {
            "decode (msgspec, typed structs)": lambda: decode(path, False),
            "decode + columns": lambda: decode(path, True),
            "parse (all of it, one process)": lambda: kineto.parse(path, rank=0, jobs=1),
        }
        for label, fn in parts.items():
            s = best(fn, args.repeat)
            print(f"  {label:<34} {s:6.3f} s  {mb / s:6.0f} MB/CPU-s")

        raw = msgspec.json.decode(path.read_bytes(), type=dict[str, msgspec.Raw])["traceEvents"]
        files = []
        t = time.perf_counter()
        for i in range(args.scale):  # one file per copy: DuckDB spreads files over its threads
            files.append(str(Path(tmp) / f"events{i}.json"))
            Path(files[-1]).write_bytes(raw)
        copied = time.perf_counter() - t
        emb = args.scale * len(raw) / 1e6
        con = duckdb.connect()
        print(f"DuckDB read_json, {emb:.0f} MB of events ({args.scale} files), its own threads:")
        print(
            f"  {'copying the arrays out (the files)':<34} {copied:6.3f} s  {emb / copied:6.0f} MB/s"
        )
        for label, picked in (("bare events", None), ("3 args", THREE), ("16 args", SIXTEEN)):
            s = best(lambda p=picked: read_json(con, files, p), args.repeat)
            print(f"  {label:<34} {s:6.3f} s  {emb / s:6.0f} MB/s")
        s = best(lambda: read_json_typed(con, files), args.repeat)
        print(f"  {'16 args, field types returned':<34} {s:6.3f} s  {emb / s:6.0f} MB/s")
        # against the same events read the way commwall reads them, in its default processes
        big = Path(tmp) / "rank1_scaled.json"
        big.write_bytes(_scaled(path.read_bytes(), args.scale))
        s = best(lambda: kineto.parse(big, rank=0), args.repeat)
        label = f"commwall's parse, {big.stat().st_size / 1e6:.0f} MB"
        print(f"  {label:<34} {s:6.3f} s  {emb / s:6.0f} MB/s (the events' MB)")
    s, added = pandas_import()
    print(f"import pandas after numpy, pyarrow, DuckDB: {s:.3f} s, {added:.0f} MB resident")


if __name__ == "__main__":
    main()
