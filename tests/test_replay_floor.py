"""No what-if makes a rank's own serial work shorter (analysis.replay.engine.at_least_own_compute).

The real gloo pair compute_backward_2rank_r0 (tests/data/gloo_pairs): rank 0 runs about 40 ms
of extra matmuls in every backward pass. Its operator time per step, read from the raw trace by
plain Python (the union of its `aten::*` ops inside each ProfilerStep#), is ~45 ms; the replay
used to predict 31.9 ms with "data transfer fully hidden" and 28.0 ms with nobody waiting:
steps shorter than the work one rank must do in them.

A sleep in a gradient hook is serial work in no operator (analysis.replay.engine.serial_work): on the
real sleep_backward runs rank 1 sleeps 40 ms in its backward hooks (ground_truth.json), and the
replay, floored at operator time alone, predicted delayed steps at 0.87-0.90 of that sleep plus
the rank's operator work."""

from __future__ import annotations

import json
import re
import statistics

import pandas as pd
import pytest
from conftest import DATA, analysis_store
from kineto_truth import events, ns
from nsys_synth import length, union

from commwall.analysis.db import run_id
from commwall.analysis.replay import engine as replay
from commwall.analysis.replay.engine import at_least_own_compute, serial_work
from commwall.analysis.report.build import build_report

RUN = DATA / "gloo_pairs/compute_backward_2rank_r0/straggler"
STEP = re.compile(r"^ProfilerStep#\d+$")


def aten_by_step(path) -> dict[int, int]:
    """Per ProfilerStep#N of the trace: the length of the union of its aten:: ops (ns)."""
    ev = [e for e in events(path) if e.get("ph") == "X"]
    steps = {int(e["name"].split("#")[1]): (ns(e["ts"]), ns(e["ts"] + e["dur"]))
             for e in ev if STEP.match(e.get("name", ""))}  # fmt: skip
    ops = [(ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in ev
           if e.get("cat") == "cpu_op" and e.get("name", "").startswith("aten::")]  # fmt: skip
    return {s: length(union([(max(a, lo), min(b, hi)) for a, b in ops if a < hi and b > lo]))
            for s, (lo, hi) in steps.items()}  # fmt: skip


def aten_per_step(path) -> list[int]:
    """Per ProfilerStep# of the trace, in order: the length of the union of its aten:: ops."""
    return [v for _, v in sorted(aten_by_step(path).items())]


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


SLEEPS = [
    DATA / "gloo_pairs/sleep_backward_2rank_r1/straggler",  # every step
    DATA / "gloo_alternating/sleep_backward_2rank_r1",  # every other block of 3 steps
]


@pytest.mark.parametrize("run", SLEEPS, ids=lambda r: r.relative_to(DATA).parts[0])
def test_a_sleep_in_a_hook_is_serial_work(tmp_path, run):
    """Each delayed step, under every what-if but the one that fixes the sleeper, takes at least
    the sleeper's sleep in that step (the generator's timing) plus its operator work there (the
    raw trace), within 5 %: hiding the transfer does not shorten a sleep."""
    truth = json.loads((run / "ground_truth.json").read_text())
    sleeper = truth["straggler_rank"]
    sleep_ms = dict(zip(truth["steps"], truth["injected_delay_ms"], strict=True))
    work = aten_by_step(run / f"rank{sleeper}.pt.trace.json.gz")
    delayed = truth.get("delayed_steps") or truth["steps"]
    assert len(delayed) >= 6 and all(sleep_ms[s] > 39 for s in delayed)
    con = analysis_store(tmp_path / "store.duckdb", (run,))
    by_step = replay.whatif_by_step(con, run_id(con, run.name))
    con.close()
    for key in ("transfer_hidden", "no_wait", "comm_hidden", "transfer_2x", "idle_removed"):
        got = by_step[by_step["key"] == key].set_index("step")["step_ns"] / 1e6
        for s in delayed:
            bound = sleep_ms[s] + work[s] / 1e6
            assert got[s] >= 0.95 * bound, (key, s, round(got[s], 2), round(bound, 2))


def _work(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["rank", "step", "operator_ns", "busy_ns"])


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # rank 1 computes 3x rank 0's time, the extra outside operators: its excess is its own
        (
            [(0, 1, 10, 12), (1, 1, 10, 52), (0, 2, 10, 12), (1, 2, 10, 42)],
            [10, 10 + 42 - 2, 10, 10 + 32 - 2],
        ),
        # the same time outside operators on both: operator time alone (engine overhead, or a
        # thread waiting for a core, which a shorter transfer may give back)
        ([(0, 1, 10, 30), (1, 1, 10, 30)], [10, 10]),
        # 1.4x the other's compute time: under the 1.5x rule, operator time alone
        ([(0, 1, 10, 20), (1, 1, 10, 28)], [10, 10]),
        # a compute straggler: its extra time is in operators, nothing added
        ([(0, 1, 10, 12), (1, 1, 50, 52)], [10, 50]),
        # its own excess beyond the other ranks' median in each step (3 and 5: median 4)
        ([(0, 1, 10, 13), (1, 1, 10, 15), (2, 1, 10, 60)], [10, 10, 10 + 50 - 4]),
        # one rank: nothing to compare with
        ([(0, 1, 10, 60)], [10]),
        # a step the heavy rank has and no other: its whole time outside operators
        ([(0, 1, 10, 12), (1, 1, 10, 52), (1, 2, 10, 30)], [10, 50, 30]),
    ],
)
def test_serial_work_table(rows, expected):
    assert serial_work(_work(rows))["floor_ns"].tolist() == expected
