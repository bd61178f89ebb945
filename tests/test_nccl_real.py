"""Real NCCL logs (tests/data/nccl/, NCCL 2.6 to 2.29 and RCCL, published by their authors
under permissive licences): what commwall reports must agree with the facts a reader wrote
down from each file's text (the `.facts.json` beside it, each fact with the lines proving
it), and nearly every NCCL line must be understood."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from nccl_real import FACTS, ingest_all, observed, real_logs

from commwall.ingest.formats.nccl_log import parse

LOGS = real_logs()
CASES = [(log, fact) for log in LOGS for fact in log.facts]
#: The share of NCCL lines every real log must have understood, and that of all of them
#: (013 comes from a modified NCCL build that prints 207 lines of its own through NCCL INFO).
FLOOR_PER_FILE = 0.85
FLOOR_ALL = 0.98


@pytest.fixture(scope="module")
def sections(tmp_path_factory):
    return ingest_all(tmp_path_factory.mktemp("real") / "s.duckdb", LOGS)


def _text(log) -> str:
    """The log's text, split only at `\\n` later (some lines hold `\\r` progress bars)."""
    return gzip.open(log.path, "rb").read().decode("utf-8", "replace")


def test_every_log_has_facts():
    assert len(LOGS) == 30
    for log in LOGS:
        assert log.path.exists(), log.path
        assert set(log.facts) <= set(FACTS), log.name
        assert {"versions", "warnings", "watchdog"} <= set(log.facts), log.name


@pytest.mark.parametrize("log", LOGS, ids=[log.name[:3] for log in LOGS])
def test_proof_lines_are_in_the_file(log):
    """Every fact quotes lines of the file as they are (so a fact can be checked by hand)."""
    lines = _text(log).split("\n")
    for name, fact in log.facts.items():
        for proof in fact["proof"]:
            assert lines[proof["line"] - 1].rstrip("\r").startswith(proof["text"]), (name, proof)


@pytest.mark.parametrize("log,fact", CASES, ids=[f"{log.name[:3]}-{fact}" for log, fact in CASES])
def test_report_agrees_with_the_file(sections, log, fact):
    assert observed(sections[log.name])[fact] == log.facts[fact]["value"]


def test_nccl_lines_are_understood(sections):
    nccl = recognised = 0
    for log in LOGS:
        lines = sections[log.name]["lines"]
        nccl += lines["nccl"]
        recognised += lines["recognised"]
        assert lines["recognised"] >= FLOOR_PER_FILE * lines["nccl"], (log.name, lines)
    assert recognised >= FLOOR_ALL * nccl, (recognised, nccl)


def test_every_nccl_line_is_counted():
    """The parser's NCCL line count covers every line a reader counts as NCCL's: those with
    an `NCCL INFO` / `NCCL WARN` / `NCCL TRACE` level token."""
    for log in LOGS:
        text = _text(log)
        by_hand = sum(
            any(f"NCCL {level}" in line for level in ("INFO", "WARN", "TRACE"))
            for line in text.split("\n")
        )
        assert parse(log.path).detail["lines"]["nccl"] >= by_hand, log.name


def test_unknown_lines_are_listed_by_family(sections):
    """013 comes from a modified NCCL build whose own lines (`NCCL INFO Created 1 queue info,
    destroyed 1`) no NCCL release prints: the report lists them as one family, with the
    count a reader gets by searching the file."""
    log = next(log for log in LOGS if log.name.startswith("013"))
    by_hand = _text(log).count("NCCL INFO Created 1 queue info, destroyed 1")
    families = sections[log.name]["lines"]["unknown_families"]
    assert by_hand > 0
    assert [(f["family"], f["count"]) for f in families] == [("Created N", by_hand)]
    assert families[0]["example"].endswith("NCCL INFO Created 1 queue info, destroyed 1")


def test_docs_examples_are_quoted_from_the_logs():
    """docs/nccl_logs.md quotes one real line per family: each quote (pieces around `…`) is
    in the log it names."""
    doc = (Path(__file__).parents[1] / "docs" / "nccl_logs.md").read_text()
    table = doc[doc.index("## Logs as they are found") : doc.index("How the situations")]
    texts = {log.name[:3]: _text(log) for log in LOGS}
    checked = 0
    for row in table.split("\n"):
        cells = row.split(" | ")
        if len(cells) < 3 or not re.search(r"\(\d{3}\)", cells[2]):
            continue
        names = re.findall(r"\((\d{3})\)", cells[2])
        for quote in re.findall(r"`([^`]+)`", cells[2]):
            pieces = [p.strip() for p in quote.replace("\\|", "|").split("…") if p.strip()]
            assert any(all(p in texts[n] for p in pieces) for n in names), quote
            checked += 1
    assert checked >= 30
