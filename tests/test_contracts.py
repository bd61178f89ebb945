"""The layering, checked on the source with `ast`: addrspace (what an address-space limit
allows, which every layer's store connection asks) knows nothing of the others; ingest knows
nothing of analysis, the dashboard or the CLI; analysis reads only the database (no ingest, no dashboard, no CLI); the
dashboard does not import the CLI (the CLI starts the dashboard, not the reverse); the dashboard's
pages hold no SQL and open no database connection of their own. Imports inside functions and
`importlib.import_module("…")` with a literal name count like top-level imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

#: package → top-level packages of this project it must never import.
FORBIDDEN = {
    "addrspace": {"ingest", "analysis", "dashboard", "cli"},
    "ingest": {"analysis", "dashboard", "cli"},
    "analysis": {"ingest", "dashboard", "cli"},
    "dashboard": {"cli"},
}
PAGES = ROOT / "dashboard" / "views"
#: A string that reads as SQL: a statement keyword followed later by a clause keyword.
SQL = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|WITH)\b.*\b(FROM|INTO|SET|TABLE|MACRO|AS)\b", re.S
)
#: Calls that reach the database directly.
DB_CALLS = {"execute", "sql", "query", "connect", "fetchall", "fetchone", "fetchdf"}
#: Functions that read a run from the store, which the front ends (dashboard/, cli/) call only
#: through the facade analysis.api (Store, Run); `macro_rows` reached SQL macros by name.
FACADE_ONLY = {
    "build_report", "open_db", "run_id", "merged_trace", "postmortem_data", "run_facts",
    "run_scenario", "run_whatif", "macro_rows",
}  # fmt: skip


#: The project's layers as its modules name them (commwall.<layer>...).
LAYERS = {"addrspace", "ingest", "analysis", "dashboard", "cli"}


def modules(package: str) -> list[Path]:
    if package == "addrspace":
        return [ROOT / "commwall" / "addrspace.py"]
    return sorted((ROOT / package).rglob("*.py"))


def layer(name: str) -> str | None:
    """The project layer a module name `name` belongs to (`commwall.analysis.db` -> analysis),
    or None for anything else."""
    parts = name.split(".")
    if parts[0] == "commwall" and len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return None


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module name) of every import in `tree`, relative imports excluded."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.lineno, node.args[0].value))
    return out


def violations(package: str, forbidden: set[str]) -> list[str]:
    bad = []
    for path in modules(package):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name in imported(tree):
            if layer(name) in forbidden:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_inside_its_layer(package):
    assert violations(package, FORBIDDEN[package]) == []


def test_every_import_of_the_project_goes_through_the_commwall_package():
    """A bare `import analysis` from a checkout would load a second copy of a module beside
    `commwall.analysis` (and fail once installed): every import names `commwall.`."""
    bare = []
    for folder in (*sorted(LAYERS - {"addrspace"}), "commwall", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if folder == "commwall" and path.parent != ROOT / "commwall":
                continue  # the links to the layers, checked there
            for line, name in imported(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if name.split(".")[0] in LAYERS:
                    bare.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert bare == []


def page_sql(path: Path) -> tuple[list[str], set[str]]:
    """(SQL-ish findings, store readers called other than through the facade) of a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found, bypass = [], set()
    bound = {  # names the module's imports bind (modules and functions alike)
        (a.asname or a.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for a in node.names
    }
    for line, name in imported(tree):
        if name.split(".")[0] == "duckdb":
            found.append(f"{path.name}:{line} imports duckdb")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL.search(node.value)
        ):
            found.append(f"{path.name}:{node.lineno} SQL text {node.value[:40]!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in DB_CALLS:
                found.append(f"{path.name}:{node.lineno} calls .{node.func.attr}()")
        if isinstance(node, ast.Call):
            # a function imported by name, or a module's function (`db.open_db`); a method of
            # the facade with the same name (`run.postmortem_data()`) is the facade
            f = node.func
            called = (
                f.id
                if isinstance(f, ast.Name)
                else f.attr
                if isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id in bound
                else None
            )
            if called in FACADE_ONLY:
                bypass.add(f"{path.name}:{node.lineno} calls {called}()")
    return found, bypass


def test_pages_hold_no_sql_and_no_connections():
    bad = [f for p in sorted(PAGES.glob("*.py")) for f in page_sql(p)[0]]
    assert bad == []


def test_front_ends_read_runs_through_the_facade():
    """dashboard/ and cli/ reach a run only through analysis.api (Store, Run)."""
    bypass = [b for pkg in ("dashboard", "cli") for p in modules(pkg) for b in page_sql(p)[1]]
    assert bypass == []


# -- the checks themselves find what they are for ---------------------------------------------


def test_imports_are_found_wherever_they_are(tmp_path):
    src = (
        "import os\n"
        "from commwall.analysis.db import open_db\n"
        "def f():\n"
        "    import commwall.dashboard.ui\n"
        "    return importlib.import_module('commwall.analysis.report')\n"
        "from . import sibling\n"
    )
    names = [n for _, n in imported(ast.parse(src))]
    assert sorted(names) == [
        "commwall.analysis.db", "commwall.analysis.report", "commwall.dashboard.ui", "os"
    ]  # fmt: skip
    assert [layer(n) for n in sorted(names)] == ["analysis", "analysis", "dashboard", None]


def test_a_page_with_sql_is_caught(tmp_path):
    page = tmp_path / "bad.py"
    page.write_text(
        "import duckdb\n"
        "rows = con.execute('SELECT rank FROM steps WHERE run_id = ?', [1]).df()\n"
        "from commwall.dashboard import data\n"
        "x = data.macro_rows(path, run, fp, 'rank_step_wait')\n"
        "r = build_report(con, 'run')\n"
        "title = 'Select a run from the list'\n"
    )
    found, bypass = page_sql(page)
    assert sorted(f.split(" ")[1] for f in found) == ["SQL", "calls", "imports"]
    assert sorted(b.split(" ")[-1] for b in bypass) == ["build_report()", "macro_rows()"]


# -- units: one definition, no bare conversion factors in the UI ------------------------------

UNIT_NAMES = {"NS_PER_US", "NS_PER_MS", "NS_PER_S"}
FACTORS = {1e3, 1e6, 1e9}


def unit_findings(path: Path, ui: bool) -> set[str]:
    """Unit constants `path` defines itself; on a page (`ui`) also divisions by a bare 1e3, 1e6
    or 1e9."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name) and t.id in UNIT_NAMES}
        if (
            ui
            and isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and node.right.value in FACTORS
        ):
            found.add(f"/ {float(node.right.value)}")
    return found


def test_units_are_defined_once_and_pages_use_them():
    found = {}
    for package in ("analysis", "ingest", "dashboard", "cli"):
        for path in modules(package):
            rel = str(path.relative_to(ROOT))
            page = path.parent == PAGES
            if rel != "analysis/units.py" and (f := unit_findings(path, page)):
                found[rel] = f
    assert found == {}
    assert unit_findings(ROOT / "analysis" / "units.py", ui=False) == UNIT_NAMES


def test_unit_check_sees_definitions_and_bare_factors(tmp_path):
    page = tmp_path / "p.py"
    page.write_text("NS_PER_MS = 1e6\nx = df['dur'] / 1e6\ny = n / 2\nz = n / NS_PER_MS\n")
    assert unit_findings(page, ui=True) == {"NS_PER_MS", "/ 1000000.0"}
    assert unit_findings(page, ui=False) == {"NS_PER_MS"}
