"""Pytest plugin of the distributed tests: session fixtures shared by their modules, each built
once: a real multi-process Dask LocalCluster, the real multi-rank sets ingested the embedded way,
and a generated 256-rank run. Test modules load it with
`pytest_plugins = ["distributed_fixtures"]` (and do not import it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import DLRM, SAMPLES
from distributed_helpers import contents, ingest_local, report_of
from synthetic_traces import Scenario, Sim, simulate, write_kineto

#: Real multi-rank sets in the repo: run name → directory.
REAL = {
    "dlrm_8rank": DLRM,
    "gloo_4rank_compute": SAMPLES / "gloo_4rank_compute",
    "gloo_4rank_sleep": SAMPLES / "gloo_4rank_sleep",
}


@pytest.fixture(scope="session")
def dask_client():
    """A client of a real LocalCluster: 2 worker processes of 1 thread each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as lc,
        Client(lc) as c,
    ):
        yield c


@dataclass
class LocalStore:
    """Runs ingested the embedded way (no Dask, no shards), with their report and rows."""

    path: Path
    _cache: dict = field(default_factory=dict)

    def report(self, run: str) -> dict:
        """The run's full report (computed once)."""
        if ("report", run) not in self._cache:
            self._cache["report", run] = report_of(self.path, run)
        return self._cache["report", run]

    def contents(self, run: str) -> dict:
        """The run's rows (read once)."""
        if ("contents", run) not in self._cache:
            self._cache["contents", run] = contents(self.path, run)
        return self._cache["contents", run]


@pytest.fixture(scope="session")
def local_store(tmp_path_factory) -> LocalStore:
    """Every REAL set, each as the run of its name."""
    path = tmp_path_factory.mktemp("local") / "local.duckdb"
    for run, folder in REAL.items():
        ingest_local(path, run, sorted(folder.glob("*.json.gz")))
    return LocalStore(path)


@dataclass
class Generated:
    """A generated run: the simulation (its ground truth), the trace files, the local store."""

    sim: Sim
    paths: list[Path]
    local: LocalStore


@pytest.fixture(scope="session")
def generated(tmp_path_factory) -> Generated:
    """256 ranks on 32 hosts with skewed clocks and a compute straggler, ingested locally."""
    scn = Scenario(
        hosts=32, ranks_per_host=8, steps=2, collectives_per_step=3, straggler=77,
        delay_us=2000.0, clock_offsets_us=tuple(float(h * 7 % 50) for h in range(32)), seed=3,
    )  # fmt: skip
    sim = simulate(scn)
    root = tmp_path_factory.mktemp("generated")
    paths = write_kineto(sim, root / "traces")
    ingest_local(root / "local.duckdb", "gen", paths)
    return Generated(sim, paths, LocalStore(root / "local.duckdb"))
