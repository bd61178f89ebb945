"""The answer at a glance (diagnosis.answer, analysis/report/answer.py) on every bundled run: at
most 25 words, the ground-truth culprit named where the generator injected one (its
ground_truth.json, read here), no rank named where it injected none, no report key or Python
literal in the text; and the answer comes first wherever the report is shown."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re

import pytest
from conftest import SAMPLES

from commwall.analysis.report.answer import MAX_WORDS, words
from commwall.analysis.report.brief import MAX_POINTS
from commwall.analysis.report.brief import MAX_WORDS as MAX_POINT_WORDS
from commwall.cli.main import main

RUNS = sorted(d.name for d in SAMPLES.iterdir() if d.is_dir())
#: What a report key or a Python value looks like in text.
INTERNALS = re.compile(r"\b\w+_(?:ms|share|pct|bytes|gbs)\b|\bNone\b|\{|\}|\[|\]")


def truth(run: str) -> int | None:
    """The injected culprit: `culprit_rank` (Flight Recorder faults) or `straggler_rank` (gloo
    runs; -1: none injected); None where the set has no ground truth (the DLRM set)."""
    path = SAMPLES / run / "ground_truth.json"
    if not path.exists():
        return None
    t = json.loads(path.read_text())
    return t.get("culprit_rank", t.get("straggler_rank"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[str, str]:
    """`commwall demo --no-serve` on a new store: (the store, what the demo printed)."""
    db = str(tmp_path_factory.mktemp("answer") / "demo.duckdb")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo", "--db", db, "--no-serve"]) == 0
    return db, out.getvalue()


@pytest.fixture(scope="module")
def reports(demo) -> str:
    return demo[0]


#: run → the diagnosis of `commwall report --format json` on the demo's store, computed once
#: for the tests that read it (the store does not change while they run).
_DIAGNOSIS: dict[str, dict] = {}


def json_diagnosis(db: str, run: str, capsys) -> dict:
    if run not in _DIAGNOSIS:
        capsys.readouterr()
        assert main(["report", "--db", db, "--run", run, "--format", "json"]) == 0
        _DIAGNOSIS[run] = json.loads(capsys.readouterr().out)["diagnosis"]
    return copy.deepcopy(_DIAGNOSIS[run])


@pytest.mark.parametrize("run", RUNS)
def test_the_answer_names_the_cause_and_the_culprit(reports, run, capsys):
    db = reports
    d = json_diagnosis(db, run, capsys)
    a = d["answer"]
    assert d["headline"] == a  # the headline is the answer at a glance
    assert 0 < words(a) <= MAX_WORDS, a
    assert not INTERNALS.search(a), a
    culprit = truth(run)
    if culprit is not None and culprit >= 0:
        assert re.search(rf"\brank {culprit}\b", a), a
    elif culprit == -1:
        assert not re.search(r"\branks? \d", a), a  # no rank was made slow: none is named
    capsys.readouterr()
    assert main(["report", "--db", db, "--run", run]) == 0
    text = capsys.readouterr().out
    diagnosis = text.split("== Diagnosis: why\n", 1)[1]
    assert " ".join(diagnosis.split())[: len(a)] == a  # the answer first


def test_the_demo_prints_the_answers(demo):
    _, printed = demo  # what `commwall demo` printed when it made the store
    lines = dict(line.split(": ", 1) for line in printed.splitlines()[:-1])
    assert lines["gloo_4rank_sleep"].startswith("Data transfer sets the")
    assert "rank 2" in lines["gloo_4rank_sleep"] and "shared CPUs" in lines["gloo_4rank_sleep"]


@pytest.mark.parametrize("run", RUNS)
def test_the_brief_points_and_the_fixes(reports, run, capsys):
    """At most five points of at most 40 words, in words; the culprit the generator injected is
    the one the "who" point names; no fix reads longer than the step it starts from."""
    d = json_diagnosis(reports, run, capsys)
    assert 0 < len(d["brief"]) <= MAX_POINTS
    for p in d["brief"]:
        assert words(p["text"]) <= MAX_POINT_WORDS, p
        assert not INTERNALS.search(p["text"]), p
    culprit = truth(run)
    who = [p["text"] for p in d["brief"] if p["topic"] in ("who", "hang")]
    if culprit is not None and culprit >= 0:
        assert re.search(rf"\b[Rr]ank {culprit}\b", who[0]), who
    fixes = d["fixes"]
    savings = [r["saving_ms"] for r in fixes["rows"]]
    assert savings == sorted(savings, reverse=True) and all(x > 0 for x in savings)
    assert all(r["step_ms"] < fixes["baseline_ms"] for r in fixes["rows"])
