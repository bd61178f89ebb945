"""Every citation of a design note (`MODEL.md §4`, `NCCL_LOG.md §3–12`, `KINETO.md`) in code,
SQL, tests and docs names a note in docs/design/ and a section that note has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

DESIGN = ROOT / "docs" / "design"
SCANNED = ("analysis", "ingest", "dashboard", "tests", "docs", "benchmarks", "sample_traces")
SUFFIXES = {".py", ".sql", ".md", ".toml", ".txt", ".sh"}
#: Upper-case Markdown names that are ordinary repository files, not design notes.
NOT_NOTES = {"README", "LICENSE", "NOTICE", "CHANGELOG", "CONTRIBUTING", "SECURITY"}
NUM = r"\d+(?:\.\d+)?"
CITATION = re.compile(rf"\b([A-Z][A-Z0-9_]*)\.md\b(?:\s*§\s*({NUM})(?:\s*[–-]\s*({NUM}))?)?")
HEADING = re.compile(rf"^#{{2,4}}\s+({NUM})\.?\s", re.MULTILINE)


def sections(note: Path) -> set[str]:
    """Section numbers of a note: headings that start with `N.` or `N.M`."""
    return set(HEADING.findall(note.read_text(encoding="utf-8")))


def citations(text: str) -> list[tuple[str, list[str]]]:
    """(note name, cited section numbers) of every design-note citation in `text`."""
    out = []
    for m in CITATION.finditer(text):
        name, first, last = m.groups()
        if name not in NOT_NOTES:
            out.append((name, [s for s in (first, last) if s]))
    return out


def unresolved(text: str, design: Path = DESIGN) -> list[str]:
    """The citations in `text` that name no note in `design`, or a section the note lacks."""
    bad = []
    for name, cited in citations(text):
        note = design / f"{name}.md"
        if not note.is_file():
            bad.append(f"{name}.md (no such note)")
            continue
        have = sections(note)
        bad += [f"{name}.md §{s}" for s in cited if s not in have]
    return bad


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in SCANNED:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    here = Path(__file__).resolve()  # its examples cite sections that do not exist on purpose
    return [p for p in files if "test-artifacts" not in p.parts and p.resolve() != here]


def test_every_design_citation_resolves():
    bad = {}
    for path in scanned_files():
        found = unresolved(path.read_text(encoding="utf-8", errors="replace"))
        if found:
            bad[str(path.relative_to(ROOT))] = found
    assert bad == {}


def test_the_notes_the_code_cites_are_in_the_repository():
    cited = {name for p in scanned_files() for name, _ in citations(p.read_text(errors="replace"))}
    assert {"KINETO", "NCCL_LOG", "STRAGGLERS", "MODEL"} <= cited  # the check is not vacuous
    assert all((DESIGN / f"{n}.md").is_file() for n in cited)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see MODEL.md §4 for S", []),
        ("NCCL_LOG.md §3–12 and KINETO.md §9.", []),
        ("MODEL.md §6.4: the mapping", []),
        ("MODEL.md §42", ["MODEL.md §42"]),
        ("MODEL.md §6.9", ["MODEL.md §6.9"]),
        ("NCCL_LOG.md §3–99", ["NCCL_LOG.md §99"]),
        ("as FORMATS.md says", ["FORMATS.md (no such note)"]),
        ("tests/data/README.md and LICENSE.md", []),
    ],
)
def test_the_checker_finds_what_does_not_resolve(text, expected):
    assert unresolved(text) == expected


def test_sections_are_read_from_headings(tmp_path):
    (tmp_path / "X.md").write_text("# X\n\n## 1. One\n\ntext 2. not a heading\n\n### 1.2 Sub\n")
    assert sections(tmp_path / "X.md") == {"1", "1.2"}
    assert unresolved("X.md §1, X.md §1.2, X.md §2", tmp_path) == ["X.md §2"]
