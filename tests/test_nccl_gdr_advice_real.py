"""The advice for GPU Direct RDMA being off fits the network, on two real logs
(tests/data/nccl/, notices beside them): 001 runs over EFA through AWS's libfabric plugin
(line 95: `NET/OFI Selected Provider is efa`) on p3dn instances, which have no GPU Direct RDMA
over EFA, so loading nvidia-peermem (the advice it got) changes nothing; 004 runs over
InfiniBand verbs, where that advice stands."""

from __future__ import annotations

import gzip

import pytest
from conftest import DATA, analysis_store

from commwall.analysis.report.build import build_report


@pytest.mark.parametrize(
    ("prefix", "marker", "efa"),
    [("001_", "NET/OFI Selected Provider is efa", True), ("004_", "NET/IB : Using", False)],
)
def test_gdr_advice_fits_the_network(tmp_path, prefix, marker, efa):
    (log,) = (DATA / "nccl").glob(f"{prefix}*.log.gz")
    text = gzip.decompress(log.read_bytes()).decode()
    assert marker in text and "/GDRDMA" not in text  # no connection used GPU Direct RDMA
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / log.name).write_bytes(log.read_bytes())
    con = analysis_store(tmp_path / "s.duckdb", (tmp_path / "d",))
    rep = build_report(con, "d", keep_going=False)
    con.close()
    (item,) = [i for i in rep["checklist"] if i["key"] == "gdr"]
    assert rep["nccl"]["gdr"] is False and item["status"] == "attention"
    assert ("p4d and later" in item["action"]) is efa
    assert ("nvidia-peermem" in item["action"]) is not efa
