"""How much of real NCCL logs commwall understands: over every real log in tests/data/nccl/,
the share of NCCL lines recognised, and per fact (version, ranks, inter-node, network, GPU
Direct RDMA, transports, warnings, watchdog timeouts) how often the report agrees with what a
reader found in the file (the `.facts.json` beside each log). Lines not understood are
listed by family.

    python benchmarks/nccl_coverage.py            # summary and per-file table
    python benchmarks/nccl_coverage.py --misses   # also every disagreeing fact
    python benchmarks/nccl_coverage.py --families 20   # the 20 biggest unknown families

Exit status 1 when a fact disagrees or fewer than 98 % of NCCL lines are recognised.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from nccl_real import FACTS, ingest_all, observed, real_logs  # noqa: E402

GOAL = 0.98


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--misses", action="store_true", help="print every disagreeing fact")
    ap.add_argument("--families", type=int, default=10, help="unknown families to list")
    args = ap.parse_args(argv)
    logs = real_logs()
    with tempfile.TemporaryDirectory() as d:
        sections = ingest_all(Path(d) / "coverage.duckdb", logs)
    agree: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    families: Counter[str] = Counter()
    misses = []
    nccl = recognised = 0
    print(f"{'log':<62} {'NCCL lines':>10} {'understood':>10}  facts")
    for log in logs:
        s = sections[log.name]
        lines, seen = s["lines"], observed(s)
        nccl += lines["nccl"]
        recognised += lines["recognised"]
        for f in lines["unknown_families"]:
            families[f"{f['kind']}: {f['family']}"] += f["count"]
        right = 0
        for fact, want in log.facts.items():
            asked[fact] += 1
            if seen[fact] == want["value"]:
                agree[fact] += 1
                right += 1
            else:
                misses.append((log.name, fact, want["value"], seen[fact]))
        share = lines["recognised"] / lines["nccl"] if lines["nccl"] else 1.0
        print(f"{log.name[:62]:<62} {lines['nccl']:>10,} {share:>10.1%}  {right}/{len(log.facts)}")
    print(f"\nNCCL lines recognised: {recognised:,} of {nccl:,} = {recognised / nccl:.2%} "
          f"(goal {GOAL:.0%}) in {len(logs)} logs")  # fmt: skip
    print("facts agreeing with the files:")
    for fact in FACTS:
        if asked[fact]:
            print(f"  {fact:<12} {agree[fact]:>3} of {asked[fact]:>3}")
    print(f"  {'all':<12} {sum(agree.values()):>3} of {sum(asked.values()):>3}")
    if args.families and families:
        print(f"largest families of lines not understood (of {sum(families.values()):,}):")
        for family, n in families.most_common(args.families):
            print(f"  {n:>6,}  {family}")
    if args.misses:
        for name, fact, want, got in misses:
            print(f"MISS {name} {fact}: file says {want!r}, report says {got!r}")
    return 0 if not misses and recognised >= GOAL * nccl else 1


if __name__ == "__main__":
    raise SystemExit(main())
