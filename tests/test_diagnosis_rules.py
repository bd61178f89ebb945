"""The diagnosis' wording rules on step figures given by hand: the opening sentence's wall words follow
the exposed shares (a wall, a wall only by transfer and waiting together, none), and the largest
fix says the network does not set the step exactly when it beats hiding all communication.
The truth of each row is the arithmetic written beside it, not the code's output."""

from __future__ import annotations

import pytest

from commwall.analysis.report.culprits import culprit_sentence as _culprit_sentence
from commwall.analysis.report.diagnosis import diagnose
from commwall.analysis.report.diagnosis_words import short_verdict


def report(transfer: float, wait: float, idle: float, whatifs: list[tuple[str, float]]) -> dict:
    """A 100 ms step: `transfer`, `wait` and `idle` ms of it, the rest compute; replay what-ifs
    as (key, saving in ms) from a 100 ms measured step."""
    step = 100.0
    parts = {
        "exposed_transfer_ms": transfer,
        "exposed_wait_ms": wait,
        "idle_ms": idle,
        "memory_only_ms": 0.0,
        "compute_overlapped_ms": 0.0,
    }
    summary = {
        "step_ms": step,
        "scope": "steps",
        "exposed_comm_share": (transfer + wait) / step,
        "tau_comp_ms": step - transfer - wait - idle,
        "compute_only_ms": step - transfer - wait - idle,
        **parts,
    }
    replay = {
        "available": True,
        "measured_step_ms": step,
        "replay_error": 0.0,
        "whatifs": [
            {"key": k, "label": k, "step_ms": step - s, "saving_ms": s, "saving_pct": s}
            for k, s in sorted(whatifs, key=lambda w: -w[1])
        ],
    }
    # collectives matched across ranks (no rank charged with waiting: no culprits)
    stragglers = {"ranks": [{"rank": 0, "wait_caused_ms": 0.0}]}
    return {
        "summary": summary,
        "replay": replay,
        "run_info": {"n_steps": 1},
        "stragglers": stragglers,
    }


@pytest.mark.parametrize(
    ("transfer", "wait", "opening"),
    [
        (30.0, 5.0, "Communication wall, mostly data transfer:"),  # transfer alone passes 10%
        (2.0, 25.0, "Communication wall, mostly waiting for late ranks:"),  # waiting alone does
        (12.0, 11.0, "Communication wall, mostly data transfer:"),  # both pass; transfer larger
        (11.0, 12.0, "Communication wall, mostly waiting for late ranks:"),  # waiting larger
        (6.0, 5.0, "At the communication wall's edge:"),  # 11% together, neither alone
        (4.0, 5.0, "No communication wall:"),  # 9% together
    ],
)
def test_headline_opening_follows_the_shares(transfer, wait, opening):
    d = diagnose(report(transfer, wait, 2.0, [("transfer_hidden", transfer)]))
    assert d["opening"].startswith(opening)
    assert d["wall"] == (transfer + wait > 10.0)


@pytest.mark.parametrize(
    ("fix", "saving", "comm_hidden", "says"),
    [
        ("straggler_fixed", 38.0, 29.0, "the late rank's own pace, not the network"),
        ("straggler_fixed", 20.0, 29.0, None),  # less than the communication bound
        ("idle_removed", 51.0, 47.0, "the idle host time, not the network"),
        ("transfer_hidden", 40.0, 35.0, None),  # a communication fix
        ("straggler_fixed", 38.0, None, None),  # no bound to compare with
    ],
)
def test_fix_beyond_communication(fix, saving, comm_hidden, says):
    whatifs = [(fix, saving)] + ([("comm_hidden", comm_hidden)] if comm_hidden else [])
    d = diagnose(report(6.0, 5.0, 2.0, whatifs))
    (line,) = [p["text"] for p in d["points"] if p["topic"] == "fix"]
    assert line.startswith(f"Largest single fix: {fix}, {saving:.1f} ms faster")
    if says is None:
        assert "not the network" not in line
    else:
        assert says in line and f"would save ({comm_hidden:.1f} ms)" in line


def test_a_replay_of_steps_that_take_no_time_is_no_gain():
    # fuzz find: a corrupt nsys export whose replayed steps measure 0 ms gave what-ifs with
    # saving_pct None, and comparing None > 0 took the whole diagnosis down
    rep = report(6.0, 5.0, 2.0, [("transfer_hidden", 0.0)])
    rep["replay"]["measured_step_ms"] = 0.0
    for w in rep["replay"]["whatifs"]:
        w.update(step_ms=0.0, saving_pct=None)
    d = diagnose(rep)
    (line,) = [p["text"] for p in d["points"] if p["topic"] == "whatif"]
    assert "transfer_hidden: 0.00 ms (no gain)" in line
    assert d["fix"] is None


@pytest.mark.parametrize(
    ("n_last", "says", "not_says"),
    [
        (5, "causes 36% of it, last in 5/8 collectives (not persistent enough", "never"),
        (0, "causes 36% of it without ever arriving last (0/8 collectives)", "last in 0/8"),
    ],
)
def test_a_rank_never_last_is_told_apart(n_last, says, not_says):
    # the DLRM set: rank 2 is charged 15% of the waiting while last in 0 of 8 collectives, because
    # the wait before each arrival is charged to every rank still absent (docs/stragglers.md)
    c = {"rank": 2, "share_of_wait": 0.36, "n_last": n_last, "n_instances": 8, "flagged": False,
         "why": "it is late", "kind": "other"}  # fmt: skip
    line = _culprit_sentence(c, 1)
    assert says in line and not_says not in line


@pytest.mark.parametrize(
    ("device", "fixes", "caveat"),
    [
        ("cpu", [("straggler_fixed", 20.0)], True),  # the late-rank fix is shown on a CPU run
        ("gpu", [("straggler_fixed", 20.0)], False),  # GPU collectives do not share the cores
        ("cpu", [("transfer_hidden", 20.0)], False),  # no late-rank fix shown
    ],
)
def test_late_rank_fix_on_cpu_traces_is_an_upper_estimate(device, fixes, caveat):
    rep = report(2.0, 25.0, 2.0, fixes)
    rep["run_info"]["device_kind"] = device
    (line,) = [p["text"] for p in diagnose(rep)["points"] if p["topic"] == "whatif"]
    assert ("upper estimate" in line) == caveat


def test_without_matched_collectives_the_wall_is_not_called_transfer():
    # one rank's trace (hta_negative_queue_length_rank0of16): all exposed communication is counted
    # as transfer because waiting cannot be measured, so the headline must not say "mostly data
    # transfer"
    rep = report(30.0, 0.0, 2.0, [("transfer_hidden", 30.0)])
    del rep["stragglers"]
    d = diagnose(rep)
    assert d["opening"].startswith("Communication wall (transfer and waiting not told apart):")
    assert "mostly" not in d["opening"] and "of data transfer" not in d["opening"]
    assert "bandwidth-bound" not in d["paragraph"] and "transfer and waiting not told" in d["label"]


def _shares_report(shares: dict[int, float]) -> dict:
    return {"stragglers": {"ranks": [{"rank": r, "share_of_wait": v} for r, v in shares.items()]}}


@pytest.mark.parametrize(
    ("shares", "named", "expected"),
    [
        # the DLRM set's shares: rank 7 36 %, then 15 %, 15 %, 14 %, 12 %: within 20 % of the
        # second named (0.150 x 0.8 = 0.120), ranks 6, 5 and 4 are close behind it
        ({7: 0.36, 2: 0.150, 6: 0.148, 5: 0.140, 4: 0.124, 0: 0.05}, [7, 2],
         " Close behind rank 2: rank 6 15%, rank 5 14%, rank 4 12%: beyond rank 7, the waiting "
         "is spread over several ranks."),
        ({1: 0.60, 0: 0.30, 2: 0.10}, [1, 0], ""),  # 0.10 < 0.30 x 0.8
        ({3: 0.50, 1: 0.45, 0: 0.05}, [3], " Close behind: rank 1 45%: the waiting is not rank 3's alone."),
    ],
)  # fmt: skip
def test_ranks_close_behind_the_named_ones(shares, named, expected):
    from commwall.analysis.report.culprits import close_behind as _close_behind

    culprits = [{"rank": r, "share_of_wait": shares[r]} for r in named]
    assert _close_behind(_shares_report(shares), culprits) == expected


def test_a_culprits_idle_is_set_against_the_other_ranks():
    """Two ranks: the culprit idles 39.7 ms per step, the other 2.3 ms (the gloo pair
    sleep_front_2rank_r1). A median over both ranks (21.0 ms) would hide the contrast."""
    from commwall.analysis.report.culprits import culprits as _culprits

    report = {
        "stragglers": {"ranks": [
            {"rank": 1, "share_of_wait": 0.95, "wait_caused_ms": 38.0, "compute_ratio": 1.0,
             "kind": "other", "flagged": True, "n_last": 6, "n_instances": 6},
            {"rank": 0, "share_of_wait": 0.05, "wait_caused_ms": 2.0, "compute_ratio": 1.0},
        ]},
        "decomposition": {"ranks": [{"rank": 0, "idle_ms": 2.3}, {"rank": 1, "idle_ms": 39.7}]},
    }  # fmt: skip
    (c,) = _culprits(report)
    assert (c["idle_ms_per_step"], c["median_idle_ms_per_step"]) == (39.7, 2.3)
    assert "idle 39.7 ms per step against 2.3 ms on the other ranks" in _culprit_sentence(c, 6)


@pytest.mark.parametrize(
    ("whatifs", "opening", "cause"),
    [
        # the late rank's fix saves 38 ms, hiding all communication 29: the rank sets the step
        ([("straggler_fixed", 38.0), ("comm_hidden", 29.0)],
         "The late rank's own pace, not the network, sets the step:", "synchronisation"),
        # it saves less than hiding all communication: the shares decide, as before
        ([("straggler_fixed", 20.0), ("comm_hidden", 29.0)],
         "Communication wall, mostly data transfer:", "bandwidth"),
        ([("idle_removed", 31.0), ("comm_hidden", 29.0)],
         "The idle host time, not the network, sets the step:", "host"),
    ],
)  # fmt: skip
def test_the_headline_follows_the_replay_when_the_network_does_not_set_the_step(
    whatifs, opening, cause
):
    d = diagnose(report(30.0, 5.0, 2.0, whatifs))
    assert d["opening"].startswith(opening) and d["cause"] == cause


@pytest.mark.parametrize(
    "nccl,tail",
    [
        (None, ""),
        ({"findings": []}, ""),
        (
            {"findings": ["NCCL warnings: 272; first: x", "GPU Direct RDMA is off", "third"]},
            " What the NCCL logs say: NCCL warnings: 272; first: x; GPU Direct RDMA is off (the "
            "NCCL section has the rest).",
        ),
    ],
)
def test_a_run_of_logs_alone_says_what_the_logs_found(nccl, tail):
    """No step time and no stop: the paragraph is "not available", followed by the NCCL logs'
    first two findings where there are any."""
    d = diagnose({"summary": {}, "nccl": nccl})
    assert d["available"] is False
    assert (
        d["paragraph"] == "Not available: no step time could be measured from these files." + tail
    )


@pytest.mark.parametrize(
    "d,line",
    [
        ({"available": False}, "no step measured"),
        ({"available": True, "wall": True, "cause": "hang", "label": "hung: a collective never "
          "completed"}, "Hung: a collective never completed"),
        ({"available": True, "wall": True, "cause": "crash", "label": "died: ranks stopped on an "
          "error of their own"}, "Died: ranks stopped on an error of their own"),
        ({"available": True, "wall": True, "cause": "bandwidth", "label": "at the wall's edge: x"},
         "At the wall's edge: x"),
        ({"available": True, "wall": True, "cause": "bandwidth", "label": "bandwidth-bound"},
         "Communication wall — bandwidth-bound"),
        ({"available": True, "wall": False, "cause": "compute", "label": "compute-bound"},
         "No wall — compute-bound"),
    ],
)  # fmt: skip
def test_short_verdict_says_a_hang_is_a_hang_not_a_wall(d, line):
    assert short_verdict(d) == line
