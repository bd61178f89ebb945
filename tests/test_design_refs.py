"""Every citation of a documentation section (`cost_model.md §4`, `nccl_logs.md §3–12`) in code,
SQL, tests and docs names a page of docs/ and a numbered section that page has; every
`docs/<page>.md` named anywhere exists, and every link to a page's anchor (`report.md#limits`)
finds a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

DOCS = ROOT / "docs"
SCANNED = ("analysis", "ingest", "dashboard", "cli", "tests", "docs", "benchmarks", "sample_traces")
SUFFIXES = {".py", ".sql", ".md", ".toml", ".txt", ".sh"}
#: Upper-case Markdown names that are ordinary repository files, not documentation pages.
NOT_PAGES = {"README", "LICENSE", "NOTICE", "CHANGELOG", "CONTRIBUTING", "SECURITY"}
NUM = r"\d+(?:\.\d+)?"
CITATION = re.compile(rf"\b([A-Za-z][A-Za-z0-9_]*)\.md\s*§\s*({NUM})(?:\s*[–-]\s*({NUM}))?")
#: An upper-case page name: the old design notes (KINETO.md, MODEL.md) were cited so.
UPPER = re.compile(r"\b([A-Z][A-Z0-9_]*)\.md\b")
DOC_PATH = re.compile(r"\bdocs/([a-z][a-z0-9_]*)\.md\b")
ANCHOR = re.compile(r"\]\(([a-z][a-z0-9_]*\.md)#([^)\s]+)\)")
HEADING = re.compile(rf"^#{{2,4}}\s+({NUM})\.?\s", re.MULTILINE)


def sections(page: Path) -> set[str]:
    """Section numbers of a page: headings that start with `N.` or `N.M`."""
    return set(HEADING.findall(page.read_text(encoding="utf-8")))


def unresolved(text: str, docs: Path = DOCS) -> list[str]:
    """The citations in `text` that name no page in `docs`, or a section the page lacks."""
    bad = []
    for m in CITATION.finditer(text):
        name, first, last = m.groups()
        page = docs / f"{name}.md"
        if not page.is_file():
            bad.append(f"{name}.md (no such page)")
            continue
        have = sections(page)
        bad += [f"{name}.md §{s}" for s in (first, last) if s and s not in have]
    for m in UPPER.finditer(text):
        if m.group(1) not in NOT_PAGES and not (docs / f"{m.group(1)}.md").is_file():
            bad.append(f"{m.group(1)}.md (no such page)")
    return bad


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in SCANNED:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    here = Path(__file__).resolve()  # its examples cite sections that do not exist on purpose
    return [p for p in files if "test-artifacts" not in p.parts and p.resolve() != here]


def test_every_section_citation_resolves():
    bad = {}
    for path in scanned_files():
        found = unresolved(path.read_text(encoding="utf-8", errors="replace"))
        if found:
            bad[str(path.relative_to(ROOT))] = found
    assert bad == {}


def test_the_pages_the_code_cites_are_cited():
    cited = set()
    for p in scanned_files():
        cited |= {m.group(1) for m in CITATION.finditer(p.read_text(errors="replace"))}
    assert {"stragglers", "nccl_logs", "cost_model"} <= cited  # the check is not vacuous


def test_every_docs_path_named_exists():
    bad = {}
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        missing = sorted(
            {m[1] for m in DOC_PATH.finditer(text) if not (DOCS / f"{m[1]}.md").is_file()}
        )
        if missing:
            bad[str(path.relative_to(ROOT))] = missing
    assert bad == {}
    assert not (DOCS / "design").exists()  # the design notes are folded into the pages


def test_every_anchor_link_finds_a_heading():
    bad = []
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for m in ANCHOR.finditer(path.read_text(encoding="utf-8")):
            target = (path.parent / m[1]) if path.parent == DOCS else DOCS / m[1]
            if not target.is_file():
                bad.append(f"{path.name}: {m[1]} (no such page)")
                continue
            heads = re.findall(r"^#{1,6}\s+(.+)$", target.read_text(encoding="utf-8"), re.M)
            if m[2] not in {slug(h) for h in heads}:
                bad.append(f"{path.name}: {m[1]}#{m[2]}")
    assert bad == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see cost_model.md §4 for S", []),
        ("nccl_logs.md §3–12 and stragglers.md §7.", []),
        ("cost_model.md §6.4: the mapping", []),
        ("cost_model.md §42", ["cost_model.md §42"]),
        ("cost_model.md §6.9", ["cost_model.md §6.9"]),
        ("nccl_logs.md §3–99", ["nccl_logs.md §99"]),
        ("as formats.md §1 says", ["formats.md (no such page)"]),
        ("as MODEL.md says", ["MODEL.md (no such page)"]),
        ("tests/data/README.md and LICENSE.md", []),
    ],
)
def test_the_checker_finds_what_does_not_resolve(text, expected):
    assert unresolved(text) == expected


def test_sections_are_read_from_headings(tmp_path):
    (tmp_path / "x.md").write_text("# X\n\n## 1. One\n\ntext 2. not a heading\n\n### 1.2 Sub\n")
    assert sections(tmp_path / "x.md") == {"1", "1.2"}
    assert unresolved("x.md §1, x.md §1.2, x.md §2", tmp_path) == ["x.md §2"]


def test_slugs_are_githubs():
    assert slug("The memory bound, measured") == "the-memory-bound-measured"
    assert slug("The store's lock") == "the-stores-lock"
    assert slug("Kept between commands") == "kept-between-commands"
