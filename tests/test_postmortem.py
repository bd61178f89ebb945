"""The post-mortem document: content and order on the real gloo sets, self-contained and
escaped, Markdown, the before/after document (`--diff`), and a PDF printed by headless
Chromium whose pages are checked as text and as images."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES
from dashboard_support import CHROMIUM, CHROMIUM_ARGS

from commwall.analysis import db
from commwall.cli.main import main
from commwall.dashboard.export import postmortem, render_html, render_markdown
from commwall.ingest import discover, store

EVIL = "<script>alert(1)</script>**x** | y `z`"
#: Anything that would load or run something: the document must have none.
EXTERNAL = re.compile(r"<(script|link|img|iframe|object|embed)\b|\bsrc=|href=|url\(|@import", re.I)


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("pm") / "store.duckdb"
    w = store.connect(path)
    for name in ("compute", "sleep"):
        store.ingest(w, name, discover.expand([str(SAMPLES / f"gloo_4rank_{name}")]))
    w.close()
    return path


@pytest.fixture(scope="module")
def docs(db_path):
    con = db.open_db(db_path)
    out = {
        "compute": postmortem(con, "compute"),
        "diff": postmortem(con, "sleep", baseline="compute"),
        "md": postmortem(con, "compute", "md"),
    }
    con.close()
    return out


def test_document_order_and_figures(docs):
    page = docs["compute"]
    truth = json.loads((SAMPLES / "gloo_4rank_compute" / "ground_truth.json").read_text())
    heads = re.findall(r"<h2 id='([a-z_]+)'>", page)
    assert heads[:2] == ["diagnosis", "figures"]  # the diagnosis comes first
    assert heads.index("checklist") < heads.index("run")
    figs = re.findall(r"<figure>(.*?)</figure>", page, re.S)
    assert len(figs) == 5
    assert all(f.lstrip().startswith("<svg") for f in figs), "every figure drawn as SVG"
    # The straggler of the ground truth is named in the opening paragraph.
    para = re.search(r"<p class='diagnosis'>(.*?)</p>", page, re.S).group(1)
    assert f"rank {truth['straggler_rank']}" in para
    # Readable tables: no raw JSON, no literal backticks, shares as percentages.
    assert not re.search(r'\{"|\[\{|`', page)
    assert re.search(r"<td[^>]*>\d+\.\d%</td>", page)
    assert "Measured and predicted" in page and "what-if" in page.lower()


def test_document_is_self_contained(docs):
    for page in (docs["compute"], docs["diff"]):
        assert not EXTERNAL.search(page)


def test_strings_from_traces_are_escaped_in_tables_and_charts():
    report = {"run": EVIL, "summary": {"step_ms": 1.0}, "stragglers": {"verdict": EVIL},
              "collectives": {"ops": [{"op": EVIL, "count": 1}]}}  # fmt: skip
    sizes = pd.DataFrame({"op": [EVIL], "bytes": [1024], "count": [1], "busbw_GBps": [1.0],
                          "transfer_ms": [1.0]})  # fmt: skip
    page = render_html(report, {"sizes": sizes})
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<svg" in page  # the chart with the evil label was drawn, its text escaped
    md = render_markdown(report)
    assert "\\<script\\>" in md and "\\*\\*x\\*\\*" in md and "\\| y" in md


def test_markdown(docs):
    md = docs["md"]
    assert md.startswith("# commwall post-mortem — compute")
    assert md.index("## Diagnosis") < md.index("## Measured and predicted")
    assert "| rank | host | straggler |" in md
    assert '{"' not in md


def test_before_after_document(docs):
    page = docs["diff"]
    assert "sleep against compute" in page
    # Same injected delay in both runs (ground truth): no change beyond noise.
    sentence = re.search(r"<h2 id='diff'>Before and after</h2>\s*<p>(.*?)</p>", page, re.S)
    assert "no change" in sentence.group(1) and "Mann-Whitney U" in sentence.group(1)
    assert page.count("<figure>") == 6  # the step-time distributions first


def test_cli_export_html_md_and_diff(db_path, tmp_path, capsys):
    html_out, md_out = tmp_path / "pm.html", tmp_path / "pm.md"
    args = ["export", "--db", str(db_path), "--run", "sleep"]
    assert main([*args, "--out", str(html_out), "--diff", "compute"]) == 0
    assert "Before and after" in html_out.read_text()
    assert main([*args, "--out", str(md_out)]) == 0
    assert md_out.read_text().startswith("# commwall post-mortem — sleep")
    assert main([*args, "--out", str(md_out), "--diff", "nope"]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err
    assert main([*args, "--out", str(md_out), "--diff", "sleep"]) == 2


def _print_pdf(page: str, tmp_path) -> bytes:
    from playwright.sync_api import sync_playwright

    src = tmp_path / "doc.html"
    src.write_text(page, encoding="utf-8")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            pg = b.new_page()
            requests = []
            pg.on("request", lambda r: requests.append(r.url))
            pg.goto(src.as_uri())
            pdf = pg.pdf(format="A4", print_background=True)
        finally:
            b.close()
    assert requests == [src.as_uri()], "the document asked for nothing but itself"
    return pdf


@pytest.mark.e2e
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium at /usr/bin/chromium")
@pytest.mark.parametrize("which", ["compute", "diff"])
def test_prints_to_pdf(docs, which, tmp_path):
    import pypdf
    import pypdfium2

    pdf = _print_pdf(docs[which], tmp_path)
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    assert 2 <= len(reader.pages) <= 15
    text = "\n".join(p.extract_text() for p in reader.pages)
    for needle in ("commwall post-mortem", "Diagnosis", "Figure 1.", "Figure 5.", "Checklist",
                   "rank 2"):  # fmt: skip
        assert needle in text, needle
    if which == "diff":
        assert "Mann-Whitney" in text
    doc = pypdfium2.PdfDocument(pdf)
    red = np.array([0xE4, 0x57, 0x56])  # the straggler bar's colour (#e45756)
    found_red = False
    for i in range(len(doc)):
        img = np.asarray(doc[i].render(scale=1).to_pil().convert("RGB")).astype(int)
        assert img.std() > 5, f"page {i + 1} is blank"
        # Nothing runs off the page: the right margin (the last 4% of the width) is white.
        margin = img[:, int(img.shape[1] * 0.96) :]
        assert (margin > 245).all(), f"page {i + 1}: content in the right margin"
        found_red |= bool((np.abs(img - red).sum(axis=2) < 30).any())
    assert found_red, "the charts were printed"


def test_a_document_of_many_ranks_draws_blocks_the_top_ranks_and_the_stragglers_timeline(
    tmp_path,
):
    """96 ranks (12 hosts of 8, rank 50 a straggler), stored as rows: the decomposition per
    block of 2 ranks, the 40 ranks causing the most wait, and the median step's timeline of the
    8 ranks a timeline opens on (the straggler and the lowest) — not 96 bars and 96 lanes."""
    from synthetic_traces import Scenario, insert_run, simulate  # noqa: PLC0415

    path = tmp_path / "wide.duckdb"
    w = store.connect(path)
    scn = Scenario(hosts=12, ranks_per_host=8, steps=3, collectives_per_step=4, straggler=50)
    insert_run(w, "wide", simulate(scn))
    w.close()
    con = db.open_db(path)
    page = postmortem(con, "wide")
    con.close()
    assert "(per block of 2 consecutive ranks: their mean)." in page
    assert "the 40 ranks causing most of 96." in page
    assert "(ranks 0, 1, 2, 3, 4, 5, 6, 50 of 96: the stragglers and the lowest ranks)" in page
    figs = re.findall(r"<figure>(.*?)</figure>", page, re.S)
    decomposition = next(f for f in figs if "Where each rank" in f)
    assert ">0–1<" in decomposition and ">94–95<" in decomposition and ">50<" not in decomposition


#: An A4 page's width inside the document's print margins (@page: 14 mm), in CSS pixels.
A4_CONTENT_PX = (210 - 2 * 14) / 25.4 * 96


@pytest.mark.e2e
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium at /usr/bin/chromium")
@pytest.mark.parametrize("which", ["compute", "diff"])
def test_every_table_fits_the_printed_page(docs, which, tmp_path):
    """Laid out for print at an A4 page's width, no table runs past the page: the before/after
    step-time table used to, and Chromium then printed the whole document shrunk and that
    table's last columns cut off (the right-margin check above does not see a cut, since
    Chromium clips at the margin). Numbers stay whole."""
    from playwright.sync_api import sync_playwright

    src = tmp_path / "doc.html"
    src.write_text(docs[which], encoding="utf-8")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            pg = b.new_page(viewport={"width": round(A4_CONTENT_PX), "height": 1000})
            pg.emulate_media(media="print")
            pg.goto(src.as_uri())
            widths = pg.evaluate(
                "() => [document.documentElement.clientWidth, "
                "...[...document.querySelectorAll('table')].map("
                "t => [t.querySelector('th').textContent, t.getBoundingClientRect().right])]"
            )
            numbers = pg.evaluate(
                "() => [...document.querySelectorAll('td:not(.l)')].filter("
                "td => td.getClientRects().length > 1 || td.scrollWidth > td.clientWidth + 1"
                ").map(td => td.textContent)"
            )
        finally:
            b.close()
    page_width, *tables = widths
    assert len(tables) >= 5
    over = [(head, round(right)) for head, right in tables if right > page_width + 0.5]
    assert not over, f"tables wider than the page ({page_width} px): {over}"
    assert not numbers, f"numbers cut or overflowing their cells: {numbers[:5]}"
