"""`commwall ingest` of NCCL Inspector output through the CLI: a damaged batch refused with the
file and the line, or (`--keep-going`) skipped and counted; `--inspector-aggregates-only`
keeps no per-operation row. Expected counts are read from the written lines in plain Python."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from commwall.cli.main import main
from commwall.sample_traces.generate_inspector import JobSpec, write_job


def _job(tmp_path: Path) -> tuple[Path, list[str]]:
    out = tmp_path / "job"
    truth = write_job(out, JobSpec(hosts=2, gpus=2, minutes=3))
    return out, truth.files


def _payloads(lines: list[str]) -> int:
    """coll_perf and p2p_perf lines, counted from the text."""
    return sum('"coll_perf"' in x or '"p2p_perf"' in x for x in lines)


def _damage(path: Path) -> tuple[int, int, int]:
    """Cut the first payload line of the first dump; return (the dump's marker line, the cut
    line, the records of that dump: the payload lines between the first two markers)."""
    lines = path.read_text().splitlines()
    markers = [i for i, x in enumerate(lines) if '"dump_stats"' in x]
    n = _payloads(lines[markers[0] + 1 : markers[1]])
    bad = markers[0] + 1
    lines[bad] = lines[bad][:40]
    path.write_text("\n".join(lines) + "\n")
    return markers[0] + 1, bad + 1, n


def _ingest(capsys, *args: str) -> tuple[int, str]:
    code = main(["ingest", *args, "--quiet", "--no-prepare"])
    return code, capsys.readouterr().err


def test_a_damaged_batch_is_refused_with_file_and_line(tmp_path, capsys):
    out, files = _job(tmp_path)
    victim = out / files[0]
    _, line, _ = _damage(victim)
    db = tmp_path / "s.duckdb"
    code, err = _ingest(capsys, str(out), "--db", str(db), "--run", "j")
    assert code != 0
    assert f"{files[0]}: line {line}" in err and "not JSON" in err
    assert "nothing was stored" in err
    con = duckdb.connect(str(db))
    assert con.execute("SELECT count(*) FROM inspector_colls").fetchone() == (0,)
    con.close()


def test_keep_going_skips_and_counts_the_damaged_batch(tmp_path, capsys):
    out, files = _job(tmp_path)
    whole = sum(_payloads((out / f).read_text().splitlines()) for f in files)
    marker, line, lost = _damage(out / files[0])
    db = tmp_path / "s.duckdb"
    code, err = _ingest(capsys, str(out), "--db", str(db), "--run", "j", "--keep-going")
    assert code == 0, err
    # the marker and every record of its dump: the lines the file's detail counts
    assert f"{lost + 1} event(s) dropped (bad Inspector batches skipped (--keep-going))" in err
    con = duckdb.connect(str(db))
    got = con.execute(
        "SELECT (SELECT count(*) FROM inspector_colls) + (SELECT count(*) FROM inspector_p2p)"
    ).fetchone()
    assert got == (whole - lost,)  # that dump left out, nothing else
    skipped = con.execute("SELECT line, bad_line, lines FROM inspector_skipped").fetchall()
    assert skipped == [(marker, line, line - marker + 1)]
    con.close()
    code = main(["inspector", "--db", str(db), "--run", "j", "--format", "json"])
    section = json.loads(capsys.readouterr().out)
    assert code == 0 and section["skipped_batches"] == 1


def test_aggregates_only_keeps_the_minutes_and_no_instance(tmp_path, capsys):
    out, files = _job(tmp_path)
    n_coll = sum('"coll_perf"' in x for f in files for x in (out / f).read_text().splitlines())
    db = tmp_path / "s.duckdb"
    code, err = _ingest(capsys, str(out), "--db", str(db), "--inspector-aggregates-only")
    assert code == 0, err
    con = duckdb.connect(str(db))
    assert con.execute("SELECT count(*) FROM inspector_colls").fetchone() == (0,)
    got = con.execute("SELECT sum(n) FROM inspector_minutes WHERE kind = 'coll'").fetchone()
    assert got == (n_coll,)
    con.close()


@pytest.mark.parametrize("flag", ["--keep-going", "--inspector-aggregates-only"])
def test_the_flags_are_documented(capsys, flag):
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    assert flag in capsys.readouterr().out
