"""Dask distributed as the executor of distributed ingest (imported only when asked for).

`client(workers=N)` starts a LocalCluster of N single-threaded worker processes; `client(
scheduler="tcp://host:8786")` joins an existing cluster (Slurm, Kubernetes: docs/scale_out.md).
`executor(client)` maps tasks over it with retries; a task whose worker dies is rescheduled by
the scheduler itself (up to `distributed.scheduler.allowed-failures` times).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from distributed import Client, LocalCluster, as_completed

from commwall.ingest.exec.distributed import Executor, Results


@contextmanager
def client(workers: int | None = None, scheduler: str | None = None) -> Iterator[Client]:
    """A Dask client: of an existing scheduler when given, else of a new local cluster."""
    if scheduler:
        with Client(scheduler, timeout="10s") as c:
            yield c
        return
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def executor(c: Client, retries: int = 2) -> Executor:
    """Run tasks on `c`: shared arguments become one task each (sent once, and recomputed by
    the scheduler if the worker holding one dies), results come back as tasks finish, and
    leaving early cancels what is still pending."""

    def run(fn: Callable[..., Any], items: list, shared: dict[str, Any]) -> Results:
        on_workers: dict[str, Any] = {k: c.submit(_value, v, pure=False) for k, v in shared.items()}
        futures = c.map(fn, items, retries=retries, pure=False, **on_workers)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for f in as_completed(futures):
                yield index[f.key], f.exception() if f.status == "error" else f.result()
                f.release()
        finally:
            c.cancel([*futures, *on_workers.values()])

    return run


def _value(x: Any) -> Any:
    return x
