"""Real pipeline-parallel runs (tests/data/pp/, made by sample_traces/generate_pipeline.py: GPipe
and 1F1B over blocking gloo send/recv, 2 and 4 stages, with and without a slow stage): sends
and receives matched across ranks, the waiting of each receive, the replay over them, and the
stage that sets the step. Facts come from the generator's ground truth and from the traces read
by plain Python (c10d::send / c10d::recv_ ops and their gloo:send / gloo:recv transfers)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from contextlib import ExitStack

import duckdb
import pytest
from conftest import DATA

from commwall.analysis import db as adb
from commwall.analysis.replay.engine import replay_section
from commwall.analysis.report.pipeline import pipeline_section
from commwall.analysis.report.session import run_session
from commwall.cli.main import main

PP = DATA / "pp"
SETS = ["gloo_2stage_gpipe", "gloo_2stage_gpipe_slow", "gloo_4stage_1f1b_slow"]
ISSUE = {"c10d::send": "send", "c10d::recv_": "recv"}
XFER = {"gloo:send": "send", "gloo:recv": "recv"}


def truth(name: str) -> dict:
    return json.loads((PP / name / "ground_truth.json").read_text())


def trace_calls(name: str) -> dict[int, list[dict]]:
    """Per rank, its sends and receives in order: op, peer (the c10d op's Concrete Inputs[2]),
    step, issue (the c10d op's start, µs) and end (its gloo transfer's end, µs)."""
    out = {}
    for path in sorted((PP / name).glob("rank*.pt.trace.json.gz")):
        ev = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
              if e.get("ph") == "X"]  # fmt: skip
        steps = sorted(
            (e["ts"], int(e["name"].split("#")[1]))
            for e in ev
            if e["name"].startswith("ProfilerStep#")
        )
        ops = sorted((e["ts"], e) for e in ev if e["name"] in ISSUE)
        xfers = sorted((e["ts"], e) for e in ev if e["name"] in XFER)
        assert len(ops) == len(xfers)  # one transfer per issuing op, in order
        calls = []
        for (t, op), (_, x) in zip(ops, xfers, strict=True):
            assert ISSUE[op["name"]] == XFER[x["name"]]
            calls.append(
                {
                    "op": ISSUE[op["name"]],
                    "peer": int(op["args"]["Concrete Inputs"][2]),
                    "step": max(n for s, n in steps if s <= t),
                    "issue": t,
                    "end": x["ts"] + x["dur"],
                }
            )
        out[int(path.name[4])] = calls
    return out


def recv_waits_ms(name: str) -> dict[tuple[int, int], float]:
    """Per (receiving rank, step): the receives' time before their send was issued (ms), the
    k-th send of a channel matched with its k-th receive in the step."""
    calls = trace_calls(name)
    sends: dict[tuple, list[dict]] = defaultdict(list)
    for r, cs in calls.items():
        for c in cs:
            if c["op"] == "send":
                sends[r, c["peer"], c["step"]].append(c)
    out: dict[tuple[int, int], float] = defaultdict(float)
    seen: dict[tuple, int] = defaultdict(int)
    for r, cs in calls.items():
        for c in cs:
            if c["op"] != "recv":
                continue
            key = (c["peer"], r, c["step"])
            s = sends[key][seen[key]]
            seen[key] += 1
            out[r, c["step"]] += max(min(s["issue"], c["end"]) - c["issue"], 0) / 1000
    return out


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("pp") / "s.duckdb")
    # --no-prepare: the sessions below compute the analysis tables, and no test reads a report
    # kept by the ingest (test_the_answer_names_the_slow_stage ingests with it)
    for name in SETS:
        args = ["--db", db, "--run", name, "--quiet", "--no-prepare", str(PP / name)]
        assert main(["ingest", *args]) == 0
    c = duckdb.connect(db, read_only=True)
    adb.load_modules(c)
    # every run's intermediate tables computed once for the module, as a report does (the
    # macros answer the same inside a session: tests/test_analysis_session.py)
    with ExitStack() as sessions:
        for name in SETS:
            sessions.enter_context(run_session(c, rid(c, name)))
        yield c
    c.close()


def rid(con, name: str) -> int:
    return con.execute("SELECT run_id FROM runs WHERE name = ?", [name]).fetchone()[0]


@pytest.mark.parametrize("name", SETS)
def test_every_send_is_matched_with_its_receive(con, name):
    t = truth(name)
    pairs = con.execute("SELECT * FROM p2p_pairs(?)", [rid(con, name)]).df()
    assert pairs["matched"].all() and not pairs["size_mismatch"].any()
    # the generator's plan: per rank and step, its sends as [op, peer, elements]
    for rank, plan in t["p2p_per_step"].items():
        sends = sorted(peer for op, peer, _ in plan if op == "send")
        for step in t["steps"]:
            got = pairs[(pairs["src"] == int(rank)) & (pairs["step"] == step)]
            assert sorted(got["dst"]) == sends
    assert set(pairs["bytes"]) == {t["micro_batch_size"] * t["hidden"] * 4}  # float32


@pytest.mark.parametrize("name", SETS)
def test_receive_waits_match_the_traces(con, name):
    want = recv_waits_ms(name)
    got = con.execute("SELECT rank, step, recv_wait_ns FROM p2p_rank_steps(?)", [rid(con, name)])
    rows = {(r, s): w / 1e6 for r, s, w in got.fetchall()}
    assert set(want) <= set(rows)
    for key, ms in want.items():
        assert rows[key] == pytest.approx(ms, abs=0.01), key


@pytest.mark.parametrize("name", SETS)
def test_the_replay_runs_and_reproduces_the_step(con, name):
    sec = replay_section(con, rid(con, name))
    assert sec["available"]
    assert sec["replay_error"] <= 0.05
    assert sec["steps_replayed"] == len(truth(name)["steps"])


@pytest.mark.parametrize("name", [s for s in SETS if truth(s)["slow_stage"] >= 0])
def test_the_slow_stage_is_named(con, name):
    t = truth(name)
    sec = pipeline_section(con, rid(con, name))
    p = sec["pipelines"][0]
    assert p["ranks"] == list(range(t["stages"]))  # stage s is rank s
    assert p["micro_batches"] == t["micro_batches"]
    assert p["slowest_rank"] == t["slow_stage"]
    assert not p["balanced"]
    assert p["balanced_step_ms"] < p["step_ms"]
    assert f"stage {t['slow_stage']} (rank {t['slow_stage']})" in sec["sentence"]
    p_, m = t["stages"], t["micro_batches"]
    assert p["bubble_formula"] == pytest.approx((p_ - 1) / (m + p_ - 1))


def test_bubble_wait_per_step_matches_the_traces(con):
    """The waiting stage's waiting per step: the median over steps of its receives' waits
    (plain Python) and of its sends' (from the section), as the section adds them."""
    name = "gloo_2stage_gpipe_slow"
    sec = pipeline_section(con, rid(con, name))
    stage0 = sec["pipelines"][0]["stages"][0]
    waits = recv_waits_ms(name)
    steps = truth(name)["steps"]
    med = sorted(waits.get((0, s), 0.0) for s in steps)[len(steps) // 2]
    assert stage0["recv_wait_ms"] == pytest.approx(med, abs=0.01)


def test_a_balanced_pipeline_is_not_called_unbalanced(con):
    sec = pipeline_section(con, rid(con, "gloo_2stage_gpipe"))
    assert sec["pipelines"][0]["balanced"]
    assert "balanced" in sec["sentence"] and "bubble" in sec["sentence"]


def waits_ms(name: str) -> dict[tuple[int, int], float]:
    """Per (rank, step): its receives' time before their send was issued plus its sends' time
    before their receive was posted (ms), from the traces by plain Python."""
    calls = trace_calls(name)
    by_channel: dict[tuple, list[dict]] = defaultdict(list)
    for r, cs in calls.items():
        for c in cs:
            src, dst = (r, c["peer"]) if c["op"] == "send" else (c["peer"], r)
            by_channel[c["op"], src, dst, c["step"]].append({**c, "rank": r})
    out: dict[tuple[int, int], float] = defaultdict(float)
    for (op, src, dst, step), cs in by_channel.items():
        if op != "send":
            continue
        for s, r in zip(cs, by_channel["recv", src, dst, step], strict=True):
            out[dst, step] += max(min(s["issue"], r["end"]) - r["issue"], 0) / 1000
            out[src, step] += max(min(r["issue"], s["end"]) - s["issue"], 0) / 1000
    return out


@pytest.mark.parametrize("name", SETS)
def test_the_bubble_is_waiting_in_the_steps_parts(con, name):
    """A stage's waiting for its neighbours is the decomposition's exposed waiting (not idle,
    not transfer): per (rank, step), within 0.2 ms of the traces' own figures."""
    want = waits_ms(name)
    got = con.execute(
        "SELECT rank, step, exposed_wait_ns FROM step_decomposition(?)", [rid(con, name)]
    ).fetchall()
    rows = {(r, s): w / 1e6 for r, s, w in got if (r, s) in want}
    assert rows and rows == pytest.approx({k: want[k] for k in rows}, abs=0.2)


@pytest.mark.parametrize("name", ["gloo_2stage_gpipe_slow", "gloo_4stage_1f1b_slow"])
def test_the_answer_names_the_slow_stage(con, name, tmp_path, capsys):
    """The headline and the brief name the stage the generator made slow (ground_truth.json)."""
    t = truth(name)
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", name, "--quiet", str(PP / name)]) == 0
    capsys.readouterr()
    assert main(["report", "--db", db, "--run", name, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)["diagnosis"]
    stage = f"stage {t['slow_stage']} (rank {t['slow_stage']})"
    assert stage in d["headline"].lower(), d["headline"]
    who = next(p["text"] for p in d["brief"] if p["topic"] == "who")
    assert stage in who.lower() and "No collective is matched" not in d["paragraph"]
