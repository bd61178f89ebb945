"""The post-mortem of a run (or of a run against a baseline) as one self-contained HTML page or
a Markdown file.

Formatting only: the numbers are the report's and analysis/report/postmortem.py's. The HTML has no
scripts and no external requests: charts are inline SVG rendered by vl-convert (under an
address-space limit in a child process, or left out with a sentence saying why: doc_charts),
styles are inline, and it prints to PDF (A4). Every string from the data is escaped (HTML:
html.escape; Markdown: backslash escapes), so a trace cannot inject markup.

What the document says is export_content.py's; this module draws the figures and lays the
HTML page out, export_markdown.py the Markdown file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from commwall.analysis.safe_text import visible
from commwall.analysis.steps import summary
from commwall.dashboard.export_content import (
    HANDLED,
    INSPECTOR_HEADING,
    NA,
    answer_text,
    as_text,
    brief_items,
    checklist,
    collective_rows,
    diagnosis_text,
    diff_sentence,
    dimension_rows,
    fabric_rows,
    frame_rows,
    hang_rows,
    measured_vs_predicted,
    model_note,
    nccl_rows,
    pipeline_rows,
    rank_rows,
    run_rows,
    straggler_rows,
    summary_rows,
)
from commwall.dashboard.export_markdown import render_markdown
from commwall.dashboard.inspector_text import postmortem_rows, summary_line

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:60rem;
color:#222;line-height:1.4}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #ddd;
break-after:avoid}h3{break-after:avoid}
table{border-collapse:collapse;margin:.5rem 0 1.2rem;font-size:.8rem}
table.wide{width:100%;font-size:.7rem}table.wide td{white-space:nowrap}
table.wide td,table.wide th{padding:.15rem .25rem}
table.wide th,table.wide td.l{white-space:normal}
td,th{border:1px solid #ccc;padding:.2rem .45rem;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}tr{break-inside:avoid}
.meta{color:#555}.attention{color:#b00020;font-weight:600}.ok{color:#1b7f3b}
.not_observable{color:#777}.not_applicable{color:#777}.na{color:#777;font-style:italic}
.diagnosis{font-size:1.05rem;padding:.6rem 1rem;background:#f6f6f6;border-left:4px solid #b00020}
figure{margin:1rem 0;break-inside:avoid}figcaption{font-size:.85rem;color:#444}
figure svg{max-width:100%;height:auto}code{background:#f3f3f3;padding:0 .2rem}
@page{size:A4;margin:14mm}
@media print{body{margin:0;max-width:none;font-size:10pt}h2{break-before:auto}}
"""


#: At most this many ranks in a bar chart of the document (those causing the most waiting).
MAX_BARS = 40


def _rank_blocks(dec: Any) -> tuple[Any, int]:
    """The document's decomposition (rank, part, ms; or a "not available" string) with the
    ranks in blocks when there are too many to draw one bar each (charts.rank_block_size):
    each block's mean per part (summary.parts_per_rank_block); and the block size."""
    from commwall.dashboard.charts import rank_block_size  # noqa: PLC0415 (charts: only documents)

    if not isinstance(dec, pd.DataFrame) or dec.empty:
        return dec, 1
    size = rank_block_size(dec["rank"].nunique())
    if size == 1:
        return dec, 1
    wide = dec.pivot_table(index="rank", columns="part", values="ms", sort=False).reset_index()
    parts = list(dec["part"].unique())
    blocks = summary.parts_per_rank_block(wide, parts, size)
    return blocks.melt(id_vars="rank", var_name="part", value_name="ms"), size


# --- figures -------------------------------------------------------------------------------


def figures(data: dict) -> list[tuple[str, Callable[[], Any] | str]]:
    """(caption, chart builder or "not available" text) for every figure of the document."""
    from commwall.dashboard import doc_charts as dc  # noqa: PLC0415 (charts: only documents)

    report = data["report"]
    out: list[tuple[str, Callable[[], Any] | str]] = []

    def add(caption: str, value: Any, build: Callable[[Any], Any]) -> None:
        if isinstance(value, str):
            out.append((caption, value))
        elif value is None or (hasattr(value, "__len__") and len(value) == 0):
            out.append((caption, f"{NA}: nothing to draw"))
        else:
            out.append((caption, lambda: build(value)))

    diff = data.get("diff")
    if diff is not None:
        add("Step time of every step (slowest rank), baseline first.", diff["step_samples"],
            lambda v: dc.step_distribution(v, "Step time per run"))  # fmt: skip
    dec, size = _rank_blocks(data.get("decomposition"))
    add(
        "Step decomposition per rank: the mean per step of each part of the step"
        + (f" (per block of {size} consecutive ranks: their mean)." if size > 1 else "."),
        dec,
        lambda v: dc.decomposition(v, "Where each rank's step time goes"),
    )
    ranks = pd.DataFrame((report.get("stragglers") or {}).get("ranks") or [])
    n_ranks = len(ranks)
    if n_ranks and "wait_caused_ms" in ranks:
        ranks = ranks.sort_values("wait_caused_ms", ascending=False, kind="stable")
        ranks = ranks.head(MAX_BARS).assign(label=lambda d: [f"rank {r}" for r in d["rank"]])
        ranks["flagged"] = ranks.get("flagged", False)
    caveat = (report.get("stragglers") or {}).get("caveat")
    add(
        (f"{caveat} " if caveat else "")
        + "Wait caused per rank: how long the other ranks waited for this one at collectives "
        "(ms, whole run); stragglers in red"
        + (f"; the {MAX_BARS} ranks causing most of {n_ranks}." if n_ranks > MAX_BARS else "."),
        ranks if n_ranks and "wait_caused_ms" in ranks else f"{NA}: no matched collectives",
        lambda v: dc.ranked_bars(v, "wait_caused_ms", "label", "Wait caused", "ms"),
    )
    peak = ((report.get("model") or {}).get("measured") or {}).get("peak_busbw_GBps")
    add(
        "Bus bandwidth per collective and message size (median over instances)"
        + (f"; dashed: the link's peak, {peak:g} GB/s." if peak else "; the link's peak is "
           "unknown for this run."),
        data.get("sizes"),
        lambda v: dc.busbw_by_size(v, "Bus bandwidth by message size", peak, "op"),
    )  # fmt: skip
    tl = data.get("timeline")
    add(
        f"Step {tl['step']} (the median step) on the aligned clock: what each rank did, and "
        "its waits for the last rank at each collective"
        + (
            f" (ranks {', '.join(map(str, tl['ranks']))} of {tl['n_ranks']}: the stragglers "
            "and the lowest ranks)."
            if len(tl.get("ranks") or []) < (tl.get("n_ranks") or 0)
            else "."
        )
        if isinstance(tl, dict)
        else "One step on the aligned clock.",
        tl,
        lambda v: dc.step_timeline(v["tracks"], v["collectives"], f"Step {v['step']}"),
    )
    w = data.get("whatifs")
    add(
        "What-ifs ranked by predicted step time (ms), best first.",
        w,
        lambda v: dc.ranked_bars(
            v.assign(label=v["what_if"].astype(str)), "step_ms", "label", "What-ifs",
            "predicted step time (ms)",
        ),
    )  # fmt: skip
    return out


def _failed(e: BaseException) -> str:
    return f"<p class='na'>{html.escape(f'{NA}: {type(e).__name__}: {e}')}</p>"


def _drawn(builds: list[Callable[[], Any] | str]) -> tuple[list[str], str | None]:
    """The HTML of each figure (an SVG, or why it is missing), and a sentence for the whole
    section when no chart could be drawn at all (doc_charts.NotRendered: under an
    address-space limit V8 cannot reserve its memory); a chart that cannot be drawn must not
    cost the document."""
    from commwall.dashboard.doc_charts import NotRendered, to_svgs  # noqa: PLC0415

    bodies: list[str | None] = []
    specs: list[dict] = []
    for build in builds:
        if isinstance(build, str):
            bodies.append(f"<p class='na'>{html.escape(build)}</p>")
            continue
        try:
            specs.append(build().to_dict())
            bodies.append(None)
        except Exception as e:
            bodies.append(_failed(e))
    if not specs:
        return [b or "" for b in bodies], None
    try:
        svgs = iter(to_svgs(specs))
    except NotRendered as e:
        missing = f"<p class='na'>{NA}: chart not rendered (see above)</p>"
        return [b or missing for b in bodies], f"Charts not rendered: {e}."
    out = []
    for b in bodies:
        if b is None:
            svg = next(svgs)
            b = _failed(svg) if isinstance(svg, Exception) else svg
        out.append(b)
    return out, None


# --- HTML ----------------------------------------------------------------------------------


def _inline_code(escaped: str) -> str:
    """`x` in already escaped text → <code>x</code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _html_table(rows: list[dict] | str) -> str:
    if isinstance(rows, str):
        return f"<p class='na'>{html.escape(rows)}</p>"
    if not rows:
        return f"<p class='na'>{NA}: none</p>"
    cols = list(dict.fromkeys(c for r in rows for c in r))
    numeric = re.compile(r"^[-+]?[\d.,]+(e[-+]?\d+)?%?$|^$")
    left = {c for c in cols if not all(numeric.match(as_text(r.get(c))) for r in rows)}

    def cls(c: str) -> str:
        return ' class="l"' if c in left else ""

    wide = _chars_wide(cols, rows) > WIDE_CHARS
    esc = _breakable if wide else html.escape
    head = "".join(f"<th{cls(c)}>{esc(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td{cls(c)}>{esc(as_text(r.get(c)))}</td>" for c in cols) + "</tr>"
        for r in rows
    )
    attr = " class='wide'" if wide else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: Characters a table's row may hold (its columns' longest texts, plus each cell's padding)
#: before it is laid out to the page's width in smaller type, its headers and text wrapped at
#: spaces and after underscores (numbers are never broken): an A4 page printed at 14 mm margins
#: holds about 100 characters of the tables' type. Left to its own width, a wider table ran
#: past the page: Chromium printed the whole document shrunk and still cut the table's last
#: columns off (the before/after step-time table's judgement and pairing).
WIDE_CHARS = 90


def _breakable(text: str) -> str:
    """Escaped text that may break after its underscores (run names, column names)."""
    return html.escape(text).replace("_", "_<wbr>")


def _chars_wide(cols: list[str], rows: list[dict]) -> int:
    """The width of a table's widest row laid out without wrapping, in characters."""
    return sum(max(len(str(c)), *(len(as_text(r.get(c))) for r in rows)) + 2 for c in cols)


def _generic(value: Any) -> str:
    """A report key without a section of its own, as tables and text (never raw JSON)."""
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return _html_table([{k: as_text(v) for k, v in r.items()} for r in value])
    if isinstance(value, dict) and value:
        return _html_table([{"key": k, "value": as_text(v)} for k, v in value.items()])
    return f"<p>{html.escape(as_text(value) or NA)}</p>"


def render_html(report: Mapping[str, Any], extra: dict | None = None, charts: bool = True) -> str:
    """The document as one HTML page: inline CSS and SVG, no scripts or external resources.
    `extra` is analysis.report.postmortem.postmortem_data's dict (less the report) for the figures
    and, with a baseline, the before/after part; without it the figures that need the store
    say "not available"."""
    esc = html.escape
    data = {"report": report, **(extra or {})}
    run = esc(str(report.get("run")))
    diff = data.get("diff")
    title = f"{run} against {esc(str(data.get('baseline')))}" if diff is not None else run
    p = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>commwall post-mortem — {title}</title><style>{STYLE}</style></head><body>",
        f"<h1>commwall post-mortem — {title}</h1>",
        f"<p class='meta'>{esc(as_text(report.get('run_info')))}</p>",
    ]
    para, cause = diagnosis_text(report)
    p.append("<h2 id='diagnosis'>Diagnosis</h2>")
    if a := answer_text(report):
        p.append(f"<p class='answer'><b>{esc(a)}</b></p>")
    if items := brief_items(report):
        p.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul>")
        p.append("<h3>In detail</h3>")
    p.append(f"<p class='diagnosis'>{esc(para)}</p>")
    if cause:
        p.append(f"<p>Cause: <b>{esc(cause)}</b></p>")
    if diff is not None:
        p.append("<h2 id='diff'>Before and after</h2>")
        p.append(f"<p>{esc(diff_sentence(diff))}</p>")
        for key, head in [
            ("step_time", "Step time"),
            ("summary", "Headline metrics"),
            ("decomposition", "Step decomposition per rank (mean ms per step)"),
            ("collectives", "Collectives by op and message size"),
            ("stragglers", "Stragglers"),
            ("straggler_verdicts", "Straggler verdicts"),
            ("nccl", "NCCL"),
            ("model", "Model"),
        ]:
            table = diff[key].drop(columns=["test"], errors="ignore")
            p.append(f"<h3>{esc(head)}</h3>{_html_table(frame_rows(table))}")
    p.append("<h2 id='figures'>Figures</h2>")
    figs = figures(data) if charts else []
    bodies, not_rendered = _drawn([build for _, build in figs])
    if not_rendered:
        p.append(f"<p><strong>{esc(not_rendered)}</strong></p>")
    for i, ((caption, _), body) in enumerate(zip(figs, bodies, strict=True), 1):
        p.append(f"<figure>{body}<figcaption>Figure {i}. {esc(caption)}</figcaption></figure>")
    p.append("<h2 id='model'>Measured and predicted</h2>")
    if note := model_note(report, data.get("whatifs")):
        p.append(f"<p><strong>{esc(note)}</strong></p>")
    p.append(_html_table(measured_vs_predicted(report) or f"{NA}: no model section"))
    if data.get("whatifs") is not None:
        p.append("<h3>What-ifs, best first (step time in ms, saving in %)</h3>")
        p.append(_html_table(frame_rows(data["whatifs"])))
    p.append("<h2 id='summary'>Summary (means over ranks and steps)</h2>")
    p.append(_html_table(summary_rows(report)))
    p.append("<h2 id='stragglers'>Stragglers</h2>")
    sv = (report.get("stragglers") or {}).get("verdict")
    caveat = (report.get("stragglers") or {}).get("caveat")
    if caveat:
        p.append(f"<p><strong>{esc(caveat)}</strong></p>")
    p.append(f"<p>{esc(sv or NA)}</p>" + _html_table(straggler_rows(report)))
    p.append("<h2 id='collectives'>Collectives</h2>")
    p.append(_html_table(collective_rows(report)))
    p.append("<h2 id='dimensions'>The step by parallelism dimension</h2>")
    p.append(_html_table(dimension_rows(report)))
    p.append("<h2 id='pipeline'>Pipeline</h2>")
    if (report.get("pipeline") or {}).get("sentence"):
        p.append(f"<p>{esc(report['pipeline']['sentence'])}</p>")
    p.append(_html_table(pipeline_rows(report)))
    p.append("<h2 id='fabric'>Collectives against nccl-tests on this fabric</h2>")
    if (report.get("fabric") or {}).get("sentence"):
        p.append(f"<p>{esc(report['fabric']['sentence'])}</p>")
    p.append(_html_table(fabric_rows(report)))
    p.append("<h2 id='nccl'>NCCL</h2>")
    n = report.get("nccl") or {}
    findings = n.get("findings") or []
    if findings:
        p.append("<ul>" + "".join(f"<li>{esc(as_text(f))}</li>" for f in findings) + "</ul>")
    p.append(_html_table(nccl_rows(report)) if n.get("present") else
             f"<p class='na'>{esc(n.get('hint') or NA)}</p>")  # fmt: skip
    hang_text, hang_table = hang_rows(report)
    p.append(f"<h2 id='hang'>Hang (Flight Recorder)</h2><p>{esc(hang_text)}</p>")
    p.append(_html_table(hang_table) if hang_table else "")
    if (ins := report.get("inspector") or {}).get("present"):
        p.append(f"<h2 id='inspector'>{INSPECTOR_HEADING}</h2><p>{esc(summary_line(ins))}</p>")
        p.append("<ul>" + "".join(f"<li>{esc(as_text(f))}</li>" for f in ins["findings"]) + "</ul>")
        p.append(_html_table(rows) if (rows := postmortem_rows(ins)) else "")
    p.append("<h2 id='checklist'>Checklist</h2><ul>")
    for item in checklist(report):
        status = str(item.get("status"))
        evidence = _inline_code(esc(str(item.get("evidence"))))
        p.append(
            f"<li><span class='{esc(status)}'>[{esc(status.replace('_', ' '))}]</span> "
            f"<b>{esc(str(item.get('title')))}</b> — {evidence}"
            + (f" <i>{_inline_code(esc(str(item['action'])))}</i>" if item.get("action") else "")
            + "</li>"
        )
    p.append("</ul>")
    p.append("<h2 id='ranks'>Per rank (whole trace)</h2>")
    p.append(_html_table(rank_rows(report)))
    for key in report:
        if key not in HANDLED:
            heading = esc(key.replace("_", " ").capitalize())
            p.append(f"<h2 id='{esc(key)}'>{heading}</h2>{_generic(report[key])}")
    p.append("<h2 id='run'>Run</h2>")
    p.append(_html_table(run_rows(report)))
    p.append("</body></html>")
    return "\n".join(p)


def postmortem(
    con: Any,
    run: str,
    fmt: str = "html",
    baseline: str | None = None,
    fabric_baseline: str | None = None,
) -> str:
    """The post-mortem of run `run` of the store `con` (against run `baseline` when given) as
    HTML or Markdown; its fabric part priced from the nccl-tests tables of run
    `fabric_baseline` when given (default: the run's own)."""
    from commwall.analysis.api import Store  # noqa: PLC0415

    data = Store.over(con).run(run).postmortem_data(baseline, fabric_baseline)
    report = data.pop("report")
    # no control character of a file reaches the document (a terminal or viewer would act on it)
    return visible(render_markdown(report, data) if fmt == "md" else render_html(report, data))
