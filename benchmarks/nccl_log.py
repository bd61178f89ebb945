"""NCCL log parsing throughput and memory: MB/s and peak RSS for streamed logs of growing size.

Generates a realistic big log in a temporary directory (64 ranks on 8 nodes: the INIT/NET/
GRAPH/TUNING preamble of tests/nccl_log_gen.py, then NCCL_DEBUG_SUBSYS=COLL lines of every
rank interleaved, with a sprinkle of foreign and unknown lines), parses each size in a fresh
process, and prints wall time, MB/s, CPU seconds (all threads; MB/CPU-s hardly depends on
what else the machine runs), peak RSS and rows, and the CPU seconds of the peer (PEER: every line
read and matched against one regular expression, the floor of any log parser; the interpreter's
start included, as in no other column). Nothing is kept.

    python benchmarks/nccl_log.py                 # 100 MB and 1 GB plain, 100 MB gzip
    python benchmarks/nccl_log.py --sizes-mb 50   # quicker
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from nccl_log_gen import Job, make_log  # noqa: E402

CHILD = """
import json, resource, sys, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
from ingest.formats.nccl_log import parse
t1, c1 = time.perf_counter(), cpu()
p = parse(sys.argv[1])
t2, c2 = time.perf_counter(), cpu()
print(json.dumps({
    "parse_s": t2 - t1, "cpu_s": c2 - c1,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "lines": p.detail["lines"], "rows": {k: t.num_rows for k, t in p.tables.items()},
}))
"""

#: The nearest peer that runs here: no tool installable with pip parses NCCL_DEBUG logs, so the
#: floor is the least any parser does: read every line and match one regular expression.
PEER = """
import gzip, json, re, resource, sys
coll = re.compile(rb"NCCL INFO (\\w+): opCount ([0-9a-f]+)")
path = sys.argv[1]
n = 0
with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
    for line in f:
        n += coll.search(line) is not None
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "matched": n}))
"""


def block(rng: random.Random, ranks: int = 64, lines: int = 20000) -> bytes:
    """A block of interleaved COLL lines of `ranks` processes (and a little noise)."""
    ops = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Send", "Recv")
    out = []
    for i in range(lines):
        r = rng.randrange(ranks)
        if i % 5000 == 0:
            out.append(f"step {i} loss {rng.random():.4f}")
        if i % 9973 == 0:
            out.append(
                f"node{r // 8 + 1:02d}:{4100 + r}:{4100 + r} [{r % 8}] NCCL INFO New thing {i}"
            )
        op = ops[i % len(ops)]
        out.append(
            f"node{r // 8 + 1:02d}:{4100 + r}:{4100 + r} [{r % 8}] NCCL INFO {op}: opCount {i:x} "
            f"sendbuff 0x7f2a{rng.randrange(1 << 24):08x} recvbuff 0x7f2b{rng.randrange(1 << 24):08x} "
            f"count {rng.randrange(1, 1 << 26)} datatype {rng.choice((7, 9))} op 0 root "
            f"{rng.randrange(ranks) if op in ('Send', 'Recv', 'Broadcast') else 0} "
            f"comm 0x55aa{r:04x}0000 [nranks={ranks}] stream 0x55aa{r:04x}2000"
        )
    return ("\n".join(out) + "\n").encode()


def write_log(path: Path, size_mb: int, gz: bool = False) -> int:
    """Write a log of about `size_mb` MB (uncompressed); returns its uncompressed bytes."""
    rng = random.Random(0)
    head = make_log(Job(version="2.21.5", nodes=8, gpus=8, tuning=True, noise=False))
    data = ("\n".join(head.lines) + "\n").encode()
    blocks = [block(rng) for _ in range(4)]
    target, n = size_mb * 1_000_000, 0
    with gzip.open(path, "wb", compresslevel=1) if gz else open(path, "wb") as f:
        f.write(data)
        n += len(data)
        i = 0
        while n < target:
            f.write(blocks[i % len(blocks)])
            n += len(blocks[i % len(blocks)])
            i += 1
    return n


def measure(path: Path, code: str = CHILD) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], cwd=ROOT, check=True, capture_output=True,
        text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--gzip-mb", type=int, default=100, help="size of the gzip case (0: skip)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="commwall-nccl-bench-"))
    try:
        cases = [(mb, False) for mb in args.sizes_mb] + (
            [(args.gzip_mb, True)] if args.gzip_mb else []
        )
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(
            f"{'log':>6} {'MB':>6} {'wall s':>7} {'MB/s':>6} {'CPU s':>6} {'MB/CPU-s':>8} "
            f"{'peak RSS MB':>11} {'lines':>9} {'COLL rows':>9} {'peer CPU s':>10}"
        )
        for mb, gz in cases:
            path = tmp / (f"nccl_{mb}MB.log" + (".gz" if gz else ""))
            nbytes = write_log(path, mb, gz)
            r = measure(path)
            peer = measure(path, PEER)
            path.unlink()
            mb = nbytes / 1e6
            print(
                f"{'gzip' if gz else 'plain':>6} {mb:6.0f} {r['parse_s']:7.2f} "
                f"{mb / r['parse_s']:6.1f} {r['cpu_s']:6.2f} {mb / r['cpu_s']:8.1f} "
                f"{r['peak_rss_mb']:11.0f} {r['lines']['total']:9d} {r['rows']['nccl_colls']:9d} "
                f"{peer['cpu_s']:10.2f}"
            )
            assert r["lines"]["recognised"] + r["lines"]["unknown"] == r["lines"]["nccl"]
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
