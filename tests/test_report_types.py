"""The report's declared types (analysis/report/shape.py) hold on real runs: every key a report
holds is declared, every required key is there, and every value is of its declared type. The
runs cover a GPU NCCL job (DLRM), a CPU gloo job with a straggler, a hung job (Flight Recorder
dumps and traces), an Nsight export and an NCCL log alone (most sections not available).

A checker that accepted anything would make this test pass vacuously, so it is itself checked
on reports with one key renamed, one key removed and one value of the wrong type."""

from __future__ import annotations

import copy
import types
import typing
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from conftest import DATA, SAMPLES

from commwall.analysis import db
from commwall.analysis.api import Store
from commwall.analysis.report.shape import Report
from commwall.ingest import discover, store


def problems(value: Any, tp: Any, path: str = "report") -> list[str]:
    """Where `value` does not fit type `tp` (TypedDicts checked key by key, recursively)."""
    origin = get_origin(tp)
    if tp is Any:
        return []
    if origin in (Union, types.UnionType):
        options = [problems(value, a, path) for a in get_args(tp)]
        return [] if any(not o for o in options) else min(options, key=len)
    if tp is type(None):
        return [] if value is None else [f"{path}: {type(value).__name__}, expected None"]
    if typing.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, expected {tp.__name__}"]
        hints = get_type_hints(tp)
        out = [f"{path}: key {k!r} not declared in {tp.__name__}" for k in value if k not in hints]
        out += [f"{path}: required key {k!r} missing" for k in tp.__required_keys__ - set(value)]
        for k, v in value.items():
            if k in hints:
                out += problems(v, hints[k], f"{path}.{k}")
        return out
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, expected list"]
        (item,) = get_args(tp)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, expected dict"]
        _, item = get_args(tp)
        return [p for k, v in value.items() for p in problems(v, item, f"{path}.{k}")]
    if tp is float:  # JSON: an integral float may arrive as an int
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{path}: {type(value).__name__}, expected {tp.__name__}"]


RUNS = {
    "dlrm_8rank": [SAMPLES / "dlrm_8rank"],
    "gloo_4rank_compute": [SAMPLES / "gloo_4rank_compute"],
    "fr_skip": [SAMPLES / "fr_skip"],
    "nsys_ai_2gpu": [DATA / "nsys" / "nsys_ai_2gpu" / "h100_2gpu_1s.sqlite.gz"],
    "nccl_log_only": [
        DATA / "nccl" / "002_p2p_ipc_2.6.4_horovod_tf_benchmark_single_node_8xv100.log.gz"
    ],
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    path: Path = tmp_path_factory.mktemp("types") / "store.duckdb"
    con = store.connect(path)
    for name, paths in RUNS.items():
        store.ingest(con, name, discover.expand([str(p) for p in paths]))
    con.close()
    with Store(path) as s:
        return {name: dict(s.run(name).report(keep_going=False)) for name in RUNS}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_real_reports_fit_their_declared_types(reports, run):
    assert problems(reports[run], Report) == []


def test_the_typed_sections_are_filled_on_a_full_run(reports):
    """On DLRM every typed section is there and not None (a report of Nones would fit)."""
    r = reports["dlrm_8rank"]
    for key in ("run_info", "summary", "ranks", "steps", "decomposition", "stragglers",
                "replay", "diagnosis"):  # fmt: skip
        assert r.get(key), key
    assert "analysis_errors" not in r


def test_the_checker_finds_renamed_missing_and_mistyped_keys(reports):
    r = copy.deepcopy(reports["dlrm_8rank"])
    r["summary"]["gamma_ratio"] = r["summary"].pop("gamma")  # renamed
    del r["run_info"]["n_ranks"]  # required, removed
    r["stragglers"]["ranks"][0]["rank"] = "7"  # wrong type
    found = problems(r, Report)
    assert "report.summary: key 'gamma_ratio' not declared in Summary" in found
    assert "report.run_info: required key 'n_ranks' missing" in found
    assert "report.stragglers.ranks[0].rank: str, expected int" in found
    assert len(found) == 3, found


def test_store_facade_names_missing_runs(tmp_path):
    path = tmp_path / "empty.duckdb"
    store.connect(path).close()
    with Store(path) as s, pytest.raises(db.RunNotFound):
        s.run("nope")
