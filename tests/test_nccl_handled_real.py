"""Error returns a thread went on from are not errors, on the real RCCL log 018 (2 nodes of
MI325X, the first node's eight ranks logged; tests/data/nccl/018*, notice beside it).

Read from the raw log: every one of the 8 processes logs `Found /sys/kernel/mm/memory_peers/
amdkfd/version`, then `.../transport/net_ib.cc:708 -> 2`, then `Using network IB` (lines
160-162 for rank 3), with no WARN before; all 8 reach `Init COMPLETE`, and their network
connections are GPU Direct RDMA. The report counted 8 NCCL errors, the first of them
net_ib.cc:708, and the paragraph led with them: an engineer would go after a RoCE fault on a
run that initialised fine."""

from __future__ import annotations

import gzip

from conftest import DATA, analysis_store

from commwall.analysis.report.build import build_report

(LOG,) = (DATA / "nccl").glob("018_*.log.gz")


def test_returns_the_thread_went_on_from_are_not_errors(tmp_path):
    lines = gzip.decompress(LOG.read_bytes()).decode().splitlines()
    assert lines[159].endswith("NCCL INFO Found /sys/kernel/mm/memory_peers/amdkfd/version")
    assert lines[160].endswith("transport/net_ib.cc:708 -> 2")
    assert lines[161].endswith("NCCL INFO Using network IB")
    returns = [i for i, s in enumerate(lines) if s.endswith("net_ib.cc:708 -> 2")]
    assert len(returns) == 8 and sum("Init COMPLETE" in s for s in lines) == 8
    for i in returns:  # each between two INFO lines of its own thread, no WARN before
        thread = lines[i].split(" ", 1)[0]
        before = [s for s in lines[:i] if s.startswith(thread + " ")][-1]
        after = next(s for s in lines[i + 1 :] if s.startswith(thread + " "))
        assert " NCCL INFO " in before and " NCCL INFO " in after

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / LOG.name).write_bytes(LOG.read_bytes())
    con = analysis_store(tmp_path / "s.duckdb", (tmp_path / "d",))
    rep = build_report(con, "d", keep_going=False)
    con.close()
    nccl = rep["nccl"]
    assert nccl["errors"]["count"] == 0
    assert nccl["handled_returns"]["count"] == 8
    assert nccl["handled_returns"]["first"]["line"] == returns[0] + 1
    assert not any(f.startswith("NCCL errors") for f in nccl["findings"])
    assert "NCCL errors" not in rep["diagnosis"]["paragraph"]
