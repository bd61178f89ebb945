"""The report for an interactive viewer: the dict of analysis.report.build_report, with each
section built once (the checklist is evaluated on the others instead of rebuilding them), and
a section that fails recorded under `analysis_errors` instead of failing the whole report."""

from __future__ import annotations

from typing import Any

import duckdb

from analysis.checklist import checklist_section, evaluate
from analysis.db import run_id
from analysis.report import SECTIONS


def resilient_report(con: duckdb.DuckDBPyConnection, run: str) -> dict:
    """build_report's dict for `run`; a section whose builder raises is None, and
    `analysis_errors` (present only then) maps its key to the error in words."""
    rid = run_id(con, run)
    report: dict[str, Any] = {"run": run}
    errors: dict[str, str] = {}
    for key, build in SECTIONS.items():
        report[key] = None
        if build is checklist_section:
            continue
        try:
            report[key] = build(con, rid)
        except Exception as e:  # a bug in one section must not hide the others
            errors[key] = f"{type(e).__name__}: {e}"
    for key, build in SECTIONS.items():
        if build is checklist_section:
            report[key] = evaluate(report)
    if errors:
        report["analysis_errors"] = errors
    return report
