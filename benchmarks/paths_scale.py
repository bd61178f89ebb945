"""Every way to read a large run besides the full report: one section alone, a Timeline view of
chosen ranks, the post-mortem, a run's diff facts, and the text report's length.

The run is the scale benchmarks' (benchmarks/stragglers.py --build: 128 hosts x 8 ranks by
default, 2,000 collectives per rank, rank 437 a compute straggler), stored directly as rows.
In one process, each figure in wall seconds:

* a section computed on its own (`report.SECTIONS[key]`, no analysis session: every macro it
  reads redoes the matching and the clock fit) against `Run.section(key)` (in a session);
* a Timeline view of two ranks of the middle of the run: `timeline.tracks` and
  `timeline.collectives` called apart against `timeline.view` (one session of VIEW_TABLES);
* the post-mortem's data and its HTML document (size in bytes), a run's diff facts;
* the text report: its lines, and the rows its tables hold (what it printed before tables
  were cut at 40 rows).

Every figure is of computing: the run cache (analysis/report/run_cache.py) is turned off, or the
first full session would write the run's tables and every later one read them back. Usage:

    python benchmarks/paths_scale.py [--ranks 1024] [--collectives 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package
os.environ["COMMWALL_CACHE"] = "0"  # figures of computing, not of reading the run cache

from commwall.analysis.api import Store  # noqa: E402
from commwall.analysis.compare.diff import run_facts  # noqa: E402
from commwall.analysis.report.build import SECTIONS  # noqa: E402
from commwall.analysis.report.postmortem import postmortem_data  # noqa: E402
from commwall.analysis.steps import timeline  # noqa: E402
from commwall.cli.commands._output import fmt_table  # noqa: E402
from commwall.cli.text_report import render_text  # noqa: E402
from commwall.dashboard.export import postmortem  # noqa: E402


def timed(f: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--collectives", type=int, default=2000, help="per rank, over 10 steps")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        cmd = [sys.executable, str(ROOT / "benchmarks" / "stragglers.py"), "--build"]
        cmd += ["--db", str(db), "--ranks", str(args.ranks), "--collectives", str(args.collectives)]
        json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
        with Store(db) as s:
            name = s.runs()["run"].iloc[0]
            run = s.run(name)
            con, rid = run.con, run.id
            print(f"{args.ranks} ranks x {args.collectives} collectives (run {name})")
            print(f"{'what':38s} {'alone s':>8s} {'session s':>10s}")
            for key in ("replay", "stragglers", "collectives"):
                alone, _ = timed(lambda k=key: SECTIONS[k](con, rid))
                inside, _ = timed(lambda k=key: run.section(k))
                print(f"{'section ' + key:38s} {alone:8.2f} {inside:10.2f}")
            ranks = [args.ranks // 2, args.ranks // 2 + 1]
            step = timeline.default_view(run.report())
            assert step is not None, "the run has steps"
            alone, _ = timed(
                lambda: (
                    timeline.tracks(con, rid, step[0], ranks),
                    timeline.collectives(con, rid, step[0], ranks),
                )
            )
            inside, _ = timed(lambda: timeline.view(con, rid, step[0], ranks))
            print(f"{f'timeline view of ranks {ranks}':38s} {alone:8.2f} {inside:10.2f}")
            spent, _ = timed(lambda: postmortem_data(con, name))
            print(f"{'post-mortem data':38s} {spent:8.2f}")
            spent, page = timed(lambda: postmortem(con, name))
            print(f"{'post-mortem HTML':38s} {spent:8.2f}  ({len(page.encode()):,} bytes)")
            spent, _ = timed(lambda: run_facts(con, name))
            print(f"{'diff facts of the run':38s} {spent:8.2f}")
            rep = run.report()
            text = render_text(rep, fmt_table)
            rows = sum(len(rep[k]) for k in ("ranks", "steps"))
            rows += len(rep["decomposition"]["ranks"]) + len(rep["stragglers"]["ranks"])
            print(f"text report: {len(text.splitlines()):,} lines; its tables hold {rows:,} rows")


if __name__ == "__main__":
    main()
