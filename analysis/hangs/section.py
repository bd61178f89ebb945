"""The `hang` report section: who did not arrive, from PyTorch Flight Recorder dumps (thin
Python over analysis/sql/hang*.sql; the rules are in docs/hangs.md). Every key is present
whether or not the run has dumps."""

from __future__ import annotations

import ast
from typing import Any

import duckdb

from commwall.analysis import db
from commwall.analysis.collectives.roles import group_role
from commwall.analysis.op_words import op_words

#: Entries per rank and group in the timeline before the hang.
TIMELINE_ENTRIES = 5
UPLOAD_HINT = (
    "no Flight Recorder dump in this run: run the job with TORCH_FR_BUFFER_SIZE=2000 (and "
    "TORCH_FR_DUMP_TEMP_FILE=<dir>/rank_ for dumps on a watchdog timeout), then ingest one "
    "dump per rank"
)


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def has_fr_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the store has the fr_* tables (stores made before them do not)."""
    return db.has_table(con, "fr_entries")


def ranks_text(ranks: list[int]) -> str:
    """'rank 1' or 'ranks 0, 2, 3'."""
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {', '.join(str(r) for r in ranks)}"


def group_text(pg_name: str, pg_desc: str | None) -> str:
    """'process group 0 (default_pg)'."""
    desc = f" ({pg_desc})" if pg_desc and pg_desc != "undefined" else ""
    return f"process group {pg_name}{desc}"


def _last_of(progress: list[dict], pg: str, ranks: list[int]) -> str:
    parts = []
    for p in progress:
        if p["pg_name"] == pg and p["rank"] in ranks:
            op = f"{op_words(p['last_op'])} " if p["last_op"] else ""
            last = "none" if p["last_seq"] is None else f"{op}seq {p['last_seq']}"
            parts.append(last if len(ranks) == 1 else f"rank {p['rank']}: {last}")
    return "; ".join(parts)


def cause_sentence(
    finding: dict, group: dict, progress: list[dict], held: dict[int, str] | None = None
) -> str:
    """One sentence naming the cause of `finding` (a hang_findings row) in its group; `held`:
    ranks of its culprits that wait inside another group's hung collective, and where."""
    where = group_text(finding["pg_name"], finding["pg_desc"])
    seq = finding["seq"]
    op = op_words(finding["op_name"]) if finding["op_name"] else "a collective"
    bad, others = finding["culprit_ranks"], finding["other_ranks"] or []
    kind = finding["kind"]
    if kind == "missing":
        one = len(bad) == 1
        verb = "its last recorded collective is" if one else "last recorded collectives:"
        s = (
            f"Hang in {where} at {op} seq {seq}: {ranks_text(bad)} never entered it "
            f"({verb} {_last_of(progress, finding['pg_name'], bad)})"
        )
        for r, there in sorted((held or {}).items()):
            s += f"; rank {r} is waiting in {there}"
        s += f"; {ranks_text(others)} waited." if others else "."
    elif kind == "late":
        later, timeout = int(finding["expected"]), int(finding["culprit_values"][0])
        s = (
            f"Late rank in {where} at {op} seq {seq}: {ranks_text(bad)} entered it "
            f"{later / 1000:.1f} s after the first rank, beyond the {timeout / 1000:g} s "
            f"timeout: {ranks_text(others)} timed out waiting for it (a late rank, not a "
            "collective that never completed)."
        )
    elif kind == "stuck":
        s = f"Hang in {where} at {op} seq {seq}: {ranks_text(bad)} started it and never "
        if others:
            s += f"completed it; {ranks_text(others)} did."
        else:
            s += "completed it (every rank is inside it: look at the network or the devices)."
    else:
        values = [*finding["culprit_values"], finding["expected"]]
        if kind == "op":  # 'gloo:all_reduce' → 'all-reduce'
            values = [op_words(v) for v in values]
        if kind == "size":  # '[[2048]] -> [[4, 2048]]' → '2048 in, 4×2048 out'
            values = [shapes_text(v) for v in values]
        got, expected = " / ".join(values[:-1]), values[-1]
        verb = {"op": "called", "dtype": "passed dtypes", "size": "passed shapes"}[kind]
        tail = "" if kind == "op" else f" to {op}"
        s = (
            f"Mismatch in {where} at seq {seq}: {ranks_text(bad)} {verb} {got} where "
            f"{ranks_text(others)} {verb} {expected}{tail}"
        )
        s += " (no majority: either side may be at fault)." if finding["ambiguous"] else "."
    if group["missing_dumps"]:
        s += f" No dump from {ranks_text(group['missing_dumps'])}: they may be the cause."
    return s


def shapes_text(v: str) -> str:
    """A Flight Recorder size record ('[[2048]] -> [[4, 2048]]': input shapes, then output
    shapes) in words ('2048 in, 4×2048 out'); `v` unchanged when it is not of that form."""
    sides = [x.strip() for x in str(v).split("->")]
    try:
        parsed = [ast.literal_eval(x) for x in sides]
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return str(v)
    if len(parsed) > 2 or not all(isinstance(p, list) for p in parsed):
        return str(v)

    def tensors(p: list) -> str:
        dims = ["×".join(str(d) for d in t) if isinstance(t, list) else str(t) for t in p]
        return " and ".join(d or "scalar" for d in dims) or "nothing"

    words = [tensors(p) for p in parsed]
    return f"{words[0]} in, {words[1]} out" if len(words) == 2 else words[0]


def quiet_sentence(group: dict) -> str:
    """The sentence for a group without a finding."""
    where = group_text(group["pg_name"], group["pg_desc"])
    s = f"No hang evidence in {where}: every dumped rank entered the same collectives up to "
    s += f"seq {group['last_common_seq']}"
    if group["missing_dumps"]:
        s += f", but {ranks_text(group['missing_dumps'])} left no dump (crashed or not collected)"
    elif not group["state_tracked"]:
        s += " (these dumps record no completion, as with gloo: a hang inside that collective "
        s += "cannot be told from a finished job)"
    return s + "."


def _absent(reason: str) -> dict[str, Any]:
    return {
        "present": False,
        "reason": reason,
        "n_dumps": 0,
        "forms": [],
        "versions": [],
        "verdict": None,
        "culprits": [],
        "groups": [],
        "findings": [],
        "ranks": [],
        "timeline": [],
        "in_traces": None,
        "traced": [],
    }


def hang_section(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    """The hang findings of run `rid` (see module docstring); `present` False, with `reason`,
    when the run has no Flight Recorder dump."""
    if not has_fr_tables(con):
        return _absent("not available: this store predates Flight Recorder support")
    dumps = db.row(
        con,
        "SELECT count(DISTINCT rank), list(DISTINCT form ORDER BY form), "
        "list(DISTINCT coalesce(version, 'unknown') ORDER BY coalesce(version, 'unknown')) "
        "FROM fr_dumps WHERE run_id = ?",
        [rid],
    )
    if not dumps[0]:
        return _absent(UPLOAD_HINT)
    groups = _rows(con, "SELECT * FROM hang_groups(?)", [rid])
    findings = _rows(con, "SELECT * FROM hang_findings(?)", [rid])
    progress = _rows(con, "SELECT * FROM hang_rank_progress(?)", [rid])
    timeline = _rows(con, "SELECT * FROM hang_timeline(?, ?)", [rid, TIMELINE_ENTRIES])
    traced = _rows(con, "SELECT * FROM hang_traced(?)", [rid])
    for f in findings:
        f.pop("priority", None)
    for g in groups:
        g["cause"] = next((f for f in findings if f["pg_name"] == g["pg_name"]), None)
    hung = order_hung([g for g in groups if g["cause"]])
    for g in groups:
        if not g["cause"]:
            g["sentence"] = quiet_sentence(g)
            continue
        # every finding at the cause's seq: a rank that never entered and another that called
        # a different op there are two culprits, and fixing one leaves the job hung
        same = [
            f for f in findings if f["pg_name"] == g["pg_name"] and f["seq"] == g["cause"]["seq"]
        ]
        quiet = {**g, "missing_dumps": []}  # the missing dumps are said once
        g["sentence"] = " ".join(
            cause_sentence(
                f, g if i == len(same) - 1 else quiet, progress, g.get("held") if i == 0 else None
            )
            for i, f in enumerate(same)
        )
    culprits = culprit_summary(hung, progress)
    said = {pg for c in culprits for pg in c["groups"]}
    verdict = " ".join(
        [c["sentence"] for c in culprits]
        + [g["sentence"] for g in (hung or groups) if g["pg_name"] not in said]
    ) or ("The dumps hold no collective entries.")
    verdict += cycle_sentence(hung)
    return {
        "present": True,
        "reason": None,
        "n_dumps": dumps[0],
        "forms": dumps[1],
        "versions": dumps[2],
        "verdict": verdict,
        "culprits": culprits,
        "groups": groups,
        "findings": findings,
        "ranks": progress,
        "timeline": timeline,
        "in_traces": in_traces(traced),
        "traced": traced,
    }


def spans(ranks: list[int]) -> str:
    """'8, 10–15': runs of three or more consecutive ranks as a span."""
    out: list[list[int]] = []
    run: list[int] = []
    for r in sorted(set(ranks)):
        if run and r != run[-1] + 1:
            out.append(run)
            run = []
        run.append(r)
    if run:
        out.append(run)
    return ", ".join(
        f"{g[0]}–{g[-1]}" if len(g) >= 3 else ", ".join(str(r) for r in g) for g in out
    )


def culprit_summary(hung: list[dict], progress: list[dict]) -> list[dict[str, Any]]:
    """One entry per rank that never entered the hung collective of two or more groups (a rank
    that stopped, seen from each of its groups): the groups and their roles, how many groups it
    recorded collectives in at all, the ranks left waiting in them, and one sentence that says
    it once instead of once per group. Groups whose cause is another kind keep their own
    sentence."""
    by_rank: dict[int, list[dict]] = {}
    for g in hung:
        c = g["cause"]
        if c["kind"] == "missing" and not g.get("held"):
            for r in c["culprit_ranks"]:
                by_rank.setdefault(r, []).append(g)
    culprit_ranks = set(by_rank)
    out = []
    for rank, gs in sorted(by_rank.items()):
        if len(gs) < 2:
            continue
        own = {p["pg_name"] for p in progress if p["rank"] == rank}
        roles = [group_role(g["pg_name"], g["pg_desc"]) for g in gs]
        named = ", ".join(
            f"{role} {g['pg_name']}" if role else f"group {g['pg_name']}"
            for role, g in zip(roles, gs, strict=True)
        )
        waiting = sorted({r for g in gs for r in (g["cause"]["other_ranks"] or [])} - culprit_ranks)
        share = (
            f"all {len(gs)} of its groups"
            if own <= {g["pg_name"] for g in gs}
            else (f"{len(gs)} of its {len(own)} groups")
        )
        sentence = (
            f"Rank {rank} stopped issuing collectives in {share} ({named}): in each it never "
            "entered the collective the others were waiting in"
            + (f"; ranks {spans(waiting)} waited." if waiting else ".")
        )
        out.append(
            {
                "rank": rank,
                "groups": [g["pg_name"] for g in gs],
                "roles": roles,
                "n_groups_recorded": len(own),
                "waiting": waiting,
                "sentence": sentence,
            }
        )
    return out


def order_hung(hung: list[dict]) -> list[dict]:
    """The hung groups, the root cause first. Sequence numbers count per group, so they cannot
    order groups: a group whose missing ranks wait inside another group's hung collective
    (`held`: rank → where, set on the group) is a consequence and comes after the groups whose
    culprits wait nowhere; then by seq and name."""
    waiting: dict[int, dict] = {}
    for g in hung:
        if g["cause"]["kind"] == "missing":
            for r in g["cause"]["other_ranks"] or []:
                waiting.setdefault(r, g)
    for g in hung:
        c = g["cause"]
        bad = c["culprit_ranks"] if c["kind"] == "missing" else []
        g["held"] = {
            r: f"{group_text(h['pg_name'], h['pg_desc'])} at "
            f"{op_words(h['cause']['op_name'] or 'a collective')} seq {h['cause']['seq']}"
            for r in bad
            if (h := waiting.get(r)) is not None and h is not g
        }
        g["held_in"] = sorted({waiting[r]["pg_name"] for r in g["held"]})
    return sorted(hung, key=lambda g: (bool(g["held"]), g["cause"]["seq"], g["pg_name"]))


def cycle_sentence(hung: list[dict]) -> str:
    """When two hung groups each hold a culprit of the other, say so: the ranks entered them in
    different orders, which no single group's figures show."""
    by_name = {g["pg_name"]: g for g in hung}
    for g in hung:
        for other in sorted(g.get("held_in") or ()):
            h = by_name.get(other)
            if h is not None and g["pg_name"] in (h.get("held_in") or ()):
                a, b = sorted((g, h), key=lambda x: x["pg_name"])
                return (
                    f" {group_text(a['pg_name'], a['pg_desc']).capitalize()} and "
                    f"{group_text(b['pg_name'], b['pg_desc'])} wait on each other: their ranks "
                    "entered them in different orders (a rank skipped a collective or called "
                    "them out of order), so the rank that diverged first is the culprit."
                )
    return ""


def in_traces(traced: list[dict[str, Any]]) -> bool | None:
    """Whether the traces reach the hang, from hang_traced's rows: True when they reach any
    hung call, False when they are known to end before every one, None when not known (no
    hung call, no traces, or a trace with no absolute time)."""
    known = [r["in_traces"] for r in traced]
    if any(k is True for k in known):
        return True
    return False if known and all(k is False for k in known) else None
