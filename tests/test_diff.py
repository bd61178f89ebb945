"""`commwall diff` / Store.diff: the noise test on hand-checked samples, the tables on runs
whose truth is known (made here, or the real gloo and DLRM sets), the CLI and its CI gate."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import DLRM, SAMPLES
from nccl_log_gen import Job, make_log

from commwall.analysis.api import Store
from commwall.analysis.compare import noise
from commwall.analysis.compare.diff import RunFacts, change_sentence, diff_tables, regressions
from commwall.analysis.report.diagnosis_words import HUNG_LABEL
from commwall.cli.main import main
from commwall.ingest import discover, store

# --- the noise test -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "p"),
    [
        # Fully separated samples: only 2 of the C(n+m, n) splits are as extreme (both tails).
        ([1, 2, 3], [4, 5, 6], 2 / math.comb(6, 3)),
        ([1, 2, 3, 4], [5, 6, 7, 8], 2 / math.comb(8, 4)),
        # Identical samples: every split is at least as extreme.
        ([1, 1], [1, 1], 1.0),
    ],
)
def test_mann_whitney_exact_p(a, b, p):
    assert noise.mann_whitney_u(a, b)[1] == pytest.approx(p)


def test_mann_whitney_u_statistic_counts_pairs():
    # U of a = number of (x, y) pairs with x > y (+ half the ties), counted by hand:
    # 3 > 2 and 3 > 1 and 2 > 1 -> 3; the tie 2 = 2 -> 0.5.
    u, _ = noise.mann_whitney_u([2, 3], [1, 2])
    assert u == 3.5


def test_mann_whitney_normal_approximation_for_large_samples():
    # 20 vs 20 fully separated: U = 0, mean 200, var = 20*20*41/12, continuity 0.5.
    u, p = noise.mann_whitney_u(range(20), range(100, 120))
    z = (200 - 0.5) / math.sqrt(20 * 20 * 41 / 12)
    assert u == 0
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_judge_shift_beyond_noise_is_slower_and_within_noise_is_no_change():
    rng = np.random.default_rng(1)
    base = 100 + rng.normal(0, 1, 20)
    assert noise.judge(base, base * 1.2)["judgement"] == "slower"
    assert noise.judge(base, base * 0.8)["judgement"] == "faster"
    # The same distribution drawn again: a change smaller than noise.
    again = 100 + rng.normal(0, 1, 20)
    assert noise.judge(base, again)["judgement"] == "no change"
    few = noise.judge([100.0], [130.0])
    assert few["judgement"] == "too few steps to judge (< 3 per run; baseline 1, this run 1)"
    assert noise.judge([], [1.0, 2.0, 3.0])["judgement"] == (
        "not available: no steps (the baseline has none)"
    )
    assert few["change"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("d", "w", "p"),
    [
        # 3 positive differences, ranks 1-3: W+ = 6; of the 2^3 sign sets the sums are
        # 0 1 2 3 3 4 5 6 (mean 3), and only 0 and 6 are as far from it: 2/8
        ([1, 2, 3], 6, 2 / 8),
        ([-1, -2, -3], 0, 2 / 8),
        # 10 of one sign: 2 of 1024 sign sets are as extreme
        (list(range(1, 11)), 55, 2 / 1024),
        # ties: |d| all equal (rank 2 each), W+ = 4; sums 0 2 2 2 4 4 4 6, all >= 1 from 3
        ([1, 1, -1], 4, 1.0),
        # zero differences are dropped: nothing left
        ([0, 0, 0], 0, 1.0),
    ],
)
def test_wilcoxon_signed_rank_exact_p(d, w, p):
    got_w, got_p = noise.wilcoxon_signed_rank(d)
    assert got_w == w and got_p == pytest.approx(p)


def test_wilcoxon_normal_approximation_for_many_pairs():
    # 70 positive differences 1..70: W+ = 2485, mean 1242.5, var = 70*71*141/24, continuity 0.5
    w, p = noise.wilcoxon_signed_rank(range(1, 71))
    z = (2485 - 1242.5 - 0.5) / math.sqrt(70 * 71 * 141 / 24)
    assert w == 2485 and p == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_a_regression_of_every_alternating_step_is_seen_when_steps_pair():
    # steps 0-9 alternate 100 and 200 ms (e.g. gradient accumulation), each 1.5 ms slower in the
    # second run: among the alternating times the unpaired test cannot tell it from noise, step
    # by step every difference is +1.5 ms (p = 2/1024)
    steps = np.arange(10)
    a = np.where(steps % 2 == 0, 100.0, 200.0) + np.linspace(0, 0.9, 10)
    b = a + 1.5
    assert noise.judge(a, b)["judgement"] == "no change"
    pairs = noise.pairs(steps, a, steps, b)
    assert pairs is not None
    j = noise.judge(a, b, pairs)
    assert j["paired"] and j["test"] == noise.PAIRED_TEST_NAME and j["n_pairs"] == 10
    assert j["judgement"] == "slower" and j["p_value"] == pytest.approx(2 / 1024)
    assert j["change"] == pytest.approx(np.median(b) / np.median(a) - 1)


def test_a_paired_change_is_over_the_steps_its_interval_is_over():
    """20 steps in common and 4 more in the second run only (20 of 24: paired). The common
    steps are 5 % slower pair by pair; the 4 extra ones are slow outliers that move the median
    of all its steps to +6.9 %, outside the paired interval (+5.0 % to +5.0 %): the change said
    beside that interval is the common steps' (+5 %), as the interval and the test are."""
    steps = np.arange(20)
    a = 100.0 + steps  # 100 .. 119 ms
    b_common = a * 1.05
    b_steps = np.concatenate([steps, np.arange(20, 24)])
    b = np.concatenate([b_common, [200.0, 210.0, 220.0, 230.0]])
    pairs = noise.pairs(steps, a, b_steps, b)
    assert pairs is not None and len(pairs[0]) == 20
    j = noise.judge(a, b, pairs)
    assert j["paired"]
    assert j["change"] == pytest.approx(0.05)
    assert j["ci_low"] <= j["change"] <= j["ci_high"]
    assert j["median_b"] == pytest.approx(np.median(b))  # the run's own median: all its steps
    assert np.median(b) / np.median(a) - 1 > j["ci_high"]  # what it said before


@pytest.mark.parametrize(
    ("a_steps", "b_steps"),
    [
        (range(9), range(9)),  # fewer than MIN_PAIRED common steps
        (range(10), range(5, 20)),  # 5 in common: different parts of the job
        (range(10), range(13)),  # 10 common, but under 80 % of the second run's 13
        ([0, 0, *range(1, 10)], range(11)),  # a step number twice: no pairing
    ],
)
def test_steps_that_do_not_pair_are_compared_unpaired(a_steps, b_steps):
    a_steps, b_steps = list(a_steps), list(b_steps)
    assert noise.pairs(a_steps, np.ones(len(a_steps)), b_steps, np.ones(len(b_steps))) is None


# --- the tables on hand-made runs -------------------------------------------------------------


def facts(name, steps_ms, busbw=10.0, kind=None, env="1"):
    """A run whose every figure is chosen here: steps (ms), one collective size, one straggler
    rank (rank 1 when `kind` is set), an NCCL env fact."""
    steps = pd.DataFrame({"step": range(len(steps_ms)), "step_ns": np.array(steps_ms) * 1e6})
    sizes = pd.DataFrame(
        {"op": ["allreduce"], "bytes": [1 << 20], "count": [4], "transfer_ns_median": [2e6],
         "busbw_GBps_median": [busbw]}
    )  # fmt: skip
    report = {
        "summary": {"step_ms": float(np.median(steps_ms))},
        "steps": [
            {"rank": r, "step": s, "step_ms": 10.0, "tau_comp_ms": 6.0, "overlap_ms": 2.0,
             "exposed_comm_ms": 3.0, "idle_ms": 1.0}
            for r in (0, 1) for s in range(3)
        ],
        "stragglers": {
            "flagged": [1] if kind else [],
            "ranks": [
                {"rank": 0, "flagged": False, "kind": None, "late_fraction": 0.1,
                 "lateness_ms": 0.0, "wait_caused_ms": 1.0},
                {"rank": 1, "flagged": bool(kind), "kind": kind, "late_fraction": 0.9,
                 "lateness_ms": 5.0, "wait_caused_ms": 50.0},
            ],
        },
    }  # fmt: skip
    nccl = pd.DataFrame({"fact": ["env NCCL_ALGO"], "value": [env]})
    return RunFacts(name, report, steps, sizes, nccl)


def test_diff_tables_on_known_runs():
    base = facts("a", [100, 101, 99, 100, 102, 98], kind="compute", env="Ring")
    slow = facts("b", [130, 131, 129, 130, 132, 128], busbw=5.0, kind=None, env="Tree")
    t = diff_tables([base, slow])
    st = t["step_time"].set_index("run")
    assert st.loc["a", "judgement"] == "baseline"
    assert st.loc["b", "judgement"] == "slower"
    assert st.loc["b", "change_pct"] == pytest.approx(30.0)
    assert st.loc["b", "p_value"] == pytest.approx(2 / math.comb(12, 6))
    # Derived decomposition: compute alone 6 - 2 = 4, overlapped 2, exposed 3, idle 1 (sum 10).
    dec = t["decomposition"].set_index(["rank", "component"])["a"]
    assert dec[(0, "compute_only_ms")] == 4.0
    parts = ["compute_only_ms", "compute_overlapped_ms", "exposed_comm_ms", "idle_ms"]
    assert sum(dec[(0, p)] for p in parts) == dec[(0, "step_ms")] == 10.0
    col = t["collectives"].iloc[0]
    assert col["Δ% busbw b"] == pytest.approx(-50.0)
    assert col["transfer_ms a"] == 2.0
    strag = t["stragglers"].set_index("rank")
    assert strag.loc[1, "straggler a"] == "compute" and strag.loc[1, "straggler b"] == ""
    nccl = t["nccl"].set_index("fact")
    assert bool(nccl.loc["env NCCL_ALGO", "changed"])
    assert nccl.loc["env NCCL_ALGO", "b"] == "Tree"
    assert regressions(t, 20.0) and not regressions(t, 40.0)


def test_where_the_step_change_went_is_said_from_the_parts():
    """Run b's ranks idle 4 ms more per step than a's and compute 1 ms less (ranks 0 and 1,
    three steps each, chosen here): the mean rank-step grew by 3 ms, and the sentence names
    idle first and compute alone second, each past a tenth of the change."""
    a, b = facts("a", [100, 101, 99]), facts("b", [103, 104, 102])
    for s in b.report["steps"]:
        s.update(step_ms=13.0, tau_comp_ms=5.0, idle_ms=5.0)  # idle 1 → 5, compute alone 4 → 3
    t = diff_tables([a, b])
    ch = t["step_change"].set_index("part")["delta_ms"]
    assert ch["idle_ms"] == 4.0 and ch["compute_only_ms"] == -1.0 and ch["step_ms"] == 3.0
    assert ch.drop("step_ms").sum() == ch["step_ms"]
    assert change_sentence(t, "b") == (
        "b: the mean rank-step changed by +3.000 ms (10.000 → 13.000 ms): idle +4.000 ms, "
        "compute (not overlapped) -1.000 ms."
    )
    # a run that hung says so instead of a decomposition of its wait
    b.report["diagnosis"] = {"label": HUNG_LABEL, "paragraph": "The job hung."}
    assert change_sentence(diff_tables([a, b]), "b").startswith("b hung: its figures hold")


def test_diff_uses_the_diagnosis_decomposition_when_the_report_has_it():
    a = facts("a", [1, 2, 3])
    a.report["decomposition"] = [
        {"rank": 0, "step": 1, "step_ms": 10.0, "compute_only_ms": 5.0,
         "compute_overlapped_ms": 1.0, "exposed_transfer_ms": 1.5, "exposed_wait_ms": 0.5,
         "memory_only_ms": 1.0, "idle_ms": 1.0}
    ]  # fmt: skip
    a.report["diagnosis"] = {"cause": "straggler", "paragraph": "Rank 1 is late."}
    b = facts("b", [1, 2, 3])
    t = diff_tables([a, b])
    comps = set(t["decomposition"]["component"])
    assert {"exposed_wait_ms", "memory_only_ms"} <= comps
    diag = t["diagnosis"].set_index("run")
    assert diag.loc["a", "cause"] == "straggler"
    assert diag.loc["b", "paragraph"].startswith("not available")


def test_diff_needs_two_distinct_runs():
    with pytest.raises(ValueError, match="at least two"):
        diff_tables([facts("a", [1])])
    with pytest.raises(ValueError, match="twice"):
        diff_tables([facts("a", [1]), facts("a", [1])])


# --- real sets ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("diff") / "store.duckdb"
    w = store.connect(path)
    for name, d in [
        ("compute", SAMPLES / "gloo_4rank_compute"),
        ("sleep", SAMPLES / "gloo_4rank_sleep"),
        ("dlrm", DLRM),
        ("dlrm_again", DLRM),
        ("hung", SAMPLES / "fr_skip"),
    ]:
        store.ingest(w, name, discover.expand([str(d)]))
    for name, job in NCCL_JOBS.items():  # DLRM's traces with a generated NCCL log beside
        log = make_log(job).write(path.parent / f"{name}.log")
        store.ingest(w, name, discover.expand([str(DLRM), str(log)]))
    w.close()
    return path


#: Two NCCL logs whose differences are chosen here (tests/nccl_log_gen.py writes them).
NCCL_JOBS = {
    "nccl_ib": Job(version="2.18.3", nodes=2, gpus=4, network="ib", gdr=True),
    "nccl_tcp": Job(version="2.24.3", nodes=2, gpus=4, network="socket", gdr=False),
}


def test_nccl_changes_between_two_logs(db_path):
    t = Store(db_path).diff("nccl_ib", "nccl_tcp")
    nccl = t["nccl"].set_index("fact")
    assert nccl.loc["versions", "nccl_ib"] == "2.18.3"
    assert nccl.loc["versions", "nccl_tcp"] == "2.24.3"
    assert nccl.loc["GPU Direct RDMA", "nccl_ib"] == "yes"
    assert nccl.loc["GPU Direct RDMA", "nccl_tcp"] == "no"
    assert nccl.loc["TCP fallback", "nccl_tcp"] == "yes"
    assert nccl.loc["TCP fallback", "nccl_ib"] == "no"
    for fact in ("versions", "GPU Direct RDMA", "TCP fallback"):
        assert nccl.loc[fact, "changed"], fact
    # The traces are the same: the step time did not change.
    assert t["step_time"].iloc[1]["change_pct"] == 0


def test_gloo_compute_vs_sleep_is_a_straggler_difference(db_path):
    truth = {m: json.loads((SAMPLES / f"gloo_4rank_{m}" / "ground_truth.json").read_text())
             for m in ("compute", "sleep")}  # fmt: skip
    t = Store(db_path).diff("compute", "sleep")
    # Both runs inject the same 40 ms per step into rank 2 (generator_args.delay_ms), only
    # the way differs: the step time must not be judged changed.
    assert (
        truth["compute"]["generator_args"]["delay_ms"]
        == truth["sleep"]["generator_args"]["delay_ms"]
    )
    st = t["step_time"].set_index("run")
    assert st.loc["sleep", "judgement"] == "no change"
    assert st.loc["sleep", "p_value"] > noise.ALPHA
    assert st.loc["compute", "n_steps"] == len(truth["compute"]["steps"])
    strag = t["stragglers"].set_index("rank")
    rank = truth["compute"]["straggler_rank"]
    assert strag.loc[rank, "straggler compute"] == "compute"  # mode "compute"
    assert strag.loc[rank, "straggler sleep"] == "other"  # mode "sleep": no extra compute
    others = [r for r in strag.index if r != rank]
    assert all(strag.loc[r, "straggler compute"] == "" for r in others)
    # the sentence of where the change went says so: the parts of the step cannot (the sleep
    # runs inside an autograd operator, which counts as compute there)
    assert change_sentence(t, "sleep").endswith(
        f"Stragglers: rank {rank} a compute straggler → late without more operator work "
        "(host, input or launch)."
    )
    # 8 all-reduces per step over 6 steps, in both runs (ground truth collectives_per_step).
    col = t["collectives"]
    n = truth["compute"]["collectives_per_step"] * len(truth["compute"]["steps"])
    assert col["count compute"].sum() == col["count sleep"].sum() == n


def test_dlrm_against_itself_changes_nothing(db_path):
    t = Store(db_path).diff("dlrm", "dlrm_again")
    assert t["step_time"].iloc[1]["judgement"] == "no change"
    assert t["step_time"].iloc[1]["change_pct"] == 0
    for name in ("summary", "decomposition", "model"):
        deltas = pd.to_numeric(t[name]["Δ dlrm_again"], errors="coerce").dropna()
        assert len(deltas) and (deltas == 0).all(), name
    assert not t["nccl"]["changed"].any()
    assert (t["collectives"]["Δ% busbw dlrm_again"].dropna() == 0).all()


def test_cli_formats_and_gate(db_path, capsys):
    db = str(db_path)
    assert main(["diff", "--db", db, "compute", "sleep"]) == 0
    out = capsys.readouterr().out
    assert "Mann-Whitney U" in out and "no change" in out
    assert main(["diff", "--db", db, "compute", "sleep", "--format", "json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["baseline"] == "compute" and js["step_time"][1]["judgement"] == "no change"
    assert main(["diff", "--db", db, "compute", "sleep", "--format", "csv", "--table",
                 "stragglers"]) == 0  # fmt: skip
    csv = capsys.readouterr().out.splitlines()
    assert csv[0].startswith("table,rank") and len(csv) == 1 + 4
    # No regression beyond noise between compute and sleep, whatever the threshold.
    assert main(["diff", "--db", db, "compute", "sleep", "--fail-if-slower", "0"]) == 0
    capsys.readouterr()
    # DLRM's single step (15-22 ms) against gloo's ~70-90 ms steps: one step gives no noise
    # estimate, so the plain change decides.
    assert main(["diff", "--db", db, "dlrm", "compute", "--fail-if-slower", "50"]) == 1
    assert "regressed" in capsys.readouterr().err
    assert main(["diff", "--db", db, "dlrm", "compute", "--fail-if-slower", "1000"]) == 0
    assert main(["diff", "--db", db, "dlrm"]) == 2
    assert main(["diff", "--db", db, "dlrm", "nope"]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err


def _all_gathers_by_rank(folder) -> dict[int, int]:
    """Read from the raw traces by plain Python: `gloo:all_gather` calls per rank."""
    import gzip

    out = {}
    for f in sorted(folder.glob("rank*.pt.trace.json.gz")):
        events = json.loads(gzip.open(f).read())["traceEvents"]
        out[int(f.name[4])] = sum(e.get("name") == "gloo:all_gather" for e in events)
    return out


def test_a_hung_run_is_no_transfer_and_no_pass(db_path, capsys):
    """fr_skip: rank 1 never entered the all_gather at seq 6 (ground truth); its trace has no
    gloo:all_gather while ranks 0, 2 and 3 sat in one until the 3 s timeout. That wait is no
    transfer: the diff used to list a 3 s all-gather at 0.000 GB/s, and --fail-if-slower
    passed the hung run in silence (its step time could not be judged: it has no steps)."""
    truth = json.loads((SAMPLES / "fr_skip" / "ground_truth.json").read_text())
    calls = _all_gathers_by_rank(SAMPLES / "fr_skip")
    assert calls[truth["culprit_rank"]] == 0 and sum(calls.values()) == 3
    t = Store(db_path).diff("sleep", "hung")
    col = t["collectives"]
    assert "allgather" not in set(col.loc[col["count hung"].notna(), "op"])
    assert main(["diff", "--db", str(db_path), "sleep", "hung", "--fail-if-slower", "5"]) == 1
    assert "could not be judged, so the gate fails: hung: not available" in capsys.readouterr().err
    # the headline table says the hung run's "step" is its whole trace span
    label = t["summary"].set_index("metric").loc["step_ms", "label"]
    assert label.endswith("(no steps, whole trace span per rank: hung)")


@pytest.mark.parametrize("pct", ["nan", "inf", "-1"])
def test_a_gate_that_could_never_fail_is_refused(db_path, capsys, pct):
    with pytest.raises(SystemExit) as e:
        main(["diff", "--db", str(db_path), "sleep", "compute", f"--fail-if-slower={pct}"])
    assert e.value.code == 2 and "finite and >= 0" in capsys.readouterr().err


def test_text_output_prints_samples_paragraphs_and_blanks(db_path, capsys):
    """--table step_samples printed nothing in text; the diagnosis paragraphs were cut at 120
    characters; a rank one run does not have read `NaN`."""
    db = str(db_path)
    assert main(["diff", "--db", db, "dlrm", "sleep", "--table", "step_samples"]) == 0
    out = capsys.readouterr().out
    tables = Store(db_path).diff("dlrm", "sleep")  # the tables the two commands print
    steps = tables["step_samples"]
    assert len(out.splitlines()) == 3 + 1 + len(steps)  # baseline, blank, title; header; rows
    assert main(["diff", "--db", db, "dlrm", "sleep", "--table", "diagnosis"]) == 0
    out = capsys.readouterr().out
    paragraph = tables["diagnosis"].set_index("run").loc["sleep", "paragraph"]
    assert " ".join(out.split()).count(" ".join(paragraph.split())) == 1
    assert main(["diff", "--db", db, "dlrm", "sleep", "--table", "stragglers"]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "None" not in out


def test_real_runs_profiling_the_same_steps_are_compared_step_by_step(tmp_path):
    # two real gloo runs of the same job shape, each profiling steps 2-25 (ground_truth.json);
    # the DLRM and 4-rank gloo sets above (1 and 6 steps) are compared unpaired
    from conftest import DATA, analysis_store

    runs = [
        DATA / "gloo_alternating" / n for n in ("sleep_front_2rank_r1", "compute_front_2rank_r1")
    ]
    steps = [json.loads((r / "ground_truth.json").read_text())["steps"] for r in runs]
    assert steps[0] == steps[1] and len(steps[0]) >= noise.MIN_PAIRED
    analysis_store(tmp_path / "s.duckdb", tuple(runs)).close()
    st = Store(tmp_path / "s.duckdb").diff(*(r.name for r in runs))["step_time"]
    later = st.iloc[1]
    assert bool(later["paired"]) and later["test"] == noise.PAIRED_TEST_NAME
    assert later["n_steps"] == len(steps[1])
