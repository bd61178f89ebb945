"""Write the performance table of docs/performance.md and its headline row in README.md from the
benchmarks' own JSON results.

Each benchmark given `--json OUT` writes what it measured and the machine it ran on; the files
are kept in benchmarks/results/ under the benchmark's name:

    ingest.json        benchmarks/ingest.py --scales 1 10 --ranks 0 --json ...
    report_scale.json  benchmarks/report_scale.py --ranks 8 64 256 --json ...
    ingest_e2e.json    benchmarks/ingest_e2e.py --json ...
    dashboard.json     benchmarks/dashboard.py --json ...

A missing file leaves its row out. The text between the marker comments
`<!-- performance:begin -->` and `<!-- performance:end -->` (docs/performance.md) and
`<!-- performance-headline:begin -->` and `<!-- performance-headline:end -->` (README.md) is
replaced; everything else is left as it is. Usage:

    python benchmarks/write_performance.py [--results DIR] [--check]

--check changes nothing and exits 1 when a page is not what the results give.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TABLE = ("<!-- performance:begin -->", "<!-- performance:end -->")
HEADLINE = ("<!-- performance-headline:begin -->", "<!-- performance-headline:end -->")
#: The goals the project set itself where no peer tool does the same work.
REPORT_GOAL_S = {256: 1.0, 1024: 5.0}
DASHBOARD_GOAL_S = 1.0
E2E_GOAL_S = 30.0


def load(results: Path) -> dict[str, dict]:
    """Every benchmark's result file in `results`, by benchmark name."""
    out = {}
    for path in sorted(results.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict):
            out[path.stem] = doc
    return out


def machine(doc: dict) -> str:
    """Where and when a result was measured, in a few words."""
    m = doc.get("machine") or {}
    words = [m.get("date", "date unknown")]
    if m.get("cpus"):
        words.append(f"{m['cpus']} CPUs")
    if m.get("memory_gib"):
        words.append(f"{m['memory_gib']:.0f} GiB")
    if m.get("load_average_1min") is not None:
        words.append(f"load {m['load_average_1min']:.1f}")
    return ", ".join(words)


def n(x: float, digits: int = 2) -> str:
    """A figure with `digits` decimals and thousands separators."""
    return f"{x:,.{digits}f}"


def ingest_row(doc: dict) -> list[str] | None:
    """The largest case both tools ingested: commwall against HTA."""
    rows = doc.get("rows") or []
    by = {(r["tool"], r["case"]): r for r in rows}
    cases = [r for r in rows if r["tool"] == "commwall" and (r["tool"], r["case"]) in by]
    both = [r for r in cases if any(t != "commwall" and c == r["case"] for t, c in by)]
    if not both:
        return None
    ours = max(both, key=lambda r: r["mb"])
    peer = next(r for r in rows if r["tool"] != "commwall" and r["case"] == ours["case"])
    return [
        f"Kineto ingest of a {n(ours['mb'], 0)} MB trace (`benchmarks/ingest.py`)",
        f"{n(ours['wall_s'])} s, {n(ours['mb'] / ours['wall_s'], 0)} MB/s, peak "
        f"{n(ours['peak_mb'], 0)} MB ({n(ours['peak_mb'] / ours['mb'])}× the file)",
        f"{peer['tool']}: {n(peer['wall_s'])} s, peak {n(peer['peak_mb'], 0)} MB; commwall "
        f"{n(peer['wall_s'] / ours['wall_s'], 1)}× faster",
        machine(doc),
    ]


def report_rows(doc: dict) -> list[list[str]]:
    """One row per scale of the report benchmark."""
    out = []
    rows = doc.get("rows") or []
    largest = max((r["ranks"] for r in rows), default=None)
    for r in rows:
        goal = REPORT_GOAL_S.get(r["ranks"])
        if goal is None and r["ranks"] != largest:
            continue  # the scales with a goal, and the largest measured
        article = "an" if f"{r['ranks']:,}".startswith(("8", "11", "18")) else "a"
        goal_text = f"goal {n(goal, 0)} s" if goal else "no goal at this scale"
        out.append(
            [
                f"report of {article} {r['ranks']:,}-rank run, {r['calls']:,} collective calls "
                "(`benchmarks/report_scale.py`)",
                f"first {n(r['first_s'])} s (peak {n(r['first_peak_mib'], 0)} MiB); later "
                f"{n(r['kept_s'])} s (kept report), {n(r['tables_only_s'])} s (kept tables)",
                goal_text,
                machine(doc),
            ]
        )
    return out


def e2e_row(doc: dict) -> list[str] | None:
    """Ingest to printed diagnosis, embedded."""
    total = next(
        (r for r in doc.get("rows") or [] if r["way"] == "embedded" and r["step"] == "total"),
        None,
    )
    if total is None:
        return None
    same = doc.get("reports_identical")
    dask = " (Dask's report identical)" if same else ""
    return [
        f"{doc['ranks']} ranks × {n(doc['mb'] / doc['ranks'], 1)} MB, `commwall ingest` to the "
        "printed diagnosis (`benchmarks/ingest_e2e.py`)",
        f"{n(total['wall_s'], 1)} s, peak {n(total['peak_mb'], 0)} MB{dask}",
        f"goal {n(E2E_GOAL_S, 0)} s",
        machine(doc),
    ]


def dashboard_row(doc: dict) -> list[str] | None:
    """Page switches of the dashboard tour."""
    switch = doc.get("page_switch_s") or {}
    if "p90" not in switch:
        return None
    runs = ", ".join((doc.get("machine") or {}).get("runs") or []) or "the bundled runs"
    return [
        f"dashboard page switch, {runs} (`benchmarks/dashboard.py`)",
        f"p50 {n(switch.get('p50', float('nan')))} s, p90 {n(switch['p90'])} s",
        f"goal {n(DASHBOARD_GOAL_S, 0)} s",
        machine(doc),
    ]


def table(results: dict[str, dict]) -> list[list[str]]:
    """The rows of the performance table, headline first."""
    rows: list[list[str] | None] = []
    if "ingest" in results:
        rows.append(ingest_row(results["ingest"]))
    if "report_scale" in results:
        rows += report_rows(results["report_scale"])
    if "ingest_e2e" in results:
        rows.append(e2e_row(results["ingest_e2e"]))
    if "dashboard" in results:
        rows.append(dashboard_row(results["dashboard"]))
    return [r for r in rows if r]


def markdown(rows: list[list[str]]) -> str:
    """A Markdown table of the rows."""
    head = "| measured | commwall | peer or goal | measured on |\n|---|---|---|---|\n"
    return head + "".join("| " + " | ".join(r) + " |\n" for r in rows)


def replace_between(text: str, markers: tuple[str, str], body: str, name: str) -> str:
    """`text` with what lies between the two markers replaced by `body`."""
    begin, end = markers
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise SystemExit(f"{name}: expected one {begin} before one {end}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{body}{end}{tail}"


def pages(results: dict[str, dict], root: Path = ROOT) -> dict[Path, str]:
    """The new text of docs/performance.md and README.md."""
    rows = table(results)
    if not rows:
        raise SystemExit("no benchmark results to write a table from")
    out = {}
    perf = root / "docs" / "performance.md"
    out[perf] = replace_between(
        perf.read_text(encoding="utf-8"), TABLE, markdown(rows), "docs/performance.md"
    )
    readme = root / "README.md"
    out[readme] = replace_between(
        readme.read_text(encoding="utf-8"), HEADLINE, markdown(rows[:1]), "README.md"
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, default=RESULTS, help="directory of result JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 if a page is out of date")
    args = ap.parse_args()
    stale = []
    for path, text in pages(load(args.results)).items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(map(str, stale))}", file=sys.stderr)
        sys.exit(1)
    if not args.check:
        print("written: " + (", ".join(map(str, stale)) or "nothing (up to date)"))


if __name__ == "__main__":
    main()
