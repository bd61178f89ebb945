"""How a cached macro finds its run's table: the dispatch every macro of CACHED is defined as.

A run's analysis session (analysis/report/session.py) computes the heavy intermediate tables of one
run
once. So that every macro reading them (and every caller) gets the cached rows without being
redefined, each macro of CACHED is loaded under two names (analysis/db.py, `with_dispatch`):

* `_uncached_<name>(rid)`: its definition as written in analysis/sql, and
* `<name>(rid)`: a dispatch that picks, when the query is bound, either the run's cached TEMP
  table (`table(name, rid)`) or `_uncached_<name>(rid)`. The runs cached on the connection are a
  session variable (`variable(name)`, a list of run ids); DuckDB's `query()` table function
  binds only the branch the constant run id selects.

A session therefore only creates its tables and sets the variables; nothing is redefined. That
matters for speed: a macro's body is bound whenever a query uses it, so a dispatch that named both
branches in SQL (a UNION ALL pruned by the planner) still bound the whole uncached macro tree on
every read of a cached table (58 ms for run_summary where the table alone took under 1 ms), and
each redefinition bound it once more. The run id of a call must be a constant or a bound
parameter (every call in analysis/sql passes its own `rid` on), never a column of a lateral join.
"""

from __future__ import annotations

import re

#: The macros computed once per run by a session, in dependency order (each reads only earlier
#: ones).
CACHED = (
    "_match_rows",
    "clock_offsets",
    "_aligned_calls",
    "_instances",
    "collective_ranks",
    "collective_instances",
    "step_windows",
    "idle_gaps",
    "operator_compute",
    "step_overlap",
    "rank_overlap",
    "step_decomposition",
    "rank_decomposition",
    "run_summary",
    "_straggler_levels",
)

PREFIX = "_session_"


def table(name: str, rid: int) -> str:
    """The TEMP table holding run `rid`'s rows of `name` while a session caches them."""
    return f"{PREFIX}{name.lstrip('_')}_r{int(rid)}"


def variable(name: str) -> str:
    """The session variable listing the runs whose `name` is cached on the connection."""
    return f"session_runs_{name.lstrip('_')}"


def _dispatch(name: str) -> str:
    cached = f"'SELECT * FROM {PREFIX}{name.lstrip('_')}_r' || CAST(rid AS VARCHAR)"
    uncached = f"'SELECT * FROM _uncached_{name}(' || CAST(rid AS VARCHAR) || ')'"
    runs = f"coalesce(getvariable('{variable(name)}'), []::BIGINT[])"
    return (
        f"CREATE OR REPLACE TEMP MACRO {name}(rid) AS TABLE\n"
        f"SELECT * FROM query(CASE WHEN list_contains({runs}, rid)\n"
        f"    THEN {cached} ELSE {uncached} END);"
    )


def with_dispatch(text: str) -> str:
    """The SQL module `text` with each macro of CACHED it defines renamed `_uncached_<name>`
    and followed at once by its dispatch (later statements of the module may call it)."""
    for name in CACHED:
        head = re.compile(rf"^CREATE OR REPLACE TEMP MACRO {name}\(rid\) AS TABLE$", re.M)
        m = head.search(text)
        if m is None:
            continue
        end = re.compile(r";[ \t]*$", re.M).search(text, m.end())
        if end is None:
            raise ValueError(f"analysis/sql: macro {name} has no closing ';'")
        renamed = text[m.start() : end.end()].replace(
            f"MACRO {name}(rid)", f"MACRO _uncached_{name}(rid)", 1
        )
        text = f"{text[: m.start()]}{renamed}\n{_dispatch(name)}{text[end.end() :]}"
    return text
