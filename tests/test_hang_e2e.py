"""The Hang page in headless Chromium on the real hung gloo run `fr_skip` (dumps and traces):
drawn without an exception, every chart inside the page, the verdict as `commwall hang` says
it. Screenshot to test-artifacts/dashboard/ (git-ignored)."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import ROOT, SAMPLES
from dashboard_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Server,
    assert_charts_fit,
    commwall_cmd,
    ingest_dir,
    open_page,
    settle,
)

from commwall.dashboard import nav

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium at /usr/bin/chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api")

ARTIFACTS = ROOT / "test-artifacts" / "dashboard"


def test_hang_page_in_the_browser(tmp_path):
    db = tmp_path / "store.duckdb"
    ingest_dir(db, "fr_skip", SAMPLES / "fr_skip")
    cli = [*commwall_cmd(), "hang", "--db", str(db), "--run", "fr_skip", "--format", "json"]
    verdict = json.loads(subprocess.run(cli, capture_output=True, check=True).stdout)["verdict"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server = Server(db, ARTIFACTS / "server_hang.log")
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(server.url)
            settle(page)
            open_page(page, nav.PAGES["hang"][1])
            assert page.get_by_test_id("stException").count() == 0
            alerts = page.get_by_test_id("stAlert").all_inner_texts()
            assert any(verdict in a for a in alerts), alerts
            page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=60_000)
            settle(page)
            assert page.get_by_test_id("stVegaLiteChart").count() == 1
            assert_charts_fit(page, "hang")
            page.screenshot(path=str(ARTIFACTS / "hang.png"), full_page=True)
            browser.close()
    finally:
        server.stop()
