"""Bad nsys input: a clear IngestError naming the file, and nothing stored."""

from __future__ import annotations

import gzip
import os
import sqlite3
import stat
from pathlib import Path

import pytest
from conftest import DATA, gunzip_to
from nsys_synth import make_spec, write_nsys

from commwall.cli.main import main
from commwall.ingest import store
from commwall.ingest.errors import IngestError
from commwall.ingest.formats.nsys import db as nsys_db
from commwall.ingest.options import ParseOptions

MFU = DATA / "nsys" / "nsys_ai_2gpu" / "mfu_2gpu_before.sqlite.gz"


def refused(db: Path, path: Path, opts: ParseOptions | None = None) -> str:
    """Ingest `path`, expect an IngestError naming it, check the store holds nothing; returns
    the message."""
    con = store.connect(db)
    with pytest.raises(IngestError) as err:
        store.ingest(con, "bad", [path], opts)
    counts = [con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "files")]
    con.close()
    assert counts == [0, 0]
    assert err.value.path == str(path) and str(err.value).startswith(str(path))
    return err.value.problem


def test_not_sqlite(tmp_db: Path, tmp_path: Path) -> None:
    p = tmp_path / "report.sqlite"
    p.write_text("this is not a database\n")
    assert "not an SQLite database" in refused(tmp_db, p)
    z = tmp_path / "report.sqlite.gz"
    z.write_bytes(gzip.compress(b"neither is this"))
    assert "not an SQLite database" in refused(tmp_db, z)


def test_sqlite_but_not_nsys(tmp_db: Path, tmp_path: Path) -> None:
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE orders (id INTEGER, item TEXT)")
    con.commit()
    con.close()
    problem = refused(tmp_db, p)
    assert "not an Nsight Systems export" in problem and "orders" in problem


@pytest.mark.parametrize("how", ["truncated", "corrupt", "header only"])
def test_damaged_sqlite(tmp_db: Path, tmp_path: Path, how: str) -> None:
    data = bytearray(gunzip_to(MFU, tmp_path).read_bytes())
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "corrupt":
        third = len(data) // 3
        data[third : third + 200_000] = b"\xff" * 200_000
    else:
        data = data[:50]
    p = tmp_path / f"{how.replace(' ', '_')}.sqlite"
    p.write_bytes(bytes(data))
    assert "corrupt or truncated SQLite file" in refused(tmp_db, p)


def test_truncated_gzip(tmp_db: Path, tmp_path: Path) -> None:
    raw = MFU.read_bytes()
    p = tmp_path / "cut.sqlite.gz"
    p.write_bytes(raw[: len(raw) // 2])
    assert "truncated gzip" in refused(tmp_db, p)


def test_locked_file(tmp_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nsys_db, "LOCK_TIMEOUT_S", 0.1)
    p = gunzip_to(MFU, tmp_path)
    writer = sqlite3.connect(p)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        assert "locked by another program" in refused(tmp_db, p)
    finally:
        writer.rollback()
        writer.close()


def test_export_without_gpu_work(tmp_db: Path, tmp_path: Path) -> None:
    gone = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
    p = write_nsys(make_spec(0), tmp_path / "cpu.sqlite", without=gone)
    assert "without GPU work" in refused(tmp_db, p)


def test_bad_options(tmp_db: Path, tmp_path: Path) -> None:
    p = write_nsys(make_spec(0), tmp_path / "x.sqlite")
    assert "bad --rank-map entry 'rank0'" in refused(tmp_db, p, ParseOptions(rank_map=("rank0",)))
    assert "bad --step-range regex" in refused(tmp_db, p, ParseOptions(step_regex="(unclosed"))
    clash = ParseOptions(rank_map=("1000=0", "1001=0"))
    assert "processes 1000 and 1001 both map to rank 0" in refused(tmp_db, p, clash)


def test_report_without_nsys_on_path(
    tmp_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    p = tmp_path / "run 1.nsys-rep"
    p.write_bytes(b"\x00proprietary report bytes")
    problem = refused(tmp_db, p)
    assert "`nsys` is not on PATH" in problem
    out = tmp_path / "run 1.sqlite"
    assert f"nsys export --type sqlite --force-overwrite true -o '{out}' '{p}'" in problem


def fake_nsys(bin_dir: Path, body: str) -> None:
    """An `nsys` executable (a shell script) on a PATH of its own."""
    bin_dir.mkdir()
    exe = bin_dir / "nsys"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


def test_report_exported_by_nsys_on_path(
    tmp_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = write_nsys(make_spec(1), tmp_path / "made.sqlite")
    args = tmp_path / "args.txt"
    # copies the prepared export to the file named after -o, and records its arguments
    fake_nsys(
        tmp_path / "bin",
        f'echo "$@" > {args}\nwhile [ "$1" != "-o" ]; do shift; done\ncp {export} "$2"\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    rep = tmp_path / "job.qdrep"
    rep.write_bytes(b"\x00report")
    con = store.connect(tmp_db)
    summary = store.ingest(con, "rep", [rep])
    n = con.execute("SELECT count(*) FROM ranks").fetchone()[0]
    con.close()
    assert summary.files[0].format == "nsys" and n == 2
    assert args.read_text().startswith("export --type sqlite --force-overwrite true -o ")
    assert args.read_text().rstrip().endswith(str(rep))


def test_failing_nsys_export(tmp_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nsys(tmp_path / "bin", 'echo "cannot open report: version too new" >&2\nexit 3\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    rep = tmp_path / "job.nsys-rep"
    rep.write_bytes(b"\x00report")
    problem = refused(tmp_db, rep)
    assert "failed (exit 3): cannot open report: version too new" in problem


def test_cli_names_the_file_and_stores_nothing(
    tmp_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = MFU
    bad = tmp_path / "half.sqlite.gz"
    bad.write_bytes(gzip.compress(gunzip_to(MFU, tmp_path).read_bytes()[:100_000]))
    assert main(["ingest", str(good), str(bad), "--db", str(tmp_db), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: corrupt or truncated SQLite file" in err
    assert "nothing was stored" in err
    con = store.connect(tmp_db)
    assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 0
    con.close()
