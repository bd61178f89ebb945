"""The run's analysis session (analysis/report/session.py) changes how often the heavy macros run, never
their answers: every cached macro gives the same rows inside a session as outside, another run
of the store is unaffected, sessions nest, and the macros are restored on exit. The what-if
replay of a run with more calls than its budget replays evenly spaced steps."""

from __future__ import annotations

import contextlib

import pandas as pd
import pytest
from conftest import memory_store
from synthetic_traces import Scenario, insert_run, simulate

from commwall.analysis.db import defined_macros, has_macro
from commwall.analysis.replay import engine as replay
from commwall.analysis.report.session import CACHED, run_session

RUNS = {
    "a": Scenario(hosts=2, ranks_per_host=3, steps=4, straggler=4, clock_offsets_us=(0, 900.0)),
    "b": Scenario(hosts=3, ranks_per_host=2, steps=3, mode="late", straggler=1, seed=2),
}


@pytest.fixture(scope="module")
def con():
    c = memory_store()
    for name, scn in RUNS.items():
        insert_run(c, name, simulate(scn))
    return c


def rows(con, macro: str, rid: int) -> pd.DataFrame:
    return con.execute(f"SELECT * FROM {macro}(?) ORDER BY ALL", [rid]).df()


@pytest.fixture(scope="module")
def before(con):
    """`rows` of a macro for a run computed with no session open, once per module: the answer
    each test compares a session's with (an uncached macro is slow to plan)."""
    memo: dict[tuple[str, int], pd.DataFrame] = {}

    def get(macro: str, rid: int) -> pd.DataFrame:
        if (macro, rid) not in memo:
            assert session_state(con) == (0, [])  # the macro as written, nothing cached
            memo[macro, rid] = rows(con, macro, rid)
        return memo[macro, rid]

    return get


def definitions(con) -> dict[str, str]:
    q = "SELECT function_name, macro_definition FROM duckdb_functions() WHERE function_name = ?"
    return {m: con.execute(q, [m]).fetchone()[1] for m in CACHED}


def each_macro(con, rids) -> dict[str, dict[int, pd.DataFrame | Exception]]:
    """`rows` of every cached macro for each run of `rids`; an error is kept as the answer (the
    test of that macro raises it)."""
    out: dict[str, dict[int, pd.DataFrame | Exception]] = {}
    for macro in CACHED:
        out[macro] = {}
        for rid in rids:
            try:
                out[macro][rid] = rows(con, macro, rid)
            except Exception as e:  # noqa: BLE001  (raised by the test of this macro)
                out[macro][rid] = e
    return out


@pytest.fixture(scope="module")
def nested(con, before):
    """What every cached macro answers at each point of these nested sessions: run 1 cached;
    runs 1 and 2 cached (run 1's session entered again inside); run 1 cached after run 2's
    session is left. The sessions are entered once for all the macros (a session caches every
    macro of CACHED), each answer compared by the test of its macro."""
    for macro in CACHED:  # the answers without a session first (one failing: its test says so)
        for rid in (1, 2):
            with contextlib.suppress(Exception):
                before(macro, rid)
    seen: dict = {}
    with run_session(con, 1) as cached:
        seen["cached"] = cached
        seen["in_1"] = each_macro(con, (1, 2))
        with run_session(con, 2) as inner, run_session(con, 1) as again:
            seen["inner"], seen["again"] = inner, again
            seen["in_both"] = each_macro(con, (1, 2))
        seen["after_2"] = each_macro(con, (2,))
    return seen


def answer(got: pd.DataFrame | Exception) -> pd.DataFrame:
    if isinstance(got, Exception):
        raise got
    return got


@pytest.mark.parametrize("macro", CACHED)
def test_cached_macros_answer_as_without_a_session(before, nested, macro):
    assert len(before(macro, 1)) > 0 and len(before(macro, 2)) > 0
    assert macro in nested["cached"]  # with run_session(con, 1)
    for rid in (1, 2):  # run 2 is not cached: its answer comes from the original macro
        pd.testing.assert_frame_equal(answer(nested["in_1"][macro][rid]), before(macro, rid))
    # with run_session(con, 2) as inner, run_session(con, 1) as again (inside run 1's)
    assert macro in nested["inner"] and nested["again"] == []  # run 1 is cached already
    for rid in (1, 2):
        pd.testing.assert_frame_equal(answer(nested["in_both"][macro][rid]), before(macro, rid))
    # run 2's session left, run 1's still open
    pd.testing.assert_frame_equal(answer(nested["after_2"][macro][2]), before(macro, 2))


def session_state(con) -> tuple[int, list[str]]:
    """(TEMP tables of a session, the session variables set) on the connection."""
    tables = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_session_%'"
    ).fetchone()[0]
    q = "SELECT name FROM duckdb_variables() WHERE starts_with(name, 'session_runs_')"
    variables = [n for (n,) in con.execute(q).fetchall()]
    return tables, variables


def test_nothing_redefined_and_nothing_left_on_exit(con):
    original = definitions(con)
    assert session_state(con) == (0, [])
    with run_session(con, 1):
        assert definitions(con) == original  # the dispatch reads the run's list, not new SQL
        tables, variables = session_state(con)
        assert tables >= len(CACHED) and len(variables) == len(CACHED)
        with run_session(con, 2):
            assert session_state(con)[0] >= 2 * len(CACHED)
        assert session_state(con) == (tables, variables)  # run 2's tables gone, run 1's kept
    assert definitions(con) == original
    assert session_state(con) == (0, [])


def test_a_session_of_a_run_without_rows_answers_nothing_and_leaves_others(con, before):
    was = before("collective_ranks", 1)
    with run_session(con, 99) as cached:  # no such run: every macro answers with no rows
        assert set(cached) <= set(CACHED)
        assert con.execute("SELECT count(*) FROM collective_ranks(99)").fetchone()[0] == 0
        pd.testing.assert_frame_equal(rows(con, "collective_ranks", 1), was)


def test_sample_steps_all_when_within_budget_else_evenly_spaced():
    per_step = {s: 100 for s in range(10)}
    assert replay._sample_steps(per_step, budget=1000) == set(range(10))
    picked = sorted(replay._sample_steps(per_step, budget=300))  # room for 3 steps of 100
    assert len(picked) == 3 and picked[0] >= 1 and picked[-1] <= 8
    assert min(b - a for a, b in zip(picked, picked[1:], strict=False)) >= 3  # spread out
    assert len(replay._sample_steps(per_step, budget=10)) == 1  # never none


def test_replay_of_a_sampled_run_uses_only_the_sample(con, monkeypatch):
    with run_session(con, 1):  # the run's tables once for both replays, as a report does
        full = replay.replay_section(con, 1)
        assert full["steps_replayed"] == full["steps_total"] == RUNS["a"].steps
        # 6 ranks x 6 collectives per step = 36 calls a step; room for 2 of the 4 steps
        monkeypatch.setattr(replay, "MAX_REPLAY_CALLS", 2 * 36)
        part = replay.replay_section(con, 1)
    assert part["steps_replayed"] == 2 and part["steps_total"] == RUNS["a"].steps
    assert {w["key"] for w in part["whatifs"]} == {w["key"] for w in full["whatifs"]}


@pytest.mark.parametrize(
    ("names", "defined"),
    [
        (["run_summary", "no_such_macro"], {"run_summary"}),  # one there, one not
        (["no_such_macro"], set()),
        ([], set()),
        (list(CACHED), set(CACHED)),  # every cached macro is loaded on a store's connection
    ],
)
def test_defined_macros_looks_up_all_names_at_once(con, names, defined):
    assert defined_macros(con, names) == defined
    assert [has_macro(con, n) for n in names] == [n in defined for n in names]


def test_a_session_of_some_macros_caches_only_those(con, before):
    was, original = before("collective_ranks", 1), definitions(con)
    some = ("clock_offsets", "collective_ranks", "no_such_macro")
    with run_session(con, 1, some) as cached:
        assert cached == ["clock_offsets", "collective_ranks"]  # in CACHED's order
        pd.testing.assert_frame_equal(rows(con, "collective_ranks", 1), was)
    assert definitions(con) == original
