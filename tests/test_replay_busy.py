"""The replay's busy time read only over the time it replays (replay_busy_within) against the
whole run's (replay_busy, the peer): the idle time of every [a, b) inside a rank's range is the
same, a rank idle over its whole range stays known, and on a real set whose every step is
replayed the loaded steps are identical."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES

from commwall.analysis.db import open_db, run_id
from commwall.analysis.replay import engine as replay
from commwall.analysis.replay.chain import BusyTime
from commwall.ingest import discover, store

GLOO = SAMPLES / "gloo_4rank_sleep"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    db = tmp_path_factory.mktemp("busy") / "s.duckdb"
    w = store.connect(db)
    store.ingest(w, GLOO.name, discover.expand([str(GLOO)]))
    w.close()
    c = open_db(db)
    yield c
    c.close()


def busy_of(df: pd.DataFrame) -> BusyTime:
    return BusyTime(df)


def idle(busy: BusyTime, rank: int, a, b) -> np.ndarray:
    a, b = np.atleast_1d(np.asarray(a, np.int64)), np.atleast_1d(np.asarray(b, np.int64))
    return busy.idle(np.full(len(a), rank, np.int64), a, b)


def test_idle_inside_the_ranges_is_the_whole_runs(con):
    rid = run_id(con, GLOO.name)
    full = busy_of(con.execute("SELECT * FROM replay_busy(?)", [rid]).df())
    wins = con.execute("SELECT * FROM replay_windows(?)", [rid]).df()
    rng = np.random.default_rng(3)
    spans = wins.groupby("rank").agg(lo=("ts", "min"), hi=("ts", "max"))
    for _ in range(6):  # ranges cutting through activities anywhere in the run
        cuts = np.sort(rng.integers(spans["lo"], spans["hi"], (2, len(spans))), axis=0)
        ranges = pd.DataFrame({"rank": spans.index, "lo": cuts[0], "hi": cuts[1]})
        con.register("ranges_t", ranges)
        part = busy_of(con.execute("SELECT * FROM replay_busy_within(?, ranges_t)", [rid]).df())
        con.unregister("ranges_t")
        assert part.ranks.tolist() == full.ranks.tolist()
        for r, lo, hi in ranges.itertuples(index=False):
            points = np.sort(rng.integers(lo, hi + 1, 40))
            a, b = points[:-1], points[1:]
            assert (idle(part, r, a, b) == idle(full, r, a, b)).all()
            assert idle(part, r, lo, hi) == idle(full, r, lo, hi)


def test_a_rank_without_activity_in_its_range_is_all_idle(con):
    rid = run_id(con, GLOO.name)
    q = "SELECT min(ts) FROM replay_busy(?) WHERE rank = 0"
    first = con.execute(q, [rid]).fetchall()[0][0]
    # a range ending 10 µs before the rank's first activity: nothing is busy in it
    ranges = pd.DataFrame({"rank": [0], "lo": [first - 20_000], "hi": [first - 10_000]})
    con.register("ranges_t", ranges)
    part = busy_of(con.execute("SELECT * FROM replay_busy_within(?, ranges_t)", [rid]).df())
    con.unregister("ranges_t")
    assert idle(part, 0, first - 20_000, first - 10_000) == 10_000


def test_loaded_steps_equal_those_from_the_whole_busy_time(con, monkeypatch):
    rid = run_id(con, GLOO.name)
    got = replay._load_steps(con, rid)

    def whole(c, r, wins, calls):  # the peer: every rank's busy time over the whole run
        return busy_of(c.execute("SELECT * FROM replay_busy(?)", [r]).df())

    monkeypatch.setattr(replay, "_busy", whole)
    want = replay._load_steps(con, rid)
    assert got[1] == want[1]
    for f in dataclasses.fields(got[0]):
        assert np.array_equal(getattr(got[0], f.name), getattr(want[0], f.name)), f.name
    assert (got[0].idle > 0).any()
