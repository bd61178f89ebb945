"""What a memory-bound step's copies move, on a real Nsight export: the share of the memory
copy time that is host <-> device (analysis/sql/memory.sql) against sqlite3 over the same
file, and the words of the diagnosis.

nsys-ai's h100_2gpu_1s export: per GPU, 223 pinned host-to-device copies of 114 MB take most
of the 1 s capture; "memory-bound" alone reads as HBM traffic, which it is not."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import DATA, analysis_store, gunzip_to

from commwall.analysis.report.build import build_report

H100 = DATA / "nsys/nsys_ai_2gpu/h100_2gpu_1s.sqlite.gz"
#: CUPTI_ACTIVITY_MEMCPY_KIND: 1 HtoD, 2 DtoH.
HOST_DEVICE = (1, 2)


def test_host_device_copies_are_named(tmp_path):
    export = gunzip_to(H100, tmp_path)
    con = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    copies = dict(
        con.execute(
            "SELECT copyKind IN (1, 2), sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"
        ).fetchall()
    )
    (sets,) = con.execute(
        "SELECT coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_MEMSET"
    ).fetchone()
    con.close()
    truth = copies[1] / (copies[1] + copies.get(0, 0) + sets)
    run = tmp_path / "run"
    run.mkdir()
    export.rename(run / export.name)
    store = analysis_store(tmp_path / "store.duckdb", (run,))
    rep = build_report(store, "run", keep_going=False)
    store.close()
    assert rep["summary"]["memory_host_device_share"] == pytest.approx(truth, abs=1e-9)
    assert truth > 0.9
    d = rep["diagnosis"]
    assert d["cause"] == "memory" and "host-device copies" in d["label"]
    assert "not copies on the GPU" in d["paragraph"]
