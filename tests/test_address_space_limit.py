"""Under an address-space limit (`ulimit -v`, as HPC login nodes set): every command of a
bundled sample set, and the ingest and report of a rank file of a million events, each run as
the CLI in a process of its own under `prlimit --as`. The post-mortem's charts (V8, which
reserves more than such a limit before it draws) are drawn by a child process that raises its
own limit, or left out with a sentence saying why; DuckDB and the other libraries size their
threads and memory after the limit (addrspace)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import msgspec
import pytest
from conftest import ROOT, SAMPLES

import commwall.addrspace as addrspace

PRLIMIT = shutil.which("prlimit")
pytestmark = pytest.mark.skipif(PRLIMIT is None, reason="needs prlimit (util-linux)")

GIB = 1 << 30
#: The limit a login node typically sets.
CAP = 4 * GIB
SETTINGS = (
    "SELECT current_setting('threads'), current_setting('async_threads'), "
    "current_setting('memory_limit')"
)


def _capped(
    args: list[str], limit: str | int = CAP, **env: str | None
) -> subprocess.CompletedProcess:
    """`args` run under `prlimit --as=limit` (bytes, or "SOFT:HARD") from the repository, with
    `env` added to the environment (None: removed)."""
    assert PRLIMIT is not None
    merged = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run(
        [PRLIMIT, f"--as={limit}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=merged,
    )


def _commwall(*args: str, limit: str | int = CAP, **env: str) -> subprocess.CompletedProcess:
    done = _capped([sys.executable, "-m", "commwall", *args], limit, **env)
    assert done.returncode == 0, f"commwall {' '.join(args)}: {done.returncode}\n{done.stderr}"
    return done


def _report(db: Path, run: str, limit: int = CAP) -> dict:
    """The run's JSON report computed under the limit (not read back from the report cache),
    with every section built: a section that fails is only listed in `analysis_errors`."""
    done = _commwall("report", "--db", str(db), "--run", run, "--format", "json", limit=limit,
                     COMMWALL_CACHE="0")  # fmt: skip
    report = json.loads(done.stdout)
    assert report.get("analysis_errors") is None
    return report


def _figures(page: str) -> list[str]:
    return re.findall(r"<figure>(.*?)</figure>", page, re.S)


def test_the_budget_follows_the_limit_not_the_machine():
    b = addrspace.budget(CAP, n_cores=64)
    assert b is not None and b.threads == 4 and b.memory == int(0.4 * CAP)
    assert addrspace.budget(CAP, n_cores=2).threads == 2  # never more threads than cores
    assert addrspace.budget(GIB // 2, n_cores=64).threads == 1
    assert addrspace._bytes("18.8 GiB") == int(18.8 * GIB)
    assert addrspace._bytes("512.0 MiB") == 512 << 20
    assert addrspace._bytes("2GB") == 2 * 10**9
    assert addrspace._bytes("1000 bytes") == 1000


def test_without_a_limit_duckdb_keeps_its_defaults(tmp_path):
    assert addrspace.limit() is None
    assert addrspace.duckdb_config() == {}
    con = addrspace.connect(tmp_path / "s.duckdb")
    plain = duckdb.connect()
    try:
        assert con.execute(SETTINGS).fetchone() == plain.execute(SETTINGS).fetchone()
    finally:
        con.close()
        plain.close()


def test_every_connection_under_a_limit_is_sized_after_it(tmp_path):
    """The store's connections (ingest's, analysis's) and the environment the libraries read
    when they load: DuckDB no longer starts a worker per core and four I/O threads per
    worker, nor sizes its memory after the machine's."""
    db = tmp_path / "s.duckdb"
    code = (
        "import json, os\nimport commwall.addrspace as addrspace\n"
        "from commwall.ingest import store\n"
        "from commwall.analysis import db\n"
        f"w = store.connect({str(db)!r}); w.close()\n"
        f"con = db.open_db({str(db)!r})\n"
        f"print(json.dumps([list(con.execute({SETTINGS!r}).fetchone()),\n"
        "    {k: os.environ.get(k) for k in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS',\n"
        "                                    'MALLOC_ARENA_MAX', 'ARROW_DEFAULT_MEMORY_POOL')}]))\n"
    )
    done = _capped(
        [sys.executable, "-c", code],
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS=None,
        MALLOC_ARENA_MAX=None,
        ARROW_DEFAULT_MEMORY_POOL=None,
    )
    assert done.returncode == 0, done.stderr
    (threads, io_threads, memory), env = json.loads(done.stdout)
    want = min(4, addrspace.cores())
    assert (int(threads), int(io_threads)) == (want, 1)
    assert addrspace._bytes(memory) == pytest.approx(0.4 * CAP, rel=0.1)  # printed "1.5 GiB"
    # what the user set stays; the rest follows the budget
    assert env == {
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": str(want),
        "MALLOC_ARENA_MAX": str(want),
        "ARROW_DEFAULT_MEMORY_POOL": "system",
    }


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    """The bundled 4-rank sleep set and the 8-rank DLRM set, each ingested under the limit."""
    db = tmp_path_factory.mktemp("asl") / "samples.duckdb"
    for name in ("gloo_4rank_sleep", "dlrm_8rank"):
        done = _commwall("ingest", str(SAMPLES / name), "--db", str(db), "--run", name)
        assert "not prepared" not in done.stderr  # the run's report was built under the limit
    return db


@pytest.mark.parametrize("run", ["gloo_4rank_sleep", "dlrm_8rank"])
def test_sample_sets_report_under_the_limit(sample_store, run):
    report = _report(sample_store, run)
    assert report["run"] == run and report["model"] is not None


def test_export_under_a_limit_says_its_charts_are_not_rendered(sample_store, tmp_path):
    """V8 ends the whole process when it cannot reserve its cage (SIGTRAP, exit 133, under
    any limit up to 64 GiB): the document is written, without its charts, and says why."""
    out = tmp_path / "doc.html"
    _commwall("export", "--db", str(sample_store), "--run", "gloo_4rank_sleep", "--out", str(out))
    page = out.read_text(encoding="utf-8")
    assert "Charts not rendered: the address space is limited (ulimit -v: 4 GiB)" in page
    figs = _figures(page)
    assert len(figs) == 5 and not any("<svg" in f for f in figs)
    assert "<h2 id='stragglers'>" in page  # the rest of the document is all there


def test_export_under_a_soft_limit_draws_its_charts_in_a_child(sample_store, tmp_path):
    """A soft limit under an unlimited hard one: the child drawing the charts lifts its own."""
    out = tmp_path / "doc.html"
    args = ["export", "--db", str(sample_store), "--run", "dlrm_8rank", "--out", str(out)]
    _commwall(*args, limit=f"{CAP}:unlimited")
    page = out.read_text(encoding="utf-8")
    figs = _figures(page)
    assert figs and all(f.lstrip().startswith("<svg") for f in figs)
    assert "Charts not rendered" not in page


def million_event_rank(src: Path, out: Path, events: int = 1_000_000) -> int:
    """A Kineto rank file of at least `events` events: the events of the bundled rank trace
    `src` repeated one after the other (timestamps shifted by its span, steps and flow ids
    renumbered); returns how many events it holds."""
    trace = json.loads(gzip.decompress(src.read_bytes()))
    meta = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    body = [e for e in trace["traceEvents"] if e.get("ph") != "M"]
    start = min(e["ts"] for e in body)
    span = max(e["ts"] + e.get("dur", 0) for e in body) - start + 1000.0
    n_steps = sum(e["name"].startswith("ProfilerStep#") for e in body)
    reps = -(-events // len(body))
    enc = msgspec.json.Encoder()
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    with open(out, "wb") as f:
        f.write(enc.encode(head)[:-1] + b',"traceEvents":' + enc.encode(meta)[:-1])
        for r in range(reps):
            copies = []
            for e in body:
                e = {**e, "ts": round(e["ts"] + r * span, 3)}
                if "id" in e:
                    e["id"] += r * 1_000_000
                if e["name"].startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{int(e['name'][13:]) + r * n_steps}"
                copies.append(e)
            f.write(b"," + enc.encode(copies)[1:-1])
        f.write(b"]}")
    return len(meta) + reps * len(body)


@pytest.mark.slow
def test_a_rank_file_of_a_million_events_under_half_the_limit(tmp_path):
    """Ingest (with its preparation of the report) and report of a million events under
    2 GiB, half of a login node's 4 GiB: on a 2-core machine DuckDB's threads, their glibc
    heaps and Arrow's 1 GiB reservation took the ingest to 2.9 GB of address space before,
    which failed here with ENOMEM (and at 4 GiB from 16 cores up); now about 1 GB."""
    path = tmp_path / "rank0.pt.trace.json"
    n = million_event_rank(SAMPLES / "gloo_4rank_sleep" / "rank0.pt.trace.json.gz", path)
    assert n >= 1_000_000
    db = tmp_path / "big.duckdb"
    done = _commwall("ingest", str(path), "--db", str(db), "--run", "big", limit=2 * GIB)
    assert "not prepared" not in done.stderr
    report = _report(db, "big", limit=2 * GIB)
    assert report["model"]["measured"]["step_ms"] > 0
