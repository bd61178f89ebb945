"""Ranks that died of an error of their own, from the NCCL logs: who, of what (their first fatal
error, running out of GPU memory said as such), in a sentence."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import duckdb

from commwall.analysis.nccl.rows import ranges
from commwall.analysis.nccl.rows import rows as _rows
from commwall.analysis.nccl.rows import where as _where

#: An out-of-memory message up to what it says was free: `CUDA out of memory. Tried to
#: allocate 2.16 GiB. GPU 7 has a total capacity of 139.80 GiB of which 1.28 GiB is free.`
#: (recent PyTorch), `... Tried to allocate 20.00 MiB (GPU 0; ...; 3.19 MiB free` (older).
_OOM_FREE = re.compile(r"^.*?\bfree\b[^.;)]*[.)]?")
#: Characters of an out-of-memory message quoted when it says nothing of free memory.
OOM_QUOTE = 240


def _crashed(con: duckdb.DuckDBPyConnection, rid: int) -> dict[str, Any]:
    """The ranks that died of an error of their own (nccl_crashes), what each died of and
    NCCL's last error quoted under it; `unattributed`: crash lines of no known rank."""
    rows = _rows(con, "nccl_crashes", rid)
    by_rank = [
        {
            "rank": r["rank"],
            "crash": r["crash"],
            "last_error": r["last_error"],
            **(_where(con, r["first_file_id"], r["first_line"]) or {}),
            "kind": r["crash_kind"],
            "later_crash": r["later_crash"],
        }
        for r in rows
        if r["rank"] is not None
    ]
    other = next((r for r in rows if r["rank"] is None), None)
    return {
        "ranks": [r["rank"] for r in by_rank],
        "by_rank": by_rank,
        "unattributed": other["n_crash_lines"] if other else 0,
        "unattributed_first": None
        if other is None
        else {
            "crash": other["crash"],
            "last_error": other["last_error"],
            **(_where(con, other["first_file_id"], other["first_line"]) or {}),
            "kind": other["crash_kind"],
        },
    }


def crash_sentence(crashed: Mapping[str, Any]) -> str | None:
    """Who died of what, in one clause per distinct cause (`ranks 1-7 died of NCCL error in:
    ..., invalid usage ...; NCCL's last error: NET/IB : ...`); None when no rank died. What a
    rank died of is its first fatal error (`rank 7 died of running out of GPU memory (...)`);
    its later ones, which followed from it, are named after it."""
    causes: dict[tuple, list[int]] = {}
    for r in crashed.get("by_rank") or []:
        key = (r["crash"], r["last_error"], r.get("kind"), r.get("later_crash"))
        causes.setdefault(key, []).append(r["rank"])
    parts = [
        f"rank{'s' if len(ranks) > 1 else ''} {ranges(ranks)} died of "
        + _cause(crash, last, kind)
        + _later(later, "their" if len(ranks) > 1 else "its")
        for (crash, last, kind, later), ranks in causes.items()
    ]
    other, n = crashed.get("unattributed_first"), crashed.get("unattributed") or 0
    if other:
        parts.append(
            f"{'a process' if n == 1 else f'{n} crash lines'} of no known rank "
            f"{'died' if n == 1 else 'say the first died'} of "
            + _cause(other["crash"], other["last_error"], other.get("kind"))
        )
    return "; ".join(parts) or None


def _cause(crash: str, last_error: str | None, kind: str | None = None) -> str:
    """What a rank died of, with NCCL's last error where PyTorch quoted it; an out-of-memory
    says so, with what was asked for and what was free."""
    if kind == "oom":
        return f"running out of GPU memory ({oom_quote(crash)})"
    return crash + (f" (NCCL's last error: {last_error})" if last_error else "")


def _later(later: str | None, whose: str = "its") -> str:
    """The clause naming a rank's last fatal error after the first, or ''."""
    return f", and {whose} later errors came after that (the last: {later})" if later else ""


def oom_quote(message: str) -> str:
    """An out-of-memory message cut after what it says was free (`torch.OutOfMemoryError: CUDA
    out of memory. Tried to allocate 2.16 GiB. GPU 7 has a total capacity of 139.80 GiB of
    which 1.28 GiB is free.`), where PyTorch's advice on fragmentation follows."""
    m = _OOM_FREE.match(message)
    if m is None:
        return message if len(message) <= OOM_QUOTE else message[:OOM_QUOTE] + " …"
    quote = m.group(0)
    return quote + (" …)" if quote.count("(") > quote.count(")") else "")
