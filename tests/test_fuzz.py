"""A short fuzz run (tests/fuzzing.py) over mutated real seeds of every format, bounded to about
a minute: no crash, no hang, no native crash; and the harness itself tells those apart. The long
run is `benchmarks/fuzz.py --inputs N`."""

from __future__ import annotations

import time
from pathlib import Path

from commwall.ingest.formats import registry as formats
from tests import fuzzing


def test_short_fuzz_run_finds_no_crash_nor_hang(tmp_path: Path) -> None:
    stats = fuzzing.campaign(
        400, seed=20, timeout_s=30, budget_s=40, keep=tmp_path, report_rate=0.1
    )
    assert stats.crashes == stats.hangs == stats.native == 0, stats.examples
    assert stats.section_failures == 0, stats.examples
    assert stats.tried >= 10 and stats.rejected > 0 and stats.accepted > 0, stats.line()


def test_several_workers_run_every_input() -> None:
    stats = fuzzing.campaign(12, seed=5, timeout_s=30, report_rate=0.0, workers=2)
    assert stats.tried == stats.rejected + stats.accepted == 12, stats.line()


def test_an_exception_is_a_crash_an_ingest_error_a_rejection(tmp_path, monkeypatch) -> None:
    good = tmp_path / "fr_rank0.json"
    good.write_bytes(dict(fuzzing.seeds())["fr_rank0.json"])
    assert fuzzing.run_one(good)["outcome"] == "accepted"
    bad = tmp_path / "bad_rank0.json"
    bad.write_bytes(b'{"traceEvents": 3}')
    assert fuzzing.run_one(bad) == {"outcome": "rejected"}

    def broken(path, opts=None):  # noqa: ANN001, ANN202
        raise KeyError("bug")

    monkeypatch.setattr(formats, "parse", broken)
    out = fuzzing.run_one(good)
    assert out["outcome"] == "crash" and "KeyError" in out["where"]


def test_the_guard_tells_hangs_and_native_crashes(tmp_path: Path) -> None:
    worker = fuzzing._Worker()
    try:
        hang = tmp_path / fuzzing.SELF_TEST_HANG  # computes: a hang after 2 s of CPU
        hang.write_bytes(b"")
        t = time.monotonic()
        assert worker.run(hang, 2, False)["outcome"] == "hang"
        hang_s = time.monotonic() - t
        worker = fuzzing._Worker()
        stuck = tmp_path / fuzzing.SELF_TEST_STUCK  # waits: a hang after WALL_FACTOR x 1 s
        stuck.write_bytes(b"")
        t = time.monotonic()
        out = worker.run(stuck, 1, False)
        assert out["outcome"] == "hang" and out["cpu_s"] < 1, out
        assert time.monotonic() - t >= fuzzing.WALL_FACTOR
        assert hang_s >= 2
        worker = fuzzing._Worker()
        die = tmp_path / fuzzing.SELF_TEST_DIE
        die.write_bytes(b"")
        out = worker.run(die, 30, False)
        assert out["outcome"] == "native" and "-11" in out["where"]
    finally:
        worker.close()
