"""A real tensor-parallel run (tests/data/tp/gloo_2rank_tp, made by sample_traces/generate_tp.py):
the program's blocking waits for its all-reduces (`_c10d_functional::wait_tensor` on the main
thread) are communication, never compute. The waits are read from the traces by plain Python."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
from conftest import DATA

import commwall
from commwall.cli.main import main

TP = DATA / "tp" / "gloo_2rank_tp"
WAIT = "_c10d_functional::wait_tensor"


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def trace_truth() -> dict:
    """Per (rank, step): the step's length and the time its main thread spent in waits (ms), and
    the counts of waits and gloo all-reduces per rank."""
    out = {"wait_ms": [], "step_ms": [], "waits": {}, "allreduces": {}}
    for path in sorted(TP.glob("rank*.pt.trace.json.gz")):
        events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
                  if e.get("ph") == "X"]  # fmt: skip
        steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
        main_tid = steps[0]["tid"]
        waits = [e for e in events if e["name"] == WAIT and e["tid"] == main_tid]
        rank = int(path.name[4])
        out["waits"][rank] = len(waits)
        out["allreduces"][rank] = sum(e["name"] == "gloo:all_reduce" for e in events)
        for s in steps:
            a, b = s["ts"], s["ts"] + s["dur"]
            inside = [(max(a, w["ts"]), min(b, w["ts"] + w["dur"])) for w in waits
                      if w["ts"] < b and w["ts"] + w["dur"] > a]  # fmt: skip
            out["wait_ms"].append(_union(inside) / 1000)
            out["step_ms"].append(s["dur"] / 1000)
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("tp") / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "tp", "--quiet", str(TP)]) == 0
    with commwall.Store(db) as store:
        return store.run("tp").report()


def test_the_waits_are_exposed_communication_not_compute(report):
    truth = trace_truth()
    wait = statistics.mean(truth["wait_ms"])
    assert wait > 1.0  # the run does wait for its all-reduces on the main thread
    s = report["summary"]
    exposed = s["exposed_transfer_ms"] + s["exposed_wait_ms"]
    # during a blocking wait the main thread computes nothing: all of it is exposed
    assert exposed >= 0.95 * wait, (exposed, wait)
    assert s["tau_comp_ms"] <= s["step_ms"] - 0.95 * wait
    if wait / statistics.mean(truth["step_ms"]) > 0.15:
        assert report["diagnosis"]["wall"] is True
        assert not report["diagnosis"]["answer"].startswith("No communication wall")


def test_waits_are_no_collectives_of_their_own(report):
    truth = trace_truth()
    gt = json.loads((TP / "ground_truth.json").read_text())
    per_rank = gt["allreduces_per_step"] * len(gt["steps"])
    assert truth["allreduces"] == {0: per_rank, 1: per_rank}
    assert truth["waits"][0] >= per_rank  # a wait per all-reduce at least
    # the matched collectives are the gloo all-reduces, one instance per all-reduce
    assert report["collectives"]["matching"]["instances"] == per_rank


def test_an_op_enclosing_a_wait_is_found_per_thread():
    import numpy as np

    from commwall.ingest.formats.kineto.timeline import enclosing

    # rows: 0 a wrapper [0, 100] around the wait 1 [20, 60]; 2 a child op [70, 90] after it;
    # 3 an op on another thread over the same span; 4 a wrapper ending before the wait ends
    ts = np.array([0, 20, 70, 0, 10])
    dur = np.array([100, 40, 20, 100, 30])
    pid = np.array([1, 1, 1, 1, 1])
    tid = np.array([1, 1, 1, 2, 1])
    wait = np.array([False, True, False, False, False])
    compute = ~wait
    assert enclosing(ts, dur, pid, tid, wait, compute).tolist() == [
        True, False, False, False, False
    ]  # fmt: skip
