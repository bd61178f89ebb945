"""No what-if makes a rank's own serial work shorter (analysis.replay.at_least_own_compute).

The real gloo pair compute_backward_2rank_r0 (tests/data/gloo_pairs): rank 0 runs about 40 ms
of extra matmuls in every backward pass. Its operator time per step, read from the raw trace by
plain Python (the union of its `aten::*` ops inside each ProfilerStep#), is ~45 ms; the replay
used to predict 31.9 ms with "data transfer fully hidden" and 28.0 ms with nobody waiting:
steps shorter than the work one rank must do in them."""

from __future__ import annotations

import re
import statistics

import pandas as pd
import pytest
from conftest import DATA, analysis_store
from kineto_truth import events, ns
from nsys_synth import length, union

from analysis.replay import at_least_own_compute
from analysis.report import build_report

RUN = DATA / "gloo_pairs/compute_backward_2rank_r0/straggler"
STEP = re.compile(r"^ProfilerStep#\d+$")


def aten_per_step(path) -> list[int]:
    """Per ProfilerStep# of the trace: the length of the union of its aten:: ops (ns)."""
    ev = [e for e in events(path) if e.get("ph") == "X"]
    steps = [(ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in ev if STEP.match(e.get("name", ""))]
    ops = [(ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in ev
           if e.get("cat") == "cpu_op" and e.get("name", "").startswith("aten::")]  # fmt: skip
    return [length(union([(max(a, lo), min(b, hi)) for a, b in ops if a < hi and b > lo]))
            for lo, hi in steps]  # fmt: skip


def test_no_whatif_step_is_shorter_than_a_ranks_own_work(tmp_path):
    work = statistics.median(aten_per_step(RUN / "rank0.pt.trace.json.gz")) / 1e6
    assert 40 < work < 55  # ~5 ms of model compute plus the 40 ms injected
    con = analysis_store(tmp_path / "store.duckdb", (RUN,))
    rep = build_report(con, RUN.name, keep_going=False)
    con.close()
    w = {x["key"]: x for x in rep["replay"]["whatifs"]}
    for key in ("transfer_hidden", "no_wait", "comm_hidden", "transfer_2x", "idle_removed"):
        assert w[key]["step_ms"] >= 0.95 * work, (key, w[key]["step_ms"], work)


@pytest.mark.parametrize(
    ("replayed", "floor", "fixed", "expected"),
    [
        (10, 30, (), 30),  # shorter than its own work: its work
        (40, 30, (), 40),  # longer: as replayed
        (10, 30, (0,), 10),  # a rank the what-if fixes changes its work: as replayed
        (10, None, (), 10),  # no operator time known: as replayed
    ],
)
def test_floor_table(replayed, floor, fixed, expected):
    df = pd.DataFrame({"rank": [0], "step": [1], "measured_ns": [50], "replayed_ns": [replayed]})
    floors = pd.DataFrame({"rank": [0] if floor else [], "step": [1] if floor else [],
                           "floor_ns": [floor] if floor else []})  # fmt: skip
    assert at_least_own_compute(df, floors, fixed)["replayed_ns"].tolist() == [expected]
