"""What NCCL chose (its tuning lines) is in the report's NCCL section and its text, on the real
log 027 (NCCL 2.29.7; tests/data/nccl/027*, notice beside it): the dashboard showed it, the
CLI and the JSON report did not."""

from __future__ import annotations

import gzip

from conftest import DATA, analysis_store

from commwall.analysis.report.build import build_report


def test_what_nccl_chose_is_in_the_section_and_its_text(tmp_path):
    # NCCL 2.29.7's log 027: `Broadcast: 1024 Bytes -> Algo RING proto LL` (line 29) ...
    # `Broadcast: 32768 Bytes -> Algo RING proto SIMPLE` (line 34), each followed by its
    # channel range; counted here by plain Python: 23 LL lines from 1,024 to 16,384 bytes,
    # 49 SIMPLE lines from 32,768 bytes up
    from commwall.dashboard.nccl_text import render_nccl

    (log,) = (DATA / "nccl").glob("027_*.log.gz")
    lines = gzip.decompress(log.read_bytes()).decode().splitlines()
    chose: dict[str, list[int]] = {}
    for s in lines:
        if "Broadcast: " in s and " Bytes -> Algo RING proto " in s:
            size = int(s.split("Broadcast: ")[1].split(" ")[0])
            chose.setdefault(s.split(" proto ")[1].split(" ")[0], []).append(size)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / log.name).write_bytes(log.read_bytes())
    con = analysis_store(tmp_path / "s.duckdb", (tmp_path / "d",))
    rep = build_report(con, "d", keep_going=False)
    con.close()
    got = {
        r["proto"]: (r["choices"], r["min_bytes"], r["max_bytes"])
        for r in rep["nccl"]["algorithm_choices"]
        if r["func"] == "Broadcast" and r["algo"] == "RING"
    }
    assert got == {p: (len(v), min(v), max(v)) for p, v in chose.items()}
    assert got["LL"] == (23, 1024, 16384)
    text = render_nccl(rep["nccl"], lambda df: df.to_string(index=False))
    assert "what NCCL chose (its tuning lines):" in text and "SIMPLE" in text
