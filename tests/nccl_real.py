"""The real NCCL logs of tests/data/nccl/ and the facts a reader wrote down for each, read from
the file's own text (the `.facts.json` beside each log, every fact with the lines that prove
it): ingest them and set what commwall's report says beside what the file says. Shared by the
tests and benchmarks/nccl_coverage.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commwall.analysis.db import load_modules
from commwall.analysis.nccl.section import nccl_section
from commwall.ingest import store

DATA = Path(__file__).resolve().parent / "data" / "nccl"
FACTS = ("versions", "nranks", "inter_node", "network", "gdr", "transports", "warnings",
         "watchdog")  # fmt: skip


@dataclass(frozen=True)
class RealLog:
    """One real log: its path and the expected facts ({name: {value, means, proof}})."""

    name: str
    path: Path
    facts: dict[str, dict[str, Any]]


def real_logs() -> list[RealLog]:
    """Every log of tests/data/nccl/ with its facts, in file order."""
    out = []
    for facts in sorted(DATA.glob("*.facts.json")):
        doc = json.loads(facts.read_text())
        out.append(RealLog(facts.name.removesuffix(".facts.json"), DATA / doc["log"], doc["facts"]))
    return out


def observed(section: dict[str, Any]) -> dict[str, Any]:
    """The facts as the report's `nccl` section gives them, named as in the facts files."""
    watchdog = []
    for c in section["timeouts"]["collectives"]:
        ranks = sorted(r for s in ("not_enqueued", "waiting", "completed") for r in c[s])
        watchdog.append({"seq": c["seq"], "op": c["op_type"], "ranks": ranks})
    inter = section["inter_node"]
    return {
        "versions": section["versions"],
        "nranks": section["ranks"]["world_size"],
        "inter_node": inter["value"],
        "network": inter["network"],
        "gdr": section["gdr"],
        "transports": sorted({t["transport"] for t in section["transports"]}),
        "warnings": section["warnings"]["count"],
        "watchdog": watchdog,
    }


def ingest_all(db: Path, logs: list[RealLog]) -> dict[str, dict[str, Any]]:
    """Ingest each log as its own run of a new store at `db`; name → its `nccl` section."""
    con = store.connect(db)
    try:
        runs = {}
        for log in logs:
            summary = store.ingest(con, log.name, [log.path])
            assert summary.committed and not summary.failed, (log.name, summary.failed)
            runs[log.name] = summary.run_id
        load_modules(con)
        return {name: nccl_section(con, rid) for name, rid in runs.items()}
    finally:
        con.close()
