"""How well the calibrated α-β model predicts collectives it did not see, on every real trace
set in the repository with cross-rank transfer times.

Each set is ingested into a temporary store; its usable matched collectives (seen on >= 2
ranks, known size, positive transfer time: analysis.model.calibrate.usable) are grouped per
(op, ranks). Three predictors are scored on the same rows and the same folds:

* calibrated: the regime fit of analysis.model.regimes (what the report's `model` section
  fits), trained without the rows it predicts;
* NCCL: NCCL's own tuning model on the run's topology (analysis.model.nccl_run), uncalibrated,
  for NCCL runs whose GPU and links are known (n/a otherwise, e.g. gloo on CPUs);
* size-blind: the median transfer time of the op's training rows.

Four held-out protocols: LOO (leave-one-row-out; 10-fold above 60 rows), by step (a training
step held out whole, so rows sharing one step's conditions never sit on both sides; rows alone
when the set has fewer than 3 steps), chronological (fit the first half of the steps, predict
the rest; the first half of the rows in start order without steps) and by size (every row of
one message size held out together: the extrapolation to an unseen size that an α-β model is
for; sets with >= 3 sizes). The score is the absolute percentage error
|predicted − measured| / measured; median and p90 are printed, with the difference of the
medians (calibrated − size-blind) and its 95 % bootstrap interval (whole steps resampled), and
the median error factor exp(median |log(predicted / measured)|), which does not reward
predicting low as the percentage error does. `floor` is the lowest median percentage error any
prediction from the message size alone can reach on the rows, even fitted on them
(analysis.model.heldout.size_only_floor): above the 10 % goal, no size-based model can meet it.
Real fabrics (`--only fabrics`): every nccl-tests table in tests/data/nccl_tests and the p4d
table after NCCL log 006, read through the normal ingest, one store per fabric group (the files
of one cluster: the six A100 NVSwitch files, the 10-node H100 files with 1, 2 and 8 GPUs per node,
the 1-node H100 files, each EFA file), scored by analysis.fabric.compare: the model without the
size it predicts (leave one size out), calibrated on another op of the same fabric (cross-op),
on another GPU count of the same nodes (cross-count), NCCL's model uncalibrated (where the
topology is known: within one node) and the single α-β line; median and p90 of the absolute
percentage error. `--write-docs` rewrites the marked accuracy block of docs/model.md with it.
Usage:

    python benchmarks/model_accuracy.py [--dirs DIR ...] [--only all|traces|fabrics]
                                        [--format text|json] [--write-docs]
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
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not benchmarks/, whose ingest.py would shadow the ingest package

from commwall.analysis.db import load_modules, open_db, run_id  # noqa: E402
from commwall.analysis.fabric.section import fabric_json  # noqa: E402
from commwall.analysis.model.calibrate import regime_predictor, usable  # noqa: E402
from commwall.analysis.model.hardware import intra_node_link  # noqa: E402
from commwall.analysis.model.heldout import (  # noqa: E402
    ape,
    folds,
    method,
    size_blind,
    size_only_floor,
    summary,
)
from commwall.analysis.model.nccl_run import nccl_times, run_topo  # noqa: E402
from commwall.analysis.model.section import matched_instances, topology_facts  # noqa: E402
from commwall.ingest import store  # noqa: E402
from commwall.ingest.errors import IngestError  # noqa: E402

#: Directories searched for trace sets (each subdirectory one run).
SEARCH = (
    ROOT / "sample_traces",
    ROOT / "tests" / "data" / "kineto",
    ROOT / "tests" / "data" / "nsys",
    ROOT / "tests" / "data" / "model",
)
#: The accuracy goal of the calibrated model (median APE) on sets with >= GOAL_ROWS rows.
GOAL_APE, GOAL_ROWS = 0.10, 10
BOOTSTRAP = 2000


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


def _labelled(labels: np.ndarray, sizes: np.ndarray) -> Callable:
    """A fitter for rows of `sizes` with protocol `labels` (the training rows' labels are found
    by their sizes; a size runs one protocol)."""
    by_size = dict(zip(sizes, labels, strict=True))
    return lambda s, t: regime_predictor(s, t, np.array([by_size[x] for x in s], dtype=object))


def chronological(rows: pd.DataFrame) -> np.ndarray:
    """Whether each row (in start order) is in the second, predicted half: the later half of
    the steps, or of the rows when fewer than 2 steps are known."""
    steps = rows["step"].dropna().unique()  # in order of first appearance
    if len(steps) >= 2:
        later = set(steps[int(round(len(steps) / 2)) :])
        return rows["step"].isin(later).to_numpy()
    k = int(round(len(rows) / 2))
    return np.arange(len(rows)) >= k


def held_out(s: np.ndarray, t: np.ndarray, fitter: Callable, test: list[np.ndarray]) -> np.ndarray:
    """Predictions of every row in one of the `test` folds by `fitter` trained on the other
    rows (NaN elsewhere, and where the training rows cannot be fitted)."""
    out = np.full(len(s), np.nan)
    for rows in test:
        train = np.setdiff1d(np.arange(len(s)), rows)
        try:
            out[rows] = fitter(s[train], t[train])(s[rows])
        except ValueError:
            continue
    return out


def protocols(rows: pd.DataFrame) -> dict[str, tuple[str, list[np.ndarray]]]:
    """The held-out folds of each protocol, with what it did in words."""
    n, s = len(rows), rows["bytes"].to_numpy(float)
    steps = rows["step"].to_numpy(dtype=object)
    later = np.flatnonzero(chronological(rows))
    out = {
        "loo": (method(n), folds(n)),
        "step": (method(n, steps), folds(n, groups=steps)),
        "chronological": ("first half of the steps", [later]),
    }
    if len(np.unique(s)) >= 3:
        out["size"] = ("leave-one-size-out", [np.flatnonzero(s == v) for v in np.unique(s)])
    return out


def errors_summary(pred: np.ndarray, t: np.ndarray) -> dict:
    """median / p90 APE and the median error factor of the finite predictions."""
    ok = np.isfinite(pred) & (pred > 0)
    out = summary(np.where(ok, ape(pred, t), np.nan))
    out["factor"] = float(np.exp(np.median(np.abs(np.log(pred[ok] / t[ok]))))) if ok.any() else None
    return out


def gap(a: np.ndarray, b: np.ndarray, steps: np.ndarray) -> dict:
    """median(a) − median(b) of paired errors and its 95 % bootstrap interval (whole steps
    resampled when there are >= 3 steps, else rows; seeded); None below 5 pairs."""
    ok = np.isfinite(a) & np.isfinite(b)
    a, b, steps = a[ok], b[ok], steps[ok]
    if len(a) < 5:  # too few pairs for an interval
        return {"delta": None, "lo": None, "hi": None}
    ids = pd.factorize(pd.Series(steps, dtype=object))[0]
    if len(set(ids)) < 3 or (ids < 0).any():
        ids = np.arange(len(a))
    members = [np.flatnonzero(ids == k) for k in np.unique(ids)]
    rng = np.random.default_rng(0)
    deltas = []
    for _ in range(BOOTSTRAP):
        pick = np.concatenate([members[i] for i in rng.integers(0, len(members), len(members))])
        deltas.append(np.median(a[pick]) - np.median(b[pick]))
    lo, hi = np.percentile(deltas, [2.5, 97.5])
    return {"delta": float(np.median(a) - np.median(b)), "lo": float(lo), "hi": float(hi)}


def score(rows: pd.DataFrame, nccl_topo) -> dict:
    """Every protocol's errors of the three predictors on one (op, n)'s rows."""
    rows = rows.sort_values("first_start_ns", kind="stable").reset_index(drop=True)
    s, t = rows["bytes"].to_numpy(float), rows["time_s"].to_numpy(float)
    op = rows["op"].iloc[0]
    nccl = None
    if not isinstance(nccl_topo, str):
        pred, _ = nccl_times(nccl_topo, op, s)
        if np.isfinite(pred).all():
            nccl = np.asarray(pred, float)
    labels = rows["protocol"].to_numpy(dtype=object)
    if any(x is None or x != x for x in labels):
        labels = None  # not every row says which protocol ran: regimes from the sizes
    fitters = {
        "calibrated": regime_predictor if labels is None else _labelled(labels, s),
        "size-blind": size_blind,
    }
    steps = rows["step"].to_numpy(dtype=object)
    out: dict = {"floor": size_only_floor(s, t), "protocols": {}}
    for name, (how, test) in protocols(rows).items():
        scored = np.zeros(len(s), bool)
        scored[np.concatenate(test)] = True
        pred = {k: held_out(s, t, f, test) for k, f in fitters.items()}
        if nccl is not None:
            pred["NCCL"] = np.where(scored, nccl, np.nan)
        e = {k: np.where(scored, ape(p, t), np.nan) for k, p in pred.items()}
        res = {k: errors_summary(p, t) for k, p in pred.items()}
        res["NCCL"] = res.get("NCCL") or {
            "why": nccl_topo
            if isinstance(nccl_topo, str)
            else "NCCL's model does not cover this op"
        }
        out["protocols"][name] = {
            "method": how,
            **res,
            "gap": gap(e["calibrated"], e["size-blind"], steps),
        }
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
                "steps": int(g["step"].nunique()),
                **score(g, topo),
            }
        )
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def _cell(x: dict) -> str:
    return "n/a" if "median" not in x else f"{_pct(x['median'])} / {_pct(x['p90'])}"


def _factor(x: dict) -> str:
    return "n/a" if x.get("factor") is None else f"{x['factor']:.2f}"


def render(results: list[dict]) -> str:
    """A markdown table: median / p90 APE (%) per predictor and protocol, the difference of
    the medians with its interval, and the median error factors; then the goals per set."""
    head = (
        "| set | op | ranks | rows | sizes | steps | floor % | held out | calibrated % "
        "| NCCL % | size-blind % | Δ median [95 % CI] | factor cal. / blind |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in results:
        for name, p in r["protocols"].items():
            g = p["gap"]
            delta = (
                "n/a"
                if g["delta"] is None
                else f"{_pct(g['delta'])} [{_pct(g['lo'])}, {_pct(g['hi'])}]"
            )
            lines.append(
                f"| {r['set']} | {r['op']} | {r['n_ranks']} | {r['rows']} | {r['sizes']} | "
                f"{r['steps']} | {_pct(r['floor'])} | {name} | {_cell(p['calibrated'])} | "
                f"{_cell(p['NCCL'])} | {_cell(p['size-blind'])} | {delta} | "
                f"{_factor(p['calibrated'])} / {_factor(p['size-blind'])} |"
            )
    return "\n".join(lines + ["", *goals(results)])


def goals(results: list[dict]) -> list[str]:
    """One line per (set, op) with >= GOAL_ROWS rows: the 10 % goal and the baseline."""
    out = []
    for r in results:
        if r["rows"] < GOAL_ROWS:
            continue
        ps = r["protocols"]
        worst = max(p["calibrated"]["median"] for p in ps.values())
        met = worst <= GOAL_APE
        why = (
            ""
            if met or r["floor"] is None or r["floor"] <= GOAL_APE
            else f"; unreachable from the size: floor {_pct(r['floor'])} %"
        )
        worse = [k for k, p in ps.items() if p["gap"]["lo"] is not None and p["gap"]["lo"] > 0]
        tied = [
            k
            for k, p in ps.items()
            if p["gap"]["delta"] is not None and p["gap"]["delta"] > 0 and k not in worse
        ]
        out.append(
            f"- {r['set']} {r['op']}/{r['n_ranks']}: median ≤ {_pct(GOAL_APE)} % "
            f"{'met' if met else 'not met'} (worst split {_pct(worst)} %{why}); "
            f"worse than size-blind beyond noise: {', '.join(worse) or 'none'}"
            + (f"; higher median within noise: {', '.join(tied)}" if tied else "")
        )
    return out


#: The real nccl-tests tables and the NCCL log with one after it.
FABRIC_DIR = ROOT / "tests" / "data" / "nccl_tests"
FABRIC_LOG = "006_*.log.gz"
#: Goals on real tables: leave-one-size-out median on tables of >= FABRIC_SIZES sizes, and the
#: cross-op median.
GOAL_HELDOUT, GOAL_CROSS, FABRIC_SIZES = 0.05, 0.15, 10
DOCS = ROOT / "docs" / "model.md"
BEGIN, END = "<!-- fabric-accuracy:begin -->", "<!-- fabric-accuracy:end -->"


def fabric_groups() -> list[tuple[str, list[Path]]]:
    """The real tables grouped per cluster (files of one group share a store: cross-op and
    cross-count predictions stay inside a group)."""
    groups: dict[str, list[Path]] = {}
    for f in sorted(FABRIC_DIR.glob("*.log")):
        key = f.name.split("_")[0] + ("_10node" if "10node" in f.name else "")
        key = f.stem if key == "awsome" else key
        groups.setdefault(key, []).append(f)
    for f in sorted((ROOT / "tests" / "data" / "nccl").glob(FABRIC_LOG)):
        groups[f.name.split(".log")[0]] = [f]
    return sorted(groups.items())


def hosts(files: list[Path]) -> int | None:
    """Distinct hosts of the files' nccl-tests device lines (`#  Rank  8 ... on cnode3-003
    device  0 ...`), which the store does not keep: the group's nodes (None without device
    lines)."""
    found: set[str] = set()
    for f in files:
        raw = f.read_bytes()
        text = gzip.decompress(raw) if f.suffix == ".gz" else raw
        for line in text.decode("utf-8", "replace").splitlines():
            words = line.split("# ", 1)[-1].split()
            if len(words) > 3 and words[0] == "Rank" and "on" in words and "device" in words:
                found.add(words[words.index("on") + 1])
    return len(found) or None


def fabric_measure() -> list[dict]:
    """Every real table's scores (`compare_table` without its rows)."""
    out = []
    for name, files in fabric_groups():
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "f.duckdb"
            con = store.connect(db)
            store.ingest(con, name, files)
            load_modules(con)
            report = fabric_json(con, run_id(con, name), hosts(files))
            con.close()
        for t in report["tables"]:
            t.pop("rows")
            out.append({"group": name} | t)
    return out


def fabric_render(results: list[dict]) -> str:
    """The accuracy table of the real fabrics (markdown) and the goals."""
    head = (
        "| table | op | ranks | nodes | sizes | held out (one size) | cross-op (from) "
        "| cross-count (from) | NCCL uncalibrated | single α-β line |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in results:
        name = r["file"].rsplit("/", 1)[-1] + (f" #{r['table_no']}" if r["table_no"] > 1 else "")
        cross = _mp(r, "cross_op") + (
            f" ({r['cross_op_reference']})" if r["cross_op_reference"] else ""
        )
        count = _mp(r, "cross_count") + (
            f" ({r['cross_count_reference_ranks']} ranks)"
            if r["cross_count_reference_ranks"]
            else ""
        )
        lines.append(
            f"| {name} | {r['op']} | {r['n_ranks']} | {r['n_nodes'] or '?'} | {r['sizes']} "
            f"| {_mp(r, 'heldout')} | {cross} | {count} | {_mp(r, 'nccl_model')} "
            f"| {_mp(r, 'line')} |"
        )
    return "\n".join(lines) + "\n\n" + "\n".join(fabric_goals(results)) + "\n"


def _mp(r: dict, key: str) -> str:
    m, p = r[f"{key}_median_ape"], r[f"{key}_p90_ape"]
    return "n/a" if m is None else f"{m * 100:.1f} / {p * 100:.1f}"


def fabric_goals(results: list[dict]) -> list[str]:
    """The goals on the real tables, met or not, with the tables that miss them."""
    big = [r for r in results if r["sizes"] >= FABRIC_SIZES]
    held_miss = [r for r in big if (r["heldout_median_ape"] or 0) > GOAL_HELDOUT]
    cross = [r for r in results if r["cross_op_median_ape"] is not None]
    cross_miss = [r for r in cross if r["cross_op_median_ape"] > GOAL_CROSS]
    all_cross = np.median([r["cross_op_median_ape"] for r in cross]) if cross else None

    def names(rs: list[dict]) -> str:
        return ", ".join(f"{r['file'].rsplit('/', 1)[-1]} {r['op']}" for r in rs) or "none"

    return [
        f"- leave one size out, median ≤ {GOAL_HELDOUT * 100:.0f} % on every table of "
        f"≥ {FABRIC_SIZES} sizes: {'met' if not held_miss else 'not met'} "
        f"({len(big) - len(held_miss)} of {len(big)}; missed: {names(held_miss)})",
        f"- cross-op median ≤ {GOAL_CROSS * 100:.0f} %: {len(cross) - len(cross_miss)} of "
        f"{len(cross)} tables (median of the tables' medians "
        f"{'n/a' if all_cross is None else f'{all_cross * 100:.1f} %'}); missed: "
        f"{names(cross_miss)}",
    ]


def write_docs(text: str) -> None:
    """Replace the block between BEGIN and END in docs/model.md with `text`."""
    doc = DOCS.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOCS.write_text(doc[:start] + "\n" + text + doc[end:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dirs", nargs="*", type=Path, help="trace sets (default: the repository's)")
    ap.add_argument("--only", choices=("all", "traces", "fabrics"), default="all")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/model.md's block")
    args = ap.parse_args()
    results: list[dict] = []
    if args.only != "fabrics":
        dirs = args.dirs or [
            d for base in SEARCH if base.is_dir() for d in sorted(base.iterdir()) if d.is_dir()
        ]
        results = [r for d in dirs for name, files in trace_sets(d) for r in measure(name, files)]
    fabrics = fabric_measure() if args.only != "traces" else []
    if args.format == "json":
        print(json.dumps({"traces": results, "fabrics": fabrics}, indent=1))
        return
    if results:
        print(render(results))
    if fabrics:
        text = fabric_render(fabrics)
        print(text)
        if args.write_docs:
            write_docs(text)


if __name__ == "__main__":
    main()
