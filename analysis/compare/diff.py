"""Runs side by side against a baseline (the first run): step time judged against noise, the
step decomposition per rank, collectives per op and size, stragglers, NCCL and model changes.

Every table is a DataFrame with one column per run (named by the run) and, for numbers, a
`Δ <run>` column per later run (run − baseline). Per-run figures come from the report and
from analysis/sql/diff.sql. The tables are built in their own modules: step time
(`step_time`), the parts of the step (`decomposition`), the other report sections
(`sections`); the change in words is `sentence`, the CI gate's verdicts `gate`, what is read of
a run `facts`. Every name is importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import duckdb
import pandas as pd

from commwall.analysis.compare.decomposition import (
    DERIVED_PARTS,
    PARTS,
    decomposition,
    decomposition_records,
    step_change,
)
from commwall.analysis.compare.facts import RunFacts, run_facts, run_names
from commwall.analysis.compare.gate import regressions, unjudged
from commwall.analysis.compare.sections import (
    MODEL_FIELDS,
    collectives,
    diagnosis,
    model,
    nccl,
    straggler_verdicts,
    stragglers,
    summary,
)
from commwall.analysis.compare.sentence import KIND_WORDS, PART_WORDS, change_sentence
from commwall.analysis.compare.step_time import step_samples, step_time

__all__ = [
    "DERIVED_PARTS",
    "KIND_WORDS",
    "MODEL_FIELDS",
    "PARTS",
    "PART_WORDS",
    "TABLES",
    "RunFacts",
    "change_sentence",
    "collectives",
    "decomposition",
    "decomposition_records",
    "diagnosis",
    "diff",
    "diff_tables",
    "model",
    "nccl",
    "regressions",
    "run_facts",
    "step_change",
    "step_samples",
    "step_time",
    "straggler_verdicts",
    "stragglers",
    "summary",
    "unjudged",
]

#: The tables of a diff, in output order.
TABLES: dict[str, Callable[[Sequence[RunFacts]], pd.DataFrame]] = {
    "step_time": step_time,
    "summary": summary,
    "diagnosis": diagnosis,
    "decomposition": decomposition,
    "step_change": step_change,
    "collectives": collectives,
    "stragglers": stragglers,
    "straggler_verdicts": straggler_verdicts,
    "nccl": nccl,
    "model": model,
    "step_samples": step_samples,
}


def diff_tables(runs: Sequence[RunFacts]) -> dict[str, pd.DataFrame]:
    """Every table of the diff of `runs` (baseline first; at least two runs)."""
    if len(runs) < 2:
        raise ValueError("diff needs at least two runs (the first is the baseline)")
    run_names(runs)
    return {k: f(runs) for k, f in TABLES.items()}


def diff(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The diff of runs `names` of the store (the first is the baseline)."""
    return diff_tables([run_facts(con, n) for n in names])
