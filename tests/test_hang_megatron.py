"""The real Flight Recorder dumps of a 16-rank Megatron job with faults injected into two ranks
(tests/data/fr/nvrx_megatron_16rank): the hang verdict names each injected rank once, across
all the groups it stopped in, with the groups' roles, instead of once per group."""

from __future__ import annotations

import json
import re

import pytest
from conftest import DATA

from commwall.cli.main import main

MEGATRON = DATA / "fr" / "nvrx_megatron_16rank"
CASES = sorted(p.name for p in MEGATRON.iterdir() if p.is_dir())


def injected(case: str) -> list[int]:
    """The faulted ranks, from the job's own log: `Fault ranks: [9, 14]` (line 1)."""
    text = (MEGATRON / case / "fault_injection.log").read_text()
    return json.loads(re.search(r"Fault ranks: (\[[\d, ]*\])", text).group(1))


def reference_group(case: str) -> tuple[str, list[int]]:
    """The upstream analyser's hung group and missing ranks: `72 | EXPERT_MODEL_PARALLEL_GROUP,0
    | nccl:all_to_all | 2048x5120 | BFloat16 | 9,14` (reference_output.txt, line 2)."""
    row = (MEGATRON / case / "reference_output.txt").read_text().splitlines()[1]
    cells = [c.strip() for c in row.split("|")]
    return cells[0], [int(r) for r in cells[-1].split(",")]


@pytest.fixture(scope="module")
def hangs(tmp_path_factory):
    out = {}
    for case in CASES:
        db = str(tmp_path_factory.mktemp(case) / "s.duckdb")
        assert main(["ingest", "--db", db, "--run", case, "--quiet", str(MEGATRON / case)]) == 0
        out[case] = db
    return out


@pytest.mark.parametrize("case", CASES)
def test_one_sentence_per_injected_rank(hangs, case, capsys):
    capsys.readouterr()
    assert main(["hang", "--db", hangs[case], "--run", case, "--format", "json"]) == 0
    section = json.loads(capsys.readouterr().out)
    truth = injected(case)
    assert truth == [9, 14]
    culprits = section["culprits"]
    assert [c["rank"] for c in culprits] == truth
    pg, missing = reference_group(case)
    assert missing == truth
    for c in culprits:
        assert pg in c["groups"] and len(c["groups"]) >= 3
        assert c["roles"][c["groups"].index(pg)] == "EP"  # EXPERT_MODEL_PARALLEL_GROUP
        assert c["rank"] not in c["waiting"] and not set(truth) & set(c["waiting"])
        assert c["sentence"].startswith(f"Rank {c['rank']} stopped issuing collectives in all ")
    verdict = section["verdict"]
    # one sentence each, not one per group: the per-group sentences stay in groups[*]
    assert verdict.count("stopped issuing collectives") == len(truth)
    assert "never entered it" not in verdict
    assert sum("never entered it" in (g.get("sentence") or "") for g in section["groups"]) >= 3
