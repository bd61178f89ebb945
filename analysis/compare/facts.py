"""What a comparison reads of one run (its report and the per-run tables of
analysis/sql/diff.sql), and the helpers every side-by-side table shares: the runs' names, the
`Δ <run>` columns, a report value as a short string."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd

from commwall.analysis.db import run_id
from commwall.analysis.report.build import build_report
from commwall.analysis.report.session import run_session


@dataclass
class RunFacts:
    """What the diff needs of one run: its report and three per-run tables of diff.sql."""

    name: str
    report: Mapping[str, Any]
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)  # step_times
    sizes: pd.DataFrame = field(default_factory=pd.DataFrame)  # collective_sizes
    nccl: pd.DataFrame = field(default_factory=pd.DataFrame)  # nccl_facts


def run_facts(
    con: duckdb.DuckDBPyConnection, name: str, report: Mapping[str, Any] | None = None
) -> RunFacts:
    """The RunFacts of run `name` (its report is built unless given)."""
    rid = run_id(con, name)

    def q(macro: str) -> pd.DataFrame:
        return con.execute(f"SELECT * FROM {macro}(?)", [rid]).df()

    with run_session(con, rid):  # the report and the tables read one matching
        report = build_report(con, name, keep_going=True) if report is None else report
        return RunFacts(name, report, q("step_times"), q("collective_sizes"), q("nccl_facts"))


def run_names(runs: Sequence[RunFacts]) -> list[str]:
    """The runs' names, baseline first; a name given twice is an error."""
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"a run is named twice: {names}")
    return names


def with_deltas(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """`Δ <run>` = run − baseline for every later run whose column is numeric."""
    base = names[0]
    for n in names[1:]:
        a = pd.to_numeric(df[base], errors="coerce")
        b = pd.to_numeric(df[n], errors="coerce")
        df[f"Δ {n}"] = b - a
    return df


def fact_text(v: Any) -> str:
    """A report value as a short string (lists of records as `a / b; c / d`)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return "; ".join(
            " / ".join(str(x) for x in e.values() if x not in (None, "", []))
            if isinstance(e, dict)
            else str(e)
            for e in v
        )
    return str(v)
