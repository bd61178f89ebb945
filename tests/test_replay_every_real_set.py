"""The unchanged replay reproduces every real multi-rank run of the repository within 5 %:
the bundled sample runs, the 2-D meshes, FSDP2, MoE and the pipelines (DDP, TP, FSDP, EP, PP,
pp x dp). The measured step is read from the raw traces by plain Python, not by commwall: per
step, the longest `ProfilerStep#N` window over the ranks, then the median over the steps."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES, analysis_store

from commwall.analysis.db import run_id
from commwall.analysis.replay.engine import replay_section
from commwall.analysis.report.session import run_session

SETS = [
    d
    for d in sorted(
        [*SAMPLES.iterdir(), *(DATA / "mesh").iterdir(), *(DATA / "pp").iterdir()],
        key=lambda p: (p.parent.name, p.name),
    )
    if d.is_dir() and len(list(d.glob("*.json*"))) >= 2 and not d.name.startswith("fr_")
]


def step_windows_us(path: Path) -> dict[int, float]:
    """`ProfilerStep#N` → its duration in µs, from one rank's trace (the host's annotation)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    out: dict[int, float] = {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and name.startswith("ProfilerStep#"):
            n = int(name.removeprefix("ProfilerStep#"))
            out[n] = max(out.get(n, 0.0), float(e["dur"]))
    return out


def measured_step_ms(d: Path) -> float:
    ranks = [step_windows_us(p) for p in sorted(d.glob("*.pt.trace.json*"))]
    steps = set.intersection(*(set(r) for r in ranks))
    return statistics.median(max(r[s] for r in ranks) for s in steps) / 1000


def test_the_sets_cover_every_parallelism():
    names = {d.name for d in SETS}
    assert {"dlrm_8rank", "gloo_4rank_sleep", "dp2_tp2", "fsdp4", "moe4"} <= names
    assert {"gloo_4stage_1f1b_slow", "gloo_pp2_dp2_gpipe_slow"} <= names


@pytest.mark.parametrize("d", SETS, ids=[d.name for d in SETS])
def test_the_unchanged_replay_reproduces_the_measured_step(d, tmp_path):
    con = analysis_store(tmp_path / "s.duckdb", (d,))
    rid = run_id(con, d.name)
    with run_session(con, rid):
        r = replay_section(con, rid)
    con.close()
    assert r["available"], r.get("reason")
    want = measured_step_ms(d)
    assert r["replayed_step_ms"] == pytest.approx(want, rel=0.05)
