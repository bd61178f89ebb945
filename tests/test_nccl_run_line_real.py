"""A run of NCCL logs alone says how many ranks its logs name, on the real log 001 (8 p3dn nodes,
nccl-tests; tests/data/nccl/001*, notice beside it): its `Init COMPLETE` lines all say `nranks
64` (line 2244: `comm 0x7eff90000dc0 rank 8 nranks 64 ... Init COMPLETE`), while the Run line
said "ranks: 0 (world size not recorded)" beside an NCCL section giving world size 64."""

from __future__ import annotations

import gzip
import re

from conftest import DATA, analysis_store

from commwall.analysis.report.build import build_report
from commwall.cli.text_report import render_text

(LOG,) = (DATA / "nccl").glob("001_*.log.gz")


def test_a_run_of_logs_alone_says_how_many_ranks_the_logs_name(tmp_path):
    text = gzip.decompress(LOG.read_bytes()).decode()
    nranks = {int(n) for n in re.findall(r" nranks (\d+) cudaDev \d+ .*Init COMPLETE", text)}
    assert nranks == {64}
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / LOG.name).write_bytes(LOG.read_bytes())
    con = analysis_store(tmp_path / "s.duckdb", (tmp_path / "d",))
    rep = build_report(con, "d", keep_going=False)
    con.close()
    assert rep["run_info"]["n_ranks"] == 0 and rep["run_info"]["nccl_world_size"] == 64
    shown = render_text(rep, lambda df: df.to_string(index=False))
    assert "ranks: none traced (the NCCL logs: 64 ranks)" in shown
