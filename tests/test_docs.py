"""Docs are tests: every public SQL macro is documented, every store table is documented."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from commwall.analysis.db import sql_modules
from commwall.ingest.schema import ddl

CREATE = re.compile(r"^CREATE OR REPLACE TEMP (MACRO|VIEW) (\w+)", re.MULTILINE)


def public_objects():
    for module, text in sql_modules().items():
        for m in CREATE.finditer(text):
            if not m.group(2).startswith("_"):
                yield module, m.group(2), text[: m.start()]


@pytest.mark.parametrize("module,name,before", list(public_objects()))
def test_public_sql_objects_are_documented(module, name, before):
    block = []
    for line in reversed(before.rstrip("\n").split("\n")):
        if not line.startswith("--"):
            break
        block.append(line)
    text = "\n".join(reversed(block))
    assert text.startswith(f"-- {name}("), f"{module}.sql: {name} lacks a leading comment block"
    assert "-- Algorithm:" in text, f"{module}.sql: {name} lacks an '-- Algorithm:' line"
    assert "returns" in text or "Out:" in text, f"{module}.sql: {name} does not describe its output"


def test_every_store_table_is_documented():
    text = ddl()
    for m in re.finditer(r"CREATE TABLE IF NOT EXISTS (\w+)", text):
        before = text[: m.start()].rstrip("\n").split("\n")[-1]
        assert before.startswith("--"), f"table {m.group(1)} has no comment above it"


def _declared_keys() -> dict[str, set[str]]:
    """Every key of every TypedDict reachable from the report's declared shape."""
    import typing

    from commwall.analysis.report.shape import Report

    out: dict[str, set[str]] = {}

    def walk(tp) -> None:
        if typing.is_typeddict(tp):
            if tp.__name__ in out:
                return
            hints = typing.get_type_hints(tp)
            out[tp.__name__] = set(hints)
            for v in hints.values():
                walk(v)
        else:
            for a in typing.get_args(tp):
                walk(a)

    walk(Report)
    return out


def test_every_declared_report_key_is_in_the_glossary():
    text = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    declared = _declared_keys()
    assert {"Report", "Summary", "Diagnosis", "StragglerRank"} <= set(declared)  # not vacuous
    missing = {n: sorted(k for k in keys if f"`{k}`" not in text) for n, keys in declared.items()}
    assert {n: k for n, k in missing.items() if k} == {}


def _write_performance():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "write_performance", ROOT / "benchmarks" / "write_performance.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_performance_tables_are_the_benchmarks_results():
    wp = _write_performance()
    for path, text in wp.pages(wp.load(wp.RESULTS)).items():
        assert path.read_text(encoding="utf-8") == text, (
            f"run benchmarks/write_performance.py: {path}"
        )


def test_the_performance_table_is_made_from_the_figures(tmp_path):
    wp = _write_performance()
    # a result as benchmarks/ingest.py --json writes it; the expected cells by hand
    ingest = {
        "machine": {"date": "2026-01-02", "cpus": 4, "memory_gib": 15.6, "load_average_1min": 0.5},
        "rows": [
            {
                "tool": "commwall",
                "case": "x1",
                "mb": 50.0,
                "wall_s": 1.0,
                "cpu_s": 1.0,
                "peak_mb": 100.0,
            },
            {
                "tool": "HTA 0.5.0",
                "case": "x1",
                "mb": 50.0,
                "wall_s": 4.0,
                "cpu_s": 4.0,
                "peak_mb": 400.0,
            },
            {
                "tool": "commwall",
                "case": "x10",
                "mb": 500.0,
                "wall_s": 4.0,
                "cpu_s": 5.0,
                "peak_mb": 450.0,
            },
            {
                "tool": "HTA 0.5.0",
                "case": "x10",
                "mb": 500.0,
                "wall_s": 50.0,
                "cpu_s": 50.0,
                "peak_mb": 3000.0,
            },
            {
                "tool": "commwall",
                "case": "x20",
                "mb": 999.0,
                "wall_s": 9.0,
                "cpu_s": 9.0,
                "peak_mb": 900.0,
            },
        ],
    }
    row = wp.ingest_row(ingest)  # the largest case both tools ran: x10, not commwall's x20
    assert row[0].startswith("Kineto ingest of a 500 MB trace")
    assert row[1] == "4.00 s, 125 MB/s, peak 450 MB (0.90× the file)"  # 500/4; 450/500
    assert row[2] == "HTA 0.5.0: 50.00 s, peak 3,000 MB; commwall 12.5× faster"  # 50/4
    assert row[3] == "2026-01-02, 4 CPUs, 16 GiB, load 0.5"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "performance.md").write_text(
        "# P\n<!-- performance:begin -->\nold\n<!-- performance:end -->\ntail\n"
    )
    (tmp_path / "README.md").write_text(
        "x\n<!-- performance-headline:begin -->\n<!-- performance-headline:end -->\n"
    )
    (tmp_path / "ingest.json").write_text(__import__("json").dumps(ingest))
    pages = wp.pages(wp.load(tmp_path), root=tmp_path)
    perf = pages[tmp_path / "docs" / "performance.md"]
    assert "old" not in perf and perf.endswith("<!-- performance:end -->\ntail\n")
    assert "| 4.00 s, 125 MB/s" in perf
    assert "commwall 12.5× faster" in pages[tmp_path / "README.md"]
