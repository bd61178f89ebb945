"""First and second visit of every dashboard page on one large generated run, through Streamlit's
AppTest (no browser: the server-side cost of each page alone).

The run is the scale benchmarks' (benchmarks/stragglers.py: N ranks x 2,000 collectives over 10
steps, a compute straggler, host clock offsets), stored directly as ingest's rows. The first page
computes the run's report and what the other pages need (`analysis.api.Run.prepared`); every
other page's first visit then shows what it still computes on its own. For page switches as a
user sees them (Chromium, drawing included) use benchmarks/dashboard.py. Usage:

    python benchmarks/dashboard_pages.py [--ranks 1024]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package
sys.path.append(str(ROOT / "tests"))

from synthetic_traces import insert_run, simulate  # noqa: E402

from benchmarks.stragglers import scenario  # noqa: E402
from commwall.dashboard import nav  # noqa: E402
from commwall.dashboard.database import DB_ENV, UPLOAD_ENV  # noqa: E402
from commwall.ingest import store  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=1024, help="ranks (a multiple of 8)")
    args = p.parse_args()
    from streamlit.testing.v1 import AppTest  # noqa: PLC0415 (after the path set-up)

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "pages.duckdb"
        run = f"synthetic-{args.ranks}"
        con = store.connect(db)
        insert_run(con, run, simulate(scenario(args.ranks, 2000)))
        con.close()
        os.environ[DB_ENV], os.environ[UPLOAD_ENV] = str(db), str(Path(tmp) / "uploads")
        at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=1800)
        at.session_state["run"] = run
        print(f"{run}, load average {os.getloadavg()[0]:.1f}; seconds wall / CPU")
        for visit in ("first", "second"):
            for key in [k for k in nav.PAGES if k != "upload"]:
                t, c = time.perf_counter(), time.process_time()
                at.switch_page(nav.path(key)).run()
                failed = " FAILED" if at.exception else ""
                print(f"  {visit:6s} {key:12s} {time.perf_counter() - t:7.2f} "
                      f"{time.process_time() - c:7.2f}{failed}")  # fmt: skip


if __name__ == "__main__":
    main()
