"""Helpers shared by the test_dashboard_* files: stores, reports, uploads, the browser."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb

from commwall.analysis import db
from commwall.analysis.report.build import build_report, steps_section
from commwall.dashboard.ui import fmt_ms, fmt_ratio
from commwall.ingest import discover, store

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def ingest_dir(db_path: Path, run: str, folder: Path) -> None:
    """Ingest every file of `folder` as run `run` (the CLI path, not the upload path)."""
    con = store.connect(db_path)
    try:
        store.ingest(con, run, discover.expand([str(folder)]))
    finally:
        con.close()


def report_of(db_path: Path, run: str) -> dict:
    """The report of `run`, from a connection closed again before returning (the dashboard
    opens the same file read-write in this process)."""
    con = db.load_modules(duckdb.connect(str(db_path)))
    try:
        return build_report(con, run)
    finally:
        con.close()


def steps_of(db_path: Path, run: str) -> list[dict]:
    """The `steps` section of `run` alone (cheaper than the whole report)."""
    con = db.load_modules(duckdb.connect(str(db_path)))
    try:
        return steps_section(con, db.run_id(con, run))
    finally:
        con.close()


def upload_files(folder: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of every trace in `folder`, as a browser would upload them."""
    return [(p.name, p.read_bytes()) for p in discover.expand([str(folder)])]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def overview_metrics(s: dict) -> dict[str, str]:
    """The overview's metric tiles as the page must show them, from the report's summary."""
    return {
        "Step time": fmt_ms(s["step_ms"]),
        "τ_comp": fmt_ms(s["tau_comp_ms"]),
        "τ_comm": fmt_ms(s["tau_comm_ms"]),
        "Exposed comm": fmt_ms(s["exposed_comm_ms"]),
        "Overlap η": fmt_ratio(s["eta"]),
        "γ": fmt_ratio(s["gamma"]),
        "Idle": fmt_ms(s["idle_ms"]),
    }


# --- the browser side: a served store, page visits, what the page fetched and drew ----------


def commwall_cmd() -> list[str]:
    """How to start the `commwall` CLI of this environment."""
    exe = Path(sys.executable).with_name("commwall")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "commwall"]


class Server:
    """`commwall serve` on a free port, stopped by its own pid (serve execs Streamlit)."""

    def __init__(self, db_file: Path, log: Path) -> None:
        self.db, self.port = db_file, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [*commwall_cmd(), "serve", "--db", str(db_file), "--port", str(self.port)]
        self.log = open(log, "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2).status == 200:
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"commwall serve did not come up; see {log}")

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


#: True once the script run has been over, and every chart drawn, for 300 ms in a row: a rerun
#: that starts just after a click (the page already shown, say) must not pass for settled.
SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const ok = app && app.dataset.testScriptState === 'notRunning'
    && [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
         .every(c => c.querySelector('canvas, svg'));
  const now = performance.now();
  if (!ok) { window.__settledSince = null; return false; }
  if (window.__settledSince == null) window.__settledSince = now;
  return now - window.__settledSince >= 300;
}"""
#: How often (ms) SETTLED_JS is evaluated: the start of the quiet time is known to this.
POLL_MS = 20

#: True when every chart's drawing is more than 20 px tall.
DRAWN_JS = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
  .every(c => { const d = c.querySelector('canvas, svg');
                return d && d.getBoundingClientRect().height > 20; })"""


def settle(page, timeout: float = 60_000) -> float:
    """Wait until the script run is over and every chart has drawn, and has stayed so; returns
    when (the browser's performance.now(), ms) that quiet state began."""
    page.wait_for_selector(
        '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout
    )
    page.evaluate("() => { window.__settledSince = null; }")
    page.wait_for_function(SETTLED_JS, timeout=timeout, polling=POLL_MS)
    return page.evaluate("() => window.__settledSince")


def browser_now(page) -> float:
    """The browser's performance.now() (ms): the clock `settle` tells the time by."""
    return page.evaluate("() => performance.now()")


def open_page(page, title: str, timeout: float = 60_000) -> float:
    """Click the page titled `title` in the sidebar and wait for it (up to `timeout` ms);
    returns the seconds from the click until the page was done and drawn (the start of the
    quiet time `settle` waits out, not its end)."""
    t = browser_now(page)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=title).click()
    # The page's own header ("Hang — run"), not any heading that happens to contain the
    # word: the previous page's stale elements stay on screen until the new run replaces them.
    heading = re.compile(r"^\s*" + re.escape(title.split()[0]) + r"\b")
    page.get_by_test_id("stHeading").filter(has_text=heading).first.wait_for(timeout=timeout)
    return (settle(page, timeout) - t) / 1e3


class Requests:
    """Every URL a browser context asks for, from the moment it is attached."""

    def __init__(self, context) -> None:
        self.urls: list[str] = []
        context.on("request", lambda r: self.urls.append(r.url))

    def foreign(self, own: str) -> list[str]:
        """Requests to any host other than `own` (scheme://host:port); data: and blob: URLs
        are local."""
        local = ("data:", "blob:", "about:")
        return [u for u in self.urls if not u.startswith(own) and not u.startswith(local)]


#: Per drawn chart: its drawing's box, the box of its Streamlit element, and the legend
#: labels Vega cut short (Vega draws a cut label as its text plus an ellipsis).
CHART_GEOMETRY_JS = """() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  const m = main.getBoundingClientRect();
  const pad = parseFloat(getComputedStyle(main).paddingRight) || 0;
  return [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].map(el => {
    const d = el.querySelector('canvas, svg');
    const b = d ? d.getBoundingClientRect() : null;
    const e = el.getBoundingClientRect();
    return {
      content_right: m.right - pad,
      element_right: e.right,
      element_width: e.width,
      drawn_right: b ? b.right : null,
      drawn_width: b ? b.width : null,
      drawn_height: b ? b.height : null,
      title: el.getAttribute('aria-label') || '',
    };
  });
}"""


def chart_geometry(page) -> list[dict]:
    """CHART_GEOMETRY_JS evaluated on `page`."""
    return page.evaluate(CHART_GEOMETRY_JS)


def screenshot(page, path: Path) -> None:
    """The whole page as PNG: Streamlit scrolls its main area inside the window, so the window
    is made as tall as that area for the shot (and restored after)."""
    size = page.viewport_size
    tall = page.evaluate(
        """() => { const m = document.querySelector('[data-testid="stMain"]');
                   return m ? m.scrollHeight : document.body.scrollHeight; }"""
    )
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], int(tall))})
    settle(page)
    page.screenshot(path=str(path))
    page.set_viewport_size(size)


def pick_run(page, run: str) -> None:
    """Choose `run` in the sidebar's run picker and wait for the page to redraw."""
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").click()
    page.get_by_role("option", name=run, exact=True).click()
    settle(page)


def move_sliders(page) -> list[float]:
    """Move every slider of the page one notch right, then back; seconds per move, from the key
    press until the page was re-run and drawn (as `open_page` counts). A notch too small to
    change any figure at three significant figures counts until the page is idle again after
    CHANGE_WAIT_MS."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    out = []
    sliders = page.get_by_test_id("stSlider")
    for i in range(sliders.count()):
        for key in ("ArrowRight", "ArrowLeft"):
            thumb = sliders.nth(i).get_by_role("slider").first
            before = page.get_by_test_id("stMetricValue").all_inner_texts()
            thumb.focus()
            t = browser_now(page)
            thumb.press(key)
            try:
                page.wait_for_function(
                    """before => {
                      const now = [...document.querySelectorAll('[data-testid="stMetricValue"]')]
                        .map(e => e.innerText);
                      const app = document.querySelector('[data-testid="stApp"]');
                      return app.dataset.testScriptState === 'notRunning'
                        && JSON.stringify(now) !== JSON.stringify(before);
                    }""",
                    arg=before,
                    timeout=CHANGE_WAIT_MS,
                    polling="raf",
                )
            except PlaywrightTimeout:
                pass  # no figure changed at the shown precision: wait for the page to settle
            out.append((settle(page) - t) / 1e3)
    return out


#: How long a slider move may take to change a figure on the page.
CHANGE_WAIT_MS = 8_000


def assert_charts_fit(page, where: str) -> None:
    """Every chart on `page` is drawn, inside its element and inside the content area (nothing
    cut off: legends and axes included)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:  # Vega draws after the element appears; the geometry below says what is wrong
        page.wait_for_function(DRAWN_JS, timeout=30_000, polling=100)
    except PlaywrightTimeout:
        pass
    for g in chart_geometry(page):
        assert g["drawn_height"] and g["drawn_height"] > 20, (where, g)
        assert g["drawn_width"] <= g["element_width"] + 1, (where, g)
        assert g["drawn_right"] <= g["content_right"] + 1, (where, g)
