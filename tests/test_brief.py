"""The brief's rules (analysis/report/brief.py) on reports given by hand: the word limit keeps
whole sentences, else whole clauses; the shared-cores caveat comes first when it changes the
advice (a transfer-bound step) and last otherwise; the fixes leave the bounds out and rank by
saving."""

from __future__ import annotations

from commwall.analysis.report.answer import words
from commwall.analysis.report.brief import brief_points, fit, ranked_fixes


def test_fit_keeps_whole_sentences_then_clauses():
    two = "One two three four. Five six seven eight nine."
    assert fit(two, 5) == "One two three four."
    assert fit(two, 9) == two
    clauses = "alpha beta, gamma delta; epsilon zeta eta theta"
    assert fit(clauses, 4) == "alpha beta, gamma delta."
    assert words(fit("w " * 60, 40)) <= 40


def report(device: str, hosts: list[str], n: int) -> dict:
    return {
        "run_info": {"device_kind": device, "hosts": hosts, "n_ranks": n},
        "summary": {"step_ms": 100.0, "tau_comp_ms": 40.0, "exposed_transfer_ms": 50.0,
                    "exposed_wait_ms": 10.0},
        "replay": {
            "available": True,
            "measured_step_ms": 110.0,
            "whatifs": [
                {"key": "comm_hidden", "label": "all hidden", "step_ms": 40.0,
                 "saving_ms": 70.0, "saving_pct": 63.6},
                {"key": "transfer_2x", "label": "transfer 2x", "step_ms": 85.0,
                 "saving_ms": 25.0, "saving_pct": 22.7},
                {"key": "transfer_hidden", "label": "transfer hidden", "step_ms": 60.0,
                 "saving_ms": 50.0, "saving_pct": 45.5},
                {"key": "idle_removed", "label": "idle removed", "step_ms": 110.0,
                 "saving_ms": 0.0, "saving_pct": 0.0},
            ],
        },
    }  # fmt: skip


def test_the_caveat_leads_a_transfer_bound_step_on_shared_cores():
    rep = report("cpu", ["h0"], 4)
    points = brief_points(rep, {"cause": "bandwidth", "shares": {}})
    assert (
        points[0]["topic"] == "caveat" and "4 ranks share the cores of 1 host" in points[0]["text"]
    )
    points = brief_points(rep, {"cause": "host", "shares": {}})
    assert points[-1]["topic"] == "caveat"
    gpu = brief_points(report("gpu", ["h0"], 4), {"cause": "bandwidth", "shares": {}})
    assert all(p["topic"] != "caveat" for p in gpu)


def test_the_fixes_leave_the_bounds_out_and_rank_by_saving():
    f = ranked_fixes(report("gpu", ["h0"], 4))
    assert [r["key"] for r in f["rows"]] == ["transfer_hidden", "transfer_2x"]  # no gain: out
    assert (f["baseline_ms"], f["summary_step_ms"]) == (110.0, 100.0)
    assert "slowest rank" in f["baseline"]


def test_a_hang_too_long_to_quote_names_what_the_rank_did():
    # a verdict of over 25 words in its first sentence: the answer says it in short, with the
    # verb of each kind of mismatch (a collective is called, dtypes and shapes are passed)
    from commwall.analysis.report.answer import _stopped

    long = "The job hung. " + "Mismatch in a process group with a very long description " * 3
    for kind, want in [
        ("op", "rank 5 called a different collective than the others at the same point"),
        ("dtype", "rank 5 passed different dtypes than the others to the same collective"),
        ("size", "rank 5 passed different shapes than the others to the same collective"),
    ]:
        report = {"hang": {"groups": [{"cause": {"kind": kind, "culprit_ranks": [5]}}]}}
        assert _stopped(report, long) == f"The job hung: {want} — fix that call."
