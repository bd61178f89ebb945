"""A late rank that is not a compute straggler is described in words that agree with its own
operator-work figure: "without doing more operator work" only when it does not do more; a rank
doing more (but less than half its delay) is said to be late by more than that work explains.

Real gloo run (tests/data/gloo_alternating/sleep_front_2rank_r1_nice20: rank 1 sleeps before its
forward pass in alternate steps and runs at nice 20, so it also computes slower): its operator
work per step, read from the raw traces by plain Python (the union of `aten::` CPU ops inside
each ProfilerStep window, median over steps), is 1.45x rank 0's; its delay is far larger."""

from __future__ import annotations

import statistics

from conftest import DATA, analysis_store
from kineto_truth import events

from commwall.analysis.collectives.stragglers import SAME_WORK
from commwall.analysis.report.build import build_report

RUN = DATA / "gloo_alternating/sleep_front_2rank_r1_nice20"


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _operator_ms_per_step(path) -> float:  # noqa: ANN001
    evs = [e for e in events(path) if e.get("ph") == "X" and "dur" in e]
    steps = [e for e in evs if str(e.get("name", "")).startswith("ProfilerStep#")]
    ops = [(e["ts"], e["ts"] + e["dur"]) for e in evs
           if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("aten::")]  # fmt: skip
    per = []
    for s in steps:
        a, b = s["ts"], s["ts"] + s["dur"]
        per.append(_union([(max(x, a), min(y, b)) for x, y in ops if y > a and x < b]) / 1e3)
    return statistics.median(per)


def test_a_late_rank_doing_more_work_is_not_said_to_do_no_more(tmp_path):
    work = {int(p.name[4]): _operator_ms_per_step(p) for p in RUN.glob("rank*.pt.trace.json.gz")}
    ratio = work[1] / work[0]
    assert ratio > SAME_WORK  # rank 1 does more operator work than rank 0: 1.45x
    con = analysis_store(tmp_path / "s.duckdb", (RUN,))
    rep = build_report(con, RUN.name, keep_going=False)
    con.close()
    (r1,) = [r for r in rep["stragglers"]["ranks"] if r["rank"] == 1]
    assert r1["flagged"] and r1["kind"] == "other"
    assert abs(r1["compute_ratio"] - ratio) < 0.05
    texts = [rep["diagnosis"]["paragraph"], rep["stragglers"]["verdict"]]
    texts += [i["evidence"] for i in rep["checklist"] if i["key"] == "stragglers"]
    for text in texts:
        assert "without doing more operator work" not in text
        assert f"late by more than its extra operator work explains ({ratio:.2f}x" in text


def test_the_checklist_quotes_the_bus_bandwidth_the_diagnosis_quotes(tmp_path):
    # gloo_4rank_sleep: 0.0528 GB/s median; the checklist rounded it to "0.1 GB/s"
    from conftest import SAMPLES

    run = SAMPLES / "gloo_4rank_sleep"
    con = analysis_store(tmp_path / "s.duckdb", (run,))
    rep = build_report(con, run.name, keep_going=False)
    con.close()
    (op,) = [o for o in rep["collectives"]["ops"] if o.get("busbw_GBps_median")]
    quoted = f"{op['busbw_GBps_median']:.3g} GB/s"
    assert op["busbw_GBps_median"] < 0.095  # would print as 0.1 at one decimal
    assert quoted in rep["diagnosis"]["paragraph"]
    (item,) = [i for i in rep["checklist"] if i["key"] == "busbw"]
    assert f"best median busbw {quoted}" in item["evidence"]
