"""The merged Perfetto / Chrome-trace timeline: its structure on the real gloo and DLRM sets,
and that splitting it back into one Kineto trace per process and ingesting those gives the
same per-rank and per-step figures as the original files."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
from conftest import DLRM, SAMPLES

from commwall.analysis import db
from commwall.analysis.report.perfetto import (
    CAT_FLOW,
    CAT_TRANSFER,
    CAT_WAIT,
    COLLECTIVES_TID,
    merged_trace,
)
from commwall.analysis.report.session import run_session
from commwall.analysis.steps import overlap
from commwall.cli.main import main
from commwall.ingest import discover, store

GLOO = SAMPLES / "gloo_4rank_compute"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = tmp_path_factory.mktemp("perfetto") / "store.duckdb"
    w = store.connect(path)
    store.ingest(w, "gloo", discover.expand([str(GLOO)]))
    store.ingest(w, "dlrm", discover.expand([str(DLRM)]))
    w.close()
    c = db.open_db(path)
    yield c
    c.close()


@pytest.fixture(scope="module")
def traces(con):
    """The merged trace of each run, built once for the module inside the run's analysis
    session (the matching and clock fit computed once, as a report does)."""
    built: dict[str, dict] = {}

    def trace(run: str) -> dict:
        if run not in built:
            with run_session(con, db.run_id(con, run)):
                built[run] = merged_trace(con, run)
        return built[run]

    return trace


def split(trace: dict, out) -> None:
    """One Kineto file per process of the merged trace: its activities as exported (our own
    commwall_* slices left out; GPU events back on pid 0, tid = their stream)."""
    ranks = sorted({e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"})
    for r in ranks:
        events = []
        for e in trace["traceEvents"]:
            if e["pid"] != r or e["ph"] != "X" or e["cat"].startswith("commwall"):
                continue
            if "stream" in e["args"]:
                e = e | {"pid": 0, "tid": e["args"]["stream"]}
            events.append(e)
        doc = {"schemaVersion": 1, "distributedInfo": {"rank": r, "world_size": len(ranks)},
               "baseTimeNanoseconds": trace["baseTimeNanoseconds"], "traceEvents": events}  # fmt: skip
        (out / f"rank{r}.json").write_text(json.dumps(doc))


def assert_nested(slices):
    """Trace viewers need the slices of one track (pid, tid) nested or disjoint."""
    tracks = {}
    for e in slices:
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for key, spans in tracks.items():
        stack = []
        for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= a + 1e-6:  # µs floats of whole ns
                stack.pop()
            assert not stack or b <= stack[-1] + 1e-6, f"overlapping slices on {key} at {a}"
            stack.append(b)


def test_gloo_structure(traces):
    truth = json.loads((GLOO / "ground_truth.json").read_text())
    n_ranks, straggler = truth["world_size"], truth["straggler_rank"]
    n_inst = truth["collectives_per_step"] * len(truth["steps"])
    trace = traces("gloo")
    ev = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert sorted(names) == list(range(n_ranks))
    assert "straggler (compute)" in names[straggler]
    assert all("straggler" not in n for r, n in names.items() if r != straggler)
    marks = [e for e in ev if e["ph"] == "i"]
    assert [m["pid"] for m in marks] == [straggler]
    x = [e for e in ev if e["ph"] == "X"]
    assert min(e["ts"] for e in x) == 0 and all(e["dur"] >= 0 for e in x)
    # Every instance: one transfer slice per rank; a wait slice on every rank that waited.
    transfers = [e for e in x if e["cat"] == CAT_TRANSFER]
    assert len(transfers) == n_inst * n_ranks
    assert all(e["tid"] >= COLLECTIVES_TID for e in transfers)
    assert_nested(x)
    waits = [e for e in x if e["cat"] == CAT_WAIT]
    for w in waits:  # a wait ends where the instance's transfer starts on the same rank
        t = next(t for t in transfers if t["pid"] == w["pid"]
                 and t["args"]["instance"] == w["args"]["instance"])  # fmt: skip
        assert w["ts"] + w["dur"] == pytest.approx(t["ts"], abs=1e-3)
        assert w["name"].startswith(f"wait for rank {w['args']['last_rank']}")
    # Flows: per instance, from the last arrival to each of the other ranks: s and f paired.
    flows = [e for e in ev if e.get("cat") == CAT_FLOW]
    assert Counter(e["ph"] for e in flows) == {
        "s": n_inst * (n_ranks - 1),
        "f": n_inst * (n_ranks - 1),
    }
    by_id = {}
    for f in flows:
        by_id.setdefault(f["id"], []).append(f)
    assert all(sorted(p["ph"] for p in pair) == ["f", "s"] for pair in by_id.values())
    assert all(pair[0]["pid"] != pair[1]["pid"] for pair in by_id.values())
    # The straggler is the source of most flows (it arrived last at most instances).
    sources = Counter(f["pid"] for f in flows if f["ph"] == "s")
    assert sources.most_common(1)[0][0] == straggler
    json.dumps(trace)  # plain JSON


@pytest.mark.parametrize("run", ["gloo", "dlrm"])
def test_reingest_gives_the_same_figures(con, traces, run, tmp_path):
    trace = traces(run)
    (tmp_path / "split").mkdir()
    split(trace, tmp_path / "split")
    path = tmp_path / "again.duckdb"
    w = store.connect(path)
    store.ingest(w, "again", discover.expand([str(tmp_path / "split")]))
    w.close()
    again = db.open_db(path)
    rid, rid2 = db.run_id(con, run), db.run_id(again, "again")
    a, b = overlap.rank_overlap(con, rid), overlap.rank_overlap(again, rid2)
    cols = ["rank", "span_ns", "compute_ns", "comm_ns", "both_ns", "idle_ns"]
    assert a[cols].values.tolist() == b[cols].values.tolist()
    a, b = overlap.step_overlap(con, rid), overlap.step_overlap(again, rid2)
    cols = ["rank", "step", "span_ns", "compute_ns", "comm_ns", "both_ns", "idle_ns"]
    assert len(a) and a[cols].values.tolist() == b[cols].values.tolist()
    again.close()


def test_cli_writes_gzipped_trace(con, tmp_path, capsys):
    path = con.execute("SELECT path FROM duckdb_databases() WHERE NOT internal").fetchone()
    db_file = str(path[0]) if path and path[0] else None
    assert db_file
    out = tmp_path / "t.json.gz"
    assert main(["export", "--db", db_file, "--run", "dlrm", "--out", str(out)]) == 0
    trace = json.loads(gzip.decompress(out.read_bytes()))
    assert {e["pid"] for e in trace["traceEvents"]} == set(range(8))  # 8 DLRM ranks
    assert main(["export", "--db", db_file, "--run", "dlrm", "--out", str(out), "--diff",
                 "gloo", "--format", "perfetto"]) == 2  # fmt: skip
    assert "--diff" in capsys.readouterr().err
