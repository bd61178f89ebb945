"""Stragglers: ranks ranked by score, the wait they cause, their host, and the evidence."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from commwall.dashboard import charts, session
from commwall.dashboard.ui import findings, matched_instances, md, missing, plot, traces_hint
from commwall.dashboard.ui import table as ui_table

#: Columns of the main table (when the section has them), in order.
SHOWN = [
    "rank",
    "host",
    "flagged",
    "kind",
    "score",
    "wait_caused_ms",
    "late_fraction",
    "n_last",
    "n_instances",
    "excess_ms",  # what the verdict quotes ("median 5.1 ms later than the median rank")
    "lateness_ms",
    "delay_ms",  # how much later than the first rank it arrives (median over steps)
    "start_delay_ms",  # … of which before its step begins (the diagnosis's "late start")
    "compute_ratio",
    "steps_flagged",
    "n_steps",
]

v = session.current_run()
st.header(f"Stragglers — {md(v.run)}")
s = v.report.get("stragglers")
if not isinstance(s, dict) or not s.get("ranks"):
    # collectives matched, yet none usable here: say why (the section's verdict), not "upload"
    why = s.get("verdict") if isinstance(s, dict) else None
    how = md(why) if why and matched_instances(v.report) else traces_hint(v.report)
    missing("The straggler analysis", how)
    st.stop()

if s.get("caveat"):
    st.error(md(s["caveat"]))
flagged = list(s.get("flagged") or [])
# The verdict is "<answer>: <finding>; <finding>; …": the answer as the headline, the
# findings one per line.
answer, _, rest = (s.get("verdict") or "no verdict").partition(": ")
answer = "no straggler" if answer.strip().lower() == "none" else answer  # not Python's None
lines = [f"**{md(answer[:1].upper() + answer[1:])}**"]
lines += [f"- {md(f)}" for f in findings(rest)]
(st.warning if flagged else st.success)("\n".join(lines))

table = pd.DataFrame(s["ranks"]).sort_values("score", ascending=False, kind="stable")
table["host"] = table["host"].fillna("unknown")
table["rank"] = table["rank"].astype(str)
#: What a bar carries (its tooltip).
BAR_COLUMNS = ["rank", "host", "flagged", "kind", "score", "wait_caused_ms", "late_fraction"]
#: The bar charts: column → (title with unit, axis title, sentence when there is nothing).
BARS = {
    "wait_caused_ms": ("Wait caused on peers (ms)", "ms", "No rank caused any wait."),
    "score": ("Lateness score (robust z, no unit)", "robust z", "No lateness score."),
}
#: At most this many ranks are drawn as bars (the highest scores); the table lists them all.
MAX_BARS = 40
for col, (x, (title, axis, empty)) in zip(st.columns(len(BARS)), BARS.items(), strict=True):
    plot(
        table[[c for c in BAR_COLUMNS if c in table.columns]].head(MAX_BARS),
        charts.bars,
        (x, "rank", title, axis, "flagged"),
        empty,
        key=f"straggler_{x}",
        where=col,
    )
cut = f"The {MAX_BARS} highest scores of {len(table)} ranks; the table lists every rank. "
st.caption(
    (cut if len(table) > MAX_BARS else "")
    + "Ranks by score, flagged ranks in red. A straggler arrives last at collectives, so it "
    "has the shortest communication time and makes its peers wait. Operator time vs the median "
    "rank: above 1, extra compute. Arrives late by: how much later than the first rank it "
    "arrives at its latest collective of a step; starts its steps late by: how much later it "
    "starts its steps (median "
    "over steps): most of the delay there means the rank is late before its step begins."
)
ui_table(table[[c for c in SHOWN if c in table.columns]], key="stragglers")
with st.expander("Per step"):
    ui_table(pd.DataFrame(s.get("steps") or []), key="straggler_steps")
    st.caption(
        "Rank causing the most waiting: the rank whose lateness caused the most waiting in "
        "that step. Flagged: the "
        "ranks that, on that step's collectives alone, caused more than their fair share of "
        "the waiting consistently, cost enough and were measurably late. The two can differ: a "
        "rank late at one long wait tops the step without being consistent, and a rank a "
        "little late at every collective is flagged without causing the most waiting."
    )
