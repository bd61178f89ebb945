"""What a person reads carries no report keys or Python values: the matching sentence of the
Collectives page and the text report, the post-mortem's legends and run facts."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES

from commwall.analysis import db
from commwall.analysis.collectives.instances import matching_sentence
from commwall.analysis.hangs.section import shapes_text
from commwall.dashboard.export import postmortem
from commwall.ingest import discover, store

#: Keys of the report's step parts and of nested facts, as they would leak into text.
KEYS = re.compile(r"\b(?:compute_only_ms|compute_overlapped_ms|exposed_\w+_ms|idle_ms|"
                  r"memory_only_ms|n_dump_ranks|device_kind)\b")  # fmt: skip


def test_the_matching_sentence_in_words():
    m = {"instances": 48, "by_key": {"order": 48}, "incomplete": 0, "size_mismatch": 0,
         "op_mismatch": 0, "op_mismatch_checked": False}  # fmt: skip
    text = matching_sentence(m)
    assert text.startswith("48 instances matched across ranks (by order within each op);")
    assert "{" not in text and "'" not in text
    both = matching_sentence({**m, "instances": 60, "by_key": {"order": 48, "seq": 12}})
    assert "(48 by order within each op, 12 by sequence number)" in both


def test_the_post_mortem_speaks_in_words(tmp_path):
    path = tmp_path / "s.duckdb"
    con = store.connect(path)
    store.ingest(con, "r", discover.expand([str(SAMPLES / "gloo_4rank_compute")]))
    con.close()
    con = db.open_db(path)
    try:
        html = postmortem(con, "r")
    finally:
        con.close()
    visible = re.sub(r"<[^>]+>", " ", html)  # text and SVG labels, tags and attributes out
    assert not KEYS.search(visible), KEYS.search(visible)
    assert "compute (not overlapped)" in visible  # the decomposition legend, in words


def test_table_headers_are_words():
    from commwall.dashboard.ui import column_label

    assert column_label("wait_caused_ms") == "wait caused on peers (ms)"
    assert column_label("exposed_wait_ms") == "exposed wait (ms)"
    assert column_label("peak_busbw_GBps") == "peak bus bandwidth (GB/s)"
    # the Collectives page's per-op table: a statistic before the unit
    assert column_label("busbw_GBps_median") == "bus bandwidth, median (GB/s)"
    assert column_label("transfer_ms_median") == "transfer, median (ms)"
    assert column_label("op_type") == "op type"
    assert column_label("rank") == "rank"
    for name in ("n_last", "late_fraction", "compute_ratio", "start_delay_ms", "top_rank"):
        assert "_" not in column_label(name)


def test_the_models_advice_is_withheld_when_its_fit_is_uncertain():
    from commwall.analysis.model.summary import predicted_reason

    reason = (
        "exposed communication is 49.3% of the step; communication takes 1.79× the compute "
        "time, so no overlap can hide it: more bandwidth, fewer bytes or more compute per sync "
        "are needed"
    )
    model = {"status": "fit too uncertain: held-out median error 43.9 %",
             "predicted": {"verdict": "communication wall", "reason": reason}}  # fmt: skip
    shown = predicted_reason(model)
    assert shown is not None and "bandwidth" not in shown and "withheld" in shown
    assert shown.startswith("exposed communication is 49.3% of the step")
    assert predicted_reason({**model, "status": "calibrated"}) == reason
    assert predicted_reason({"status": "calibrated", "predicted": {}}) is None
    quiet = {"verdict": "compute-bound", "reason": "exposed communication is 2.1% of the step"}
    assert predicted_reason({**model, "predicted": quiet}) == quiet["reason"]  # nothing withheld


@pytest.mark.parametrize(
    ("record", "words"),
    [
        # fr_size's dumps: rank 1 all-gathers 2048 elements where the others gather 1024
        ("[[2048]] -> [[4, 2048]]", "2048 in, 4×2048 out"),
        ("[[1024], [3, 2]] -> [[4, 1024]]", "1024 and 3×2 in, 4×1024 out"),
        ("[[]] -> [[]]", "scalar in, scalar out"),
        ("not a shape", "not a shape"),  # left as it is
    ],
)
def test_flight_recorder_shapes_in_words(record, words):
    assert shapes_text(record) == words
