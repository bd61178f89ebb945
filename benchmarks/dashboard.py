"""The dashboard in headless Chromium: page-switch times and what-if slider response.

A store is built with the real sets in the repository (the 8-rank DLRM traces, the two 4-rank
gloo runs, a 2-GPU Nsight Systems export, HTA's 53.7 MB V100 trace) and a generated 64-rank run
(tests/synthetic_traces.py: 8 hosts x 8 ranks, 8 steps x 12 collectives, rank 13 a straggler).
`commwall serve` serves it; Chromium (Debian's /usr/bin/chromium through Playwright) opens every
page of every run twice: the first visit computes the run's report, the second is a page switch
as a user makes it (click in the sidebar until the script is done and every chart is drawn).
Then every what-if slider of the Model page is moved one notch on each run that has a model:
response = key press until the page has re-run and redrawn. Printed: p50/p90/max per kind,
per-page rows, and any request to a host other than the app's own; and, since wall times on
a shared machine grow with its load, the CPU seconds each page switch and slider move cost
the server and all processes started here (server, Chromium; psutil, installed with Dask).

    python benchmarks/dashboard.py [--runs dlrm,synthetic-64] [--screenshots DIR] [--json FILE]

`synthetic-N` for another N (a multiple of 8, e.g. synthetic-1024) is the scale benchmarks' run
(benchmarks/stragglers.py: N ranks x 2,000 collectives over 10 steps, a compute straggler, host
clock offsets), stored directly as ingest's rows instead of written as N trace files.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package
sys.path.append(str(ROOT / "tests"))

from dashboard_support import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    Requests,
    Server,
    ingest_dir,
    move_sliders,
    open_page,
    pick_run,
    screenshot,
    settle,
)
from synthetic_traces import Scenario, insert_run, simulate, write_kineto  # noqa: E402

from benchmarks.stragglers import scenario  # noqa: E402
from commwall.dashboard import nav  # noqa: E402
from commwall.ingest import store  # noqa: E402

SAMPLES = ROOT / "sample_traces"
DATA = ROOT / "tests" / "data"
#: run name → folder of its files (the synthetic run is generated).
REAL = {
    "dlrm": SAMPLES / "dlrm_8rank",
    "gloo compute": SAMPLES / "gloo_4rank_compute",
    "gloo sleep": SAMPLES / "gloo_4rank_sleep",
    "nsys 2-gpu": DATA / "nsys" / "nsys_ai_2gpu" / "h100_2gpu_1s.sqlite.gz",
    "hta v100": DATA / "kineto" / "hta_df_index_resolver_rank1of2",
}
SYNTHETIC = "synthetic-64"
VIEWPORT = {"width": 1280, "height": 800}
#: Pages visited per run (Upload is not about a run; Compare and Export are visited once).
PAGES = [k for k in nav.PAGES if k != "upload"]


def build_store(folder: Path, runs: list[str]) -> Path:
    """A store holding `runs` (names of REAL, and/or SYNTHETIC)."""
    db_file = folder / "store.duckdb"
    for run in runs:
        if run == SYNTHETIC:
            sim = simulate(
                Scenario(hosts=8, ranks_per_host=8, steps=8, collectives_per_step=12, straggler=13)
            )
            write_kineto(sim, folder / "synthetic")
            ingest_dir(db_file, run, folder / "synthetic")
        elif run.startswith("synthetic-"):
            con = store.connect(db_file)
            insert_run(con, run, simulate(scenario(int(run.removeprefix("synthetic-")), 2000)))
            con.close()
        else:
            ingest_dir(db_file, run, REAL[run])
    return db_file


def percentiles(xs: list[float]) -> dict[str, float]:
    """p50, p90 and max of `xs` in seconds (rounded to ms)."""
    if not xs:
        return {}
    q = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) > 1 else [xs[0]] * 9
    return {"n": len(xs), "p50": round(q[4], 3), "p90": round(q[8], 3), "max": round(max(xs), 3)}


class Cpu:
    """CPU seconds (user + system) used so far by the server and by every process this
    benchmark started (the server, Chromium, Playwright's driver). Unlike wall times they do
    not grow with the machine's load: a page switch's CPU is what it costs, however long other
    work makes it wait for a core."""

    def __init__(self, server_pid: int) -> None:
        self.server = psutil.Process(server_pid)

    @staticmethod
    def _of(p: psutil.Process) -> float:
        try:
            t = p.cpu_times()
        except psutil.Error:  # gone: its CPU is no longer counted anywhere
            return 0.0
        return t.user + t.system

    def now(self) -> tuple[float, float]:
        """(server, all started processes) CPU seconds so far."""
        procs = psutil.Process().children(recursive=True)
        return self._of(self.server), sum(self._of(p) for p in procs)


def tour(url: str, runs: list[str], shots: Path | None, cpu: Cpu) -> dict:
    """Every page of every run, twice, and the sliders; the measurements."""
    from playwright.sync_api import sync_playwright

    first: list[dict] = []
    switch: list[dict] = []
    sliders: list[dict] = []
    slider_cpu: list[dict] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=VIEWPORT)
        requests = Requests(context)
        page = context.new_page()
        page.goto(url)
        settle(page)
        for run in runs:
            pick_run(page, run)
            for rows in (first, switch):
                for key in PAGES:
                    print(f"  {run} / {key}", file=sys.stderr, flush=True)
                    before = cpu.now()
                    s = open_page(page, nav.PAGES[key][1], timeout=300_000)
                    server, total = (b - a for a, b in zip(before, cpu.now(), strict=True))
                    rows.append(
                        {
                            "run": run,
                            "page": key,
                            "s": round(s, 3),
                            "server_cpu_s": round(server, 3),
                            "cpu_s": round(total, 3),
                        }
                    )
                    if shots and rows is switch:
                        slug = run.replace(" ", "_")
                        screenshot(page, shots / f"{slug}__{key}.png")
            open_page(page, nav.PAGES["model"][1])
            before = cpu.now()
            moves = move_sliders(page)
            server, total = (b - a for a, b in zip(before, cpu.now(), strict=True))
            sliders += [{"run": run, "s": round(s, 3)} for s in moves]
            if moves:  # CPU per move: the mean over the run's moves
                n = len(moves)
                slider_cpu.append({"run": run, "server_cpu_s": server / n, "cpu_s": total / n})
        open_page(page, nav.PAGES["upload"][1])
        browser.close()
    return {
        "first_visit_s": percentiles([r["s"] for r in first]),
        "page_switch_s": percentiles([r["s"] for r in switch]),
        "slider_response_s": percentiles([r["s"] for r in sliders]),
        "page_switch_cpu_s": percentiles([r["cpu_s"] for r in switch]),
        "page_switch_server_cpu_s": percentiles([r["server_cpu_s"] for r in switch]),
        "slider_cpu_s_per_move": slider_cpu,
        "foreign_requests": requests.foreign(url),
        "pages": switch,
        "first_visits": first,
        "slider_moves": sliders,
    }


def main() -> None:
    """Build the store, serve it, tour it, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=",".join([*REAL, SYNTHETIC]), help="comma-separated")
    ap.add_argument("--screenshots", type=Path, help="full-page PNG per run and page")
    ap.add_argument("--json", type=Path, help="write the measurements here too")
    args = ap.parse_args()
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        db_file = build_store(Path(tmp), runs)
        print(f"store built in {time.perf_counter() - t:.1f} s: {', '.join(runs)}")
        server = Server(db_file, Path(tmp) / "server.log")
        try:
            result = tour(server.url, runs, args.screenshots, Cpu(server.proc.pid))
        finally:
            server.stop()
    for r in result["pages"]:
        print(
            f"  {r['run']:<16} {r['page']:<12} {r['s']:.3f} s  CPU {r['cpu_s']:.3f} s "
            f"(server {r['server_cpu_s']:.3f} s)"
        )
    for kind in (
        "first_visit_s",
        "page_switch_s",
        "slider_response_s",
        "page_switch_cpu_s",
        "page_switch_server_cpu_s",
    ):
        print(f"{kind:<25} {json.dumps(result[kind])}")
    for r in result["slider_cpu_s_per_move"]:
        print(
            f"slider move CPU, {r['run']:<16} {r['cpu_s']:.3f} s (server {r['server_cpu_s']:.3f} s)"
        )
    print(f"requests to other hosts: {len(result['foreign_requests'])}")
    # the figures are wall times of a browser and a server sharing this machine's cores
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} cores, load average {load} (1, 5, 15 min) at the end")
    for u in result["foreign_requests"]:
        print(f"  {u}")
    if args.json:
        result["machine"] = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "load_average_1min": round(os.getloadavg()[0], 2),
            "runs": runs,
        }
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
