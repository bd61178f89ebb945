"""Page helpers: checklist order, code spans in hints, empty charts, tables without "None"."""

from __future__ import annotations

import pandas as pd
import pytest

from commwall.analysis.report.checklist import ordered
from commwall.dashboard.ui import findings, md_code, nccl_hint, traces_hint


def test_checklist_items_needing_attention_come_first_in_their_own_order():
    items = [
        {"key": "a", "status": "ok"},
        {"key": "b", "status": "attention"},
        {"key": "c", "status": "not_observable"},
        {"key": "d", "status": "attention"},
        {"key": "e", "status": "ok"},
    ]
    assert [i["key"] for i in ordered(items)] == ["b", "d", "a", "e", "c"]


def test_code_spans_stay_code_and_everything_else_is_escaped():
    hint = "Check `ip link show` (mtu 9000) on *every* host."
    assert md_code(hint) == "Check `ip link show` \\(mtu 9000\\) on \\*every\\* host\\."
    # an unpaired backtick is a plain character, escaped like the rest
    assert md_code("a ` b") == "a \\` b"


def test_hints_say_what_the_run_lacks_not_what_it_already_has():
    nsys = {"run_info": {"files": {"nsys": 1}, "n_ranks": 2, "backends": []}}
    assert "Upload one" not in traces_hint(nsys)
    assert "2 ranks" in traces_hint(nsys)
    assert "upload the other ranks" in traces_hint({"run_info": {"files": {"kineto": 1}}})
    assert traces_hint({}).startswith("Upload one Kineto trace")
    gloo = {"run_info": {"backends": ["gloo"]}}
    assert "gloo, not NCCL" in nccl_hint(gloo) and "Upload" not in nccl_hint(gloo)
    assert nccl_hint({"run_info": {"backends": ["nccl"]}}).startswith("Upload the NCCL_DEBUG")


def test_tables_drop_empty_columns_and_show_a_dash_for_missing_text(monkeypatch):
    import commwall.dashboard.ui as ui

    shown = {}

    class Target:
        def dataframe(self, df, **kw):
            shown["df"] = df

        def caption(self, text):
            shown["caption"] = text

    df = pd.DataFrame({"op": ["allreduce", None], "nothing": [None, None], "n": [1, 2]})
    ui.table(df, where=Target())
    assert list(shown["df"].columns) == ["op", "n"]
    assert list(shown["df"]["op"]) == ["allreduce", "—"]
    ui.plot(df.iloc[:0], lambda d: None, (), "Nothing to draw.", where=Target())
    assert shown["caption"] == "Nothing to draw."


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a; b", ["a", "b"]),
        ("", []),
        ("rank 7 (36% of all; t = 2.3), last; 14%", ["rank 7 (36% of all; t = 2.3), last", "14%"]),
        ("x (a; (b; c)); y", ["x (a; (b; c))", "y"]),  # nested parentheses
        ("one finding", ["one finding"]),
    ],
)
def test_verdict_findings_are_cut_outside_parentheses(text, want):
    assert findings(text) == want
