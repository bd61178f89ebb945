"""Plain-text rendering of the `nccl` report section (formatting only; analysis/nccl/section.py
computes everything)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from commwall.analysis.nccl.rows import ranges
from commwall.analysis.nccl.tests_tables import test_sentence

__all__ = ["ranges", "render_nccl"]

Table = Callable[[pd.DataFrame], str]
#: Families of lines not understood that the text lists (the JSON has them all).
MAX_FAMILIES = 10


def _where(w: dict | None) -> str:
    return "" if not w else f"{w.get('file')}:{w.get('line')}"


def _first(p: dict) -> str:
    f = p["first"]
    if not f:
        return str(p["count"])
    rank = "" if f["rank"] is None else f" rank {f['rank']}"
    return f"{p['count']} (first at {_where(f)}{rank}: {f['text']})"


def _nic(n: dict) -> str:
    return f"{n['device']}:{n['port']}/{n['link']}" if n["kind"] == "ib" else n["device"]


def _inter_node(x: dict) -> str:
    if x["value"] is None:
        return "unknown"
    if not x["value"]:
        return f"no ({x['basis']})"
    return f"yes ({x['basis']}); network {x['network'] or 'not named'}" + (
        f" ({x['network_basis']})" if x["network"] else ""
    )


def _table(rows: list[dict], cols: tuple[str, ...], table: Table) -> str:
    return table(pd.DataFrame([{c: r.get(c) for c in cols} for r in rows]))


def render_nccl(s: dict, table: Table) -> str:
    """The section as text."""
    if not s["present"]:
        return s["hint"]
    ln, rk = s["lines"], s["ranks"]
    versions = ", ".join(
        f"{v['version']} (ranks {ranges(v['ranks'])})" for v in s["versions_detail"]
    )
    gdr = {True: "on", False: "off", None: "unknown"}[s["gdr"]]
    if s["gdr_evidence"]:
        e = s["gdr_evidence"]
        gdr += f" ({e['basis']}; {_where(e)}: {e['text']})"
    tcp = s["tcp_fallback"]
    out = [
        f"{s['files']} log file(s); lines: {ln['total']} total, {ln['nccl']} NCCL, "
        f"{ln['recognised']} recognised, {ln['unknown']} unknown ({ln['damaged']} damaged), "
        f"{ln['torch']} PyTorch",
        f"versions: {versions or 'not printed'}"
        + (" — MISMATCH" if s["version_mismatch"] else "")
        + (f"; line shapes say >= {s['shape_version']}" if s["shape_version"] else ""),
        f"ranks with a log: {ranges(rk['with_log'])} of world size {rk['world_size']}"
        + (" (as claimed, too large to list)" if rk.get("world_size_unlisted") else "")
        + f"; without: {ranges(rk['without_log'])}; "
        f"unmapped processes: {rk['unmapped_processes']}",
        "networks: "
        + (", ".join(f"{n['network']} ({n['n_processes']} proc)" for n in s["networks"]) or "-")
        + "; NICs: "
        + (", ".join(_nic(n) for n in s["nics"]) or "-"),
        f"inter-node: {_inter_node(s['inter_node'])}",
        f"GPU Direct RDMA: {gdr}",
        "TCP sockets between nodes: "
        + (f"YES — {tcp['explanation']} ({_where(tcp['evidence'])})" if tcp["detected"] else "no"),
    ]
    if s["findings"]:
        out += ["findings:", *(f"  - {f}" for f in s["findings"])]
    cols: tuple[str, ...]  # the columns of each table printed below
    if s["transports"]:
        cols = ("scope", "transport", "count", "n_gdr", "n_processes", "scope_source")
        out += ["transports:", _table(s["transports"], cols, table)]
    if s["communicators"]:
        cols = ("comm_key", "nranks", "n_nodes", "ranks_logged", "ring_channels", "tree_channels")
        cols += ("tree_depth", "max_children", "nvls", "collnet")
        out += ["communicators:", _table(s["communicators"], cols, table)]
        out += [
            f"  ring of {c['comm_key']}: {' '.join(map(str, c['ring']))}"
            + (" ..." if c["ring_truncated"] else "")
            for c in s["communicators"]
            if c["ring"]
        ]
    if s.get("algorithm_choices"):
        cols = ("func", "algo", "proto", "choices", "min_bytes", "max_bytes")
        out += ["what NCCL chose (its tuning lines):", _table(s["algorithm_choices"], cols, table)]
    tests = [x for t in s.get("tests") or [] if (x := test_sentence(t))]
    if tests:
        out += ["nccl-tests results in the logs:", *(f"  - {x}" for x in tests)]
    if ln["unknown_families"]:
        out.append("NCCL lines not understood, by family:")
        out += [
            f"  {f['count']:>6}  {f['family']} ({f['kind']}; first at {_where(f['where'])})"
            for f in ln["unknown_families"][:MAX_FAMILIES]
        ]
    if s.get("env"):
        out.append(
            "set by environment: "
            + ", ".join(f"{e['name']}={e['value']} ({e['n_processes']} proc)" for e in s["env"])
        )
    out += [f"warnings: {_first(s['warnings'])}", f"errors: {_first(s['errors'])}"]
    out.append(f"timeouts: {_first(s['timeouts'])}")
    for t in s["timeouts"]["collectives"]:
        out.append(
            f"  SeqNum {t['seq']} {t['op_type']} (PG {t['pg']}): not enqueued "
            f"{ranges(t['not_enqueued'])}, waiting {ranges(t['waiting'])}, completed "
            f"{ranges(t['completed'])}, crashed {ranges(t.get('crashed', []))}, no log "
            f"{ranges(t['no_log'])}"
        )
    c = s["collectives"]
    if c["calls"]:
        cols = ("op", "calls", "n_ranks", "total_bytes", "median_bytes", "max_bytes")
        out += [f"collectives (COLL lines): {c['calls']} calls", _table(c["by_op"], cols, table)]
        if c["per_step"]:
            cols = ("step", "ranks", "calls", "bytes", "bytes_per_rank")
            out += [f"per step (ranks {ranges(c['aligned_ranks'])}):"]
            out.append(_table(c["per_step"], cols, table))
    return "\n".join(out)
