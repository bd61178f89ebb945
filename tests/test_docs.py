"""Docs are tests: every public SQL macro is documented, every store table is documented."""

from __future__ import annotations

import re

import pytest

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
