"""What the straggler figures of a job that hung hold, said per kind of hang (analysis/hangs/stopped.py
`stragglers_caveat`), on the generated Flight Recorder sets (sample_traces/fr_*, whose
ground_truth.json says the fault): a dtype or size mismatch leaves the hung call out of the
figures (the caveat said they include its wait and named "the rank that did not arrive", though
every rank arrived); a rank calling another op, or skipping the call, leaves the others' wait in.
The counts of collectives come from the raw Kineto traces read by plain Python."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES, analysis_store
from kineto_truth import events

from commwall.analysis.hangs.stopped import MISMATCH_CAVEAT, OP_CAVEAT, STRAGGLERS_CAVEAT
from commwall.analysis.report.build import build_report


def _calls(path) -> int:  # noqa: ANN001
    """Collective calls (gloo's record_param_comms-style `gloo:` CPU ops) in a rank's trace."""
    return sum(
        1 for e in events(path) if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")
    )


@pytest.mark.parametrize(
    ("name", "caveat"),
    [
        ("fr_size", MISMATCH_CAVEAT),
        ("fr_dtype", MISMATCH_CAVEAT),
        ("fr_op", OP_CAVEAT),
        ("fr_skip", STRAGGLERS_CAVEAT),
    ],  # fmt: skip
)
def test_the_caveat_says_what_the_figures_hold(tmp_path, name, caveat):
    run = SAMPLES / name
    truth = json.loads((run / "ground_truth.json").read_text())
    assert truth["fault"] == name.removeprefix("fr_")
    con = analysis_store(tmp_path / "s.duckdb", (run,))
    rep = build_report(con, name, keep_going=False)
    con.close()
    s = rep["stragglers"]
    assert s["caveat"] == caveat
    calls = {int(p.name[4]): _calls(p) for p in run.glob("rank*.pt.trace.json.gz")}
    culprit = truth["culprit_rank"]
    good = truth["last_good_seq"]
    n_inst = {r["rank"]: r["n_instances"] for r in s["ranks"]}
    for rank, n in calls.items():
        if caveat is MISMATCH_CAVEAT:
            # every rank made the hung call, and it is not among the instances
            assert n == good + 1 and n_inst[rank] == good
        elif rank != culprit:
            # the others' hung call is an instance (without the culprit), its wait included
            assert n == good + 1 and n_inst[rank] == good + 1
    para = rep["diagnosis"]["paragraph"]
    assert "The traces end in the hung collective" not in para
    if name == "fr_skip":  # rank 1 never entered it, so its trace does not end in it
        assert calls[culprit] == good
        assert "The traces of the ranks that entered the hung collective end in it" in para


def test_a_rank_calling_another_op_is_not_reported_as_no_op_mismatch(tmp_path):
    """fr_op: rank 1 called all_reduce where the others called all_gather (ground truth), and its
    Kineto traces carry no sequence numbers (no `Seq` arg on any gloo op: read from the raw
    traces), so the matching cannot see an op mismatch: "not checked", never "op mismatch 0"."""
    from commwall.analysis.collectives.instances import matching_sentence

    run = SAMPLES / "fr_op"
    truth = json.loads((run / "ground_truth.json").read_text())
    assert (truth["culprit_op"], truth["expected_op"]) == ("all_reduce", "all_gather")
    for p in run.glob("rank*.pt.trace.json.gz"):
        assert not any("Seq" in (e.get("args") or {}) for e in events(p))
    con = analysis_store(tmp_path / "s.duckdb", (run,))
    rep = build_report(con, "fr_op", keep_going=False)
    con.close()
    m = rep["collectives"]["matching"]
    assert m["op_mismatch_checked"] == 0 and m["incomplete"] >= 1
    assert "op mismatch not checked" in matching_sentence(m)
