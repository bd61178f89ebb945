"""How well the calibrated α-β model predicts collectives it did not see, on every real trace
set in the repository with cross-rank transfer times.

Each set is ingested into a temporary store; its usable matched collectives (seen on >= 2
ranks, known size, positive transfer time: analysis.model.calibrate.usable) are grouped per
(op, ranks). Three predictors are scored on the same rows:

* calibrated: the regime fit of analysis.model.regimes (what the report's `model` section
  fits), trained without the rows it predicts;
* NCCL: NCCL's own tuning model on the run's topology (analysis.model.nccl_run), uncalibrated,
  for NCCL runs whose GPU and links are known (n/a otherwise, e.g. gloo on CPUs);
* size-blind: the median transfer time of the op's training rows.

Two protocols: leave-one-out (LOO; 10-fold above 60 rows) and a chronological split (fit the
first half of the instances in start order, predict the second half). The score is the
absolute percentage error |predicted − measured| / measured; median and p90 are printed.
Usage:

    python benchmarks/model_accuracy.py [--dirs DIR ...] [--format text|json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package

from analysis.db import open_db  # noqa: E402
from analysis.model.calibrate import regime_predictor, usable  # noqa: E402
from analysis.model.hardware import intra_node_link  # noqa: E402
from analysis.model.heldout import cross_validated_ape, split_ape, summary  # noqa: E402
from analysis.model.nccl_run import nccl_times, run_topo  # noqa: E402
from analysis.model.section import matched_instances, topology_facts  # noqa: E402
from ingest import store  # noqa: E402
from ingest.errors import IngestError  # noqa: E402

#: Directories searched for trace sets (each subdirectory one run).
SEARCH = (
    ROOT / "sample_traces",
    ROOT / "tests" / "data" / "kineto",
    ROOT / "tests" / "data" / "nsys",
)


def trace_sets(d: Path) -> list[tuple[str, list[Path]]]:
    """The runs of directory `d`: its Kineto files together, each Nsight export on its own
    (one export already holds every GPU of its run)."""
    files = sorted(d.iterdir())
    kineto = [f for f in files if ".json" in f.name and f.name != "ground_truth.json"]
    nsys = [(f"{d.name}/{f.name.split('.')[0]}", [f]) for f in files if ".sqlite" in f.name]
    return ([(d.name, kineto)] if kineto else []) + nsys


def _local(f: Path, tmp: Path) -> Path:
    """`f`, or its decompressed copy in `tmp` for a gzipped Nsight export."""
    if not f.name.endswith(".sqlite.gz"):
        return f
    dest = tmp / f.name.removesuffix(".gz")
    with gzip.open(f, "rb") as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return dest


def size_blind(s: np.ndarray, t: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The median of the training times, whatever the size."""
    med = float(np.median(t))
    return lambda x: np.full(len(x), med)


def _labelled(labels: np.ndarray, sizes: np.ndarray) -> Callable:
    """A fitter for rows of `sizes` with protocol `labels` (the training rows' labels are found
    by their sizes; a size runs one protocol)."""
    by_size = dict(zip(sizes, labels, strict=True))
    return lambda s, t: regime_predictor(s, t, np.array([by_size[x] for x in s], dtype=object))


def score(rows, nccl_topo) -> dict:
    """LOO and chronological-split errors of the three predictors on one (op, n)'s rows."""
    rows = rows.sort_values("first_start_ns", kind="stable")
    s, t = rows["bytes"].to_numpy(float), rows["time_s"].to_numpy(float)
    op = rows["op"].iloc[0]
    nccl = None
    if not isinstance(nccl_topo, str):
        pred, _ = nccl_times(nccl_topo, op, s)
        if np.isfinite(pred).all():
            nccl = np.abs(pred - t) / t
    half = int(round(len(s) / 2))
    out = {}
    labels = rows["protocol"].to_numpy(dtype=object)
    if any(x is None or x != x for x in labels):
        labels = None  # not every row says which protocol ran: regimes from the sizes
    calibrated = regime_predictor if labels is None else _labelled(labels, s)
    for name, fitter in (("calibrated", calibrated), ("size-blind", size_blind)):
        out[name] = {
            "loo": summary(cross_validated_ape(s, t, fitter)),
            "split": summary(split_ape(s, t, fitter)),
        }
    out["NCCL"] = (
        {"loo": summary(nccl), "split": summary(nccl[half:])}
        if nccl is not None
        else {
            "loo": None,
            "split": None,
            "why": nccl_topo
            if isinstance(nccl_topo, str)
            else "NCCL's model does not cover this op",
        }
    )
    return out


def measure(name: str, files: list[Path]) -> list[dict]:
    """One result per (op, n) of the run made of `files` with >= 3 usable rows."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.duckdb"
        con = store.connect(path)
        try:
            store.ingest(con, "run", [_local(f, Path(tmp)) for f in files])
        except IngestError as e:
            print(f"skipped {name}: {e}", file=sys.stderr)
            return []
        finally:
            con.close()
        con = open_db(path, read_only=True)
        rid = con.execute("SELECT run_id FROM runs").fetchone()[0]
        df = matched_instances(con, rid)
        facts = topology_facts(con, rid)
        con.close()
    u = usable(df)
    out = []
    for (op, n), g in u.groupby(["op", "n"]):
        if len(g) < 3:
            continue
        topo = run_topo(facts, intra_node_link(facts.get("gpu")), None, int(n))
        out.append(
            {
                "set": name,
                "op": op,
                "n_ranks": int(n),
                "rows": len(g),
                "sizes": int(g["bytes"].nunique()),
                **score(g, topo),
            }
        )
    return out


def _pct(x: dict | None, key: str) -> str:
    return "n/a" if not x or x[key] is None else f"{100 * x[key]:.1f}"


def render(results: list[dict]) -> str:
    """A markdown table: median / p90 APE (%) per predictor and protocol."""
    head = (
        "| set | op | ranks | rows | sizes | protocol | calibrated median / p90 | "
        "NCCL median / p90 | size-blind median / p90 |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in results:
        for proto, label in (("loo", "LOO"), ("split", "chronological")):
            cells = [
                f"{_pct(r[k][proto], 'median')} / {_pct(r[k][proto], 'p90')}"
                for k in ("calibrated", "NCCL", "size-blind")
            ]
            lines.append(
                f"| {r['set']} | {r['op']} | {r['n_ranks']} | {r['rows']} | "
                f"{r['sizes']} | {label} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dirs", nargs="*", type=Path, help="trace sets (default: the repository's)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    args = ap.parse_args()
    dirs = args.dirs or [d for base in SEARCH for d in sorted(base.iterdir()) if d.is_dir()]
    results = [r for d in dirs for name, files in trace_sets(d) for r in measure(name, files)]
    print(json.dumps(results, indent=1) if args.format == "json" else render(results))


if __name__ == "__main__":
    main()
