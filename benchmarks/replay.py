"""What-if replay on every real multi-rank set in the repository, and its validation on pairs.

For each set (sample_traces/*: the 8-rank DLRM run and the real gloo runs; tests/data/gloo_pairs:
real runs made back to back with and without an injected straggler) this prints the measured
step (median over steps of the slowest rank's window), the unchanged replay, and every what-if.
For each pair it prints the replay of "straggler fixed" on the straggler run beside the
*measured* step of the run made without the straggler, and the error, with the figures that
say where an error comes from:

* the same what-if (the straggler rank fixed) replayed on the run *without* the straggler: what
  the what-if takes off a run with no injected delay, the rank-to-rank jitter of arrivals that
  "at the others' pace" removes too; and the prediction against it (the same question asked of
  both runs);
* how much faster the other ranks computed (median compute per step) in the straggler run than in
  the run without it: ranks that compute at the same time on one host slow each other, and in a
  straggler run the others compute while the straggler is held up;
* how much slower the other ranks' operators ran while a transfer of their own was in flight
  than while none was, in the run without the straggler (the same operator name, medians,
  weighted by time): the interference of a rank's own communication with its compute;
* how the straggler rank's own compute in the run without it compares with the others' (a rank
  slower by nature is also brought to the others' pace by "straggler fixed").

Usage:

    python benchmarks/replay.py [--sets DIR ...] [--pairs DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package

from commwall.analysis.db import open_db, run_id  # noqa: E402
from commwall.analysis.replay.engine import _load, job_step, replay, replay_section  # noqa: E402
from commwall.analysis.replay.walk import WhatIf  # noqa: E402
from commwall.ingest import discover, store  # noqa: E402

PAIRS = ROOT / "tests" / "data" / "gloo_pairs"


def kineto_sets() -> list[Path]:
    """sample_traces sets of several Kineto rank files."""
    out = []
    for d in sorted((ROOT / "sample_traces").iterdir()):
        if d.is_dir() and len(list(d.glob("*.pt.trace.json*"))) >= 2:
            out.append(d)
    return out


def ingest_all(db: Path, sets: dict[str, Path]) -> None:
    w = store.connect(db)
    for name, d in sets.items():
        store.ingest(w, name, discover.expand([str(d)]))
    w.close()


def job_measured(con, rid: int) -> float:
    """Median over steps of the slowest rank's window (the replay's statistic), ms."""
    return con.execute(
        "SELECT median(m) / 1e6 FROM (SELECT step, max(dur) AS m FROM step_windows(?) "
        "GROUP BY step)",
        [rid],
    ).fetchone()[0]


def compute_ms(con, rid: int, ranks: list[int]) -> float:
    """Median over (rank, step) of the compute time per step of `ranks` (step_decomposition), ms."""
    return con.execute(
        "SELECT median(compute_only_ns + compute_overlapped_ns) / 1e6 "
        "FROM step_decomposition(?) WHERE list_contains(?, rank)",
        [rid, ranks],
    ).fetchone()[0]


def fixed_on(con, rid: int, rank: int) -> float:
    """The job step (ms) of run `rid` replayed with `rank` at the others' pace."""
    df = replay(_load(con, rid), WhatIf("straggler_fixed", "", fixed_ranks=(rank,)))
    return job_step(df, "replayed_ns") / 1e6


def own_transfer_slowdown(con, rid: int, ranks: list[int]) -> float:
    """Over `ranks`' compute operators of run `rid`: the median duration of those that ran at
    least half inside a transfer of their own rank (an instance's last arrival to the rank's own
    end of it) against the median of those that ran outside every such transfer, operator name
    by operator name (>= 3 of each), averaged weighted by the names' time outside; minus 1."""
    return con.execute(
        """
        WITH t AS (SELECT rank, last_ts AS a, te AS b FROM replay_calls(?) WHERE te > last_ts),
        ops AS (
            SELECT x.rank, x.name, x.ts - coalesce(o.offset_ns, 0) AS ts, x.dur
            FROM activities x LEFT JOIN rank_offsets(?) o ON o.rank = x.rank
            WHERE x.run_id = ? AND x.kind = 'compute' AND x.dur > 0
              AND list_contains(?, x.rank)
        ),
        f AS (
            SELECT ops.rank, ops.name, ops.dur,
                coalesce(sum(least(ops.ts + ops.dur, t.b) - greatest(ops.ts, t.a))
                         FILTER (WHERE t.a IS NOT NULL), 0) / ops.dur AS inside
            FROM ops LEFT JOIN t ON t.rank = ops.rank AND t.a < ops.ts + ops.dur AND t.b > ops.ts
            GROUP BY ops.rank, ops.name, ops.ts, ops.dur
        ),
        by_name AS (
            SELECT rank, name,
                median(dur) FILTER (WHERE inside >= 0.5) AS d_in,
                median(dur) FILTER (WHERE inside = 0) AS d_out,
                sum(dur) FILTER (WHERE inside = 0) AS w
            FROM f GROUP BY rank, name
            HAVING count(*) FILTER (WHERE inside >= 0.5) >= 3
               AND count(*) FILTER (WHERE inside = 0) >= 3
        )
        SELECT sum(d_in / d_out * w) / sum(w) - 1 FROM by_name
        """,
        [rid, rid, rid, ranks],
    ).fetchone()[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", nargs="*", type=Path, help="directories of rank files (one run each)")
    p.add_argument("--pairs", type=Path, default=PAIRS, help="directory of pairs (--pair output)")
    args = p.parse_args(argv)
    sets = {d.name: d for d in (args.sets or kineto_sets())}
    pairs = sorted(d for d in args.pairs.iterdir() if d.is_dir()) if args.pairs.exists() else []
    for d in pairs:
        sets[f"{d.name}/straggler"] = d / "straggler"
        sets[f"{d.name}/baseline"] = d / "baseline"
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "replay.duckdb"
        t0 = time.perf_counter()
        ingest_all(db, sets)
        con = open_db(db)
        print(f"ingested {len(sets)} runs in {time.perf_counter() - t0:.1f} s\n")
        print(f"{'run':42s} {'measured':>9s} {'replayed':>9s}  what-ifs (step ms, saving %)")
        for name in sets:
            t = time.perf_counter()
            r = replay_section(con, run_id(con, name))
            if not r["available"]:
                print(f"{name:42s} not available: {r['reason']}")
                continue
            ws = ", ".join(f"{w['key']} {w['step_ms']:.1f} ({w['saving_pct']:.0f}%)"
                           for w in r["whatifs"])  # fmt: skip
            print(
                f"{name:42s} {r['measured_step_ms']:9.2f} {r['replayed_step_ms']:9.2f}  {ws}"
                f"  [{time.perf_counter() - t:.2f} s]"
            )
        if pairs:
            print("\nValidation: 'straggler fixed' replayed on the straggler run vs the run made"
                  " without it (same job, back to back)")  # fmt: skip
            print(f"{'pair':28s} {'straggler run':>14s} {'predicted':>10s} {'measured':>9s} "
                  f"{'error':>7s} {'saving':>7s} {'injected':>9s} {'on base':>8s} {'vs it':>7s} {'jitter':>7s} "
                  f"{'others':>7s} {'in xfer':>8s} {'own':>6s}")  # fmt: skip
            errs = []
            for d in pairs:
                truth = json.loads((d / "straggler" / "ground_truth.json").read_text())
                r = replay_section(con, run_id(con, f"{d.name}/straggler"))
                fix = next(w for w in r["whatifs"] if w["key"] == "straggler_fixed")
                base = job_measured(con, run_id(con, f"{d.name}/baseline"))
                err = (fix["step_ms"] - base) / base
                injected = sorted(truth["injected_delay_ms"])[len(truth["injected_delay_ms"]) // 2]
                s_rank = truth["straggler_rank"]
                others = [k for k in range(truth["world_size"]) if k != s_rank]
                srid, brid = run_id(con, f"{d.name}/straggler"), run_id(con, f"{d.name}/baseline")
                b_others = compute_ms(con, brid, others)
                faster = compute_ms(con, srid, others) / b_others - 1
                own = compute_ms(con, brid, [s_rank]) / b_others - 1
                on_base = fixed_on(con, brid, s_rank)
                errs.append((abs(err), abs(fix["step_ms"] / on_base - 1)))
                slow = own_transfer_slowdown(con, brid, others)
                slow_txt = f"{100 * slow:+7.0f}%" if slow is not None else f"{'n/a':>8s}"
                print(
                    f"{d.name:28s} {r['measured_step_ms']:14.2f} {fix['step_ms']:10.2f} "
                    f"{base:9.2f} {100 * err:+6.1f}% {fix['saving_ms']:7.1f} {injected:9.1f} "
                    f"{on_base:8.2f} {100 * (fix['step_ms'] / on_base - 1):+6.1f}% "
                    f"{100 * (on_base / base - 1):+6.1f}% "
                    f"{100 * faster:+6.0f}% {slow_txt} {100 * own:+5.0f}%  "
                    f"(straggler rank {truth['straggler_rank']}, fixed {r['fixed_ranks']})"
                )
            n_in = [sum(e[i] <= 0.10 for e in errs) for i in (0, 1)]
            print(f"largest |error|: {100 * max(e[0] for e in errs):.1f}%; within 10 %: "
                  f"{n_in[0]} of {len(errs)} against the measured step, {n_in[1]} of {len(errs)} "
                  "against the same what-if on the run without the straggler")  # fmt: skip
            print("on base: the same what-if replayed on the run without the straggler; vs it: the "
                  "prediction against that; jitter: "
                  "that against its measured step; others: the other ranks' compute per step in "
                  "the straggler run against the run without it; in xfer: their operators while "
                  "a transfer of their own ran against outside (run without the straggler); own: "
                  "the straggler rank's compute against the others' in the run without it")  # fmt: skip
        con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
