"""Inputs that once made a command misbehave (tests/data/crashes/turn3/, see its README): a header
whose claim allocated, terminal escapes printed raw, one odd field that lost the hang page, a
legal but out-of-range timestamp that refused a log, crafted file names and sizes. Each is run
through the CLI as a user would."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from conftest import DATA, SAMPLES

from commwall.analysis.safe_text import printable, visible
from commwall.cli.main import main
from commwall.ingest import store, store_parse
from commwall.ingest.errors import IngestError, shown_name
from commwall.ingest.options import ParseOptions

TURN3 = DATA / "crashes" / "turn3"
#: Bytes a terminal acts on: ESC, BEL, the 8-bit C1 introducers (CSI, DCS, OSC, ST) and the rest
#: of C0 but newline and tab.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Address-space cap of the claim test: a fraction of the 24 GB the claim once took.
CAP = 4 << 30
#: The sequences of the campaign: OSC 52 (writes the clipboard), OSC 0 (window title), clear
#: screen, cursor report (the terminal answers on stdin), 8-bit CSI, reset, 8-bit DCS, 7-bit
#: DCS, a direction override.
SEQUENCES = ["\x1b]52;c;cHduZWQ=\x07", "\x1b]0;title\x07", "\x1b[2J", "\x1b[6n", "\x9b2J",
             "\x1bc", "\x90+q544e\x9c", "\x1bP+q\x1b\\", "\u202e"]  # fmt: skip


def cli(*args: str, cap: int | None = None) -> subprocess.CompletedProcess[str]:
    """`commwall ARGS` in a fresh process (under an address-space cap where given)."""
    cmd = [sys.executable, "-m", "commwall", *args]
    if cap is not None:
        if not shutil.which("prlimit"):
            pytest.skip("prlimit is not installed")
        cmd = ["prlimit", f"--as={cap}", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def test_claimed_communicator_size_is_kept_not_expanded(tmp_path):
    # nranks_1e9.log line 2: `h:1:2 [0] NCCL INFO comm 0x1 rank 999999999 nranks 1000000000
    # cudaDev 0 busId 1000 - Init COMPLETE`: one line claims a communicator of 10^9 ranks
    db = str(tmp_path / "s.db")
    log = TURN3 / "nccl" / "nranks_1e9.log"
    ingested = cli("ingest", "--db", db, "--run", "claim", str(log), cap=CAP)
    assert ingested.returncode == 0, ingested.stderr
    assert "not prepared" not in ingested.stderr
    nccl = cli("nccl", "--db", db, "--run", "claim", "--format", "json", cap=CAP)
    assert nccl.returncode == 0, nccl.stderr
    ranks = json.loads(nccl.stdout)["ranks"]
    assert ranks["world_size"] == 1_000_000_000  # stored as claimed
    assert ranks["world_size_unlisted"] is True  # and flagged, never expanded
    assert ranks["without_log"] == []
    assert ranks["with_log"] == [999_999_999]
    report = cli("report", "--db", db, "--run", "claim", "--format", "json", cap=CAP)
    assert report.returncode == 0, report.stderr
    findings = json.loads(report.stdout)["nccl"]["findings"]
    assert any("1,000,000,000 ranks" in f and "not listed" in f for f in findings)


@pytest.mark.parametrize("claim", [2**31 - 1, 4096, 131_072, 131_073])
def test_claims_around_the_listing_bound(tmp_path, claim):
    """A size up to 2^17 ranks is listed rank by rank (the job's ranks without a log); above,
    only the ranks some line names."""
    log = tmp_path / f"c{claim}.log"
    log.write_text(
        "h:1:2 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n"
        f"h:1:2 [0] NCCL INFO comm 0x1 rank 3 nranks {claim} cudaDev 0 busId 1000 - "
        "Init COMPLETE\n"
    )
    db = str(tmp_path / "s.db")
    assert main(["ingest", "--db", db, "--run", "c", "--quiet", str(log)]) == 0
    out = cli("nccl", "--db", db, "--run", "c", "--format", "json", cap=CAP)
    assert out.returncode == 0, out.stderr
    ranks = json.loads(out.stdout)["ranks"]
    listed = claim <= 131_072
    assert ranks["world_size"] == claim
    assert ranks["world_size_unlisted"] is not listed
    assert len(ranks["without_log"]) == (claim - 1 if listed else 0)
    assert ranks["with_log"] == [3]


def test_nccl_lines_with_terminal_escapes_are_printed_visibly(tmp_path):
    # escapes_in_nccl_lines.log holds `NET/\x1b]52;c;cHduZWQ=\x07IBext` (OSC 52: writes the
    # clipboard) and `NET/\x1b]0;PWNED-title\x07IBext` (OSC 0: the window title) among others
    log = TURN3 / "nccl" / "escapes_in_nccl_lines.log"
    raw = log.read_text(encoding="utf-8", errors="replace")
    assert "\x1b]52;c;" in raw and "\x1b]0;" in raw and "\x1b[2J" in raw
    # and every other sequence, in a WARN text and a transport of a log made here
    more = tmp_path / "more.log"
    more.write_text(
        "".join(
            f"h:1:2 [0] NCCL WARN NET/IB : Got async event{seq}: port error\n"
            f"h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB{seq}/0\n"
            for seq in SEQUENCES
        ),
        encoding="utf-8",
    )
    db = str(tmp_path / "s.db")
    assert main(["ingest", "--db", db, "--run", "e", "--quiet", str(log), str(more)]) == 0
    for args in (["nccl"], ["report"], ["export", "--format", "md", "--out", "-"]):
        out = cli(*args, "--db", db, "--run", "e")
        assert out.returncode == 0, out.stderr
        assert not RAW_CONTROL.search(out.stdout + out.stderr), args
    shown = cli("nccl", "--db", db, "--run", "e").stdout
    assert "NET/\\x1b]52;c;cHduZWQ=\\x07IBext" in shown
    assert "NET/\\x1b]0;PWNED-title\\x07IBext" in shown


@pytest.mark.parametrize("seq", SEQUENCES)
def test_the_sanitiser_shows_every_sequence(seq):
    for text in (visible(f"a{seq}b"), printable(f"a{seq}b")):
        assert not RAW_CONTROL.search(text) and "\u202e" not in text
        assert text.startswith("a\\") and text.endswith("b")
    assert visible("line\n\ttab") == "line\n\ttab"


def test_year_zero_timestamp_is_unknown_not_refused(tmp_path):
    # year0_timestamp.log line 2: `[0000-01-01 00:00:00] h:1:2 [0] NCCL INFO NCCL version 2.18.3`
    db = str(tmp_path / "s.db")
    log = TURN3 / "nccl" / "year0_timestamp.log"
    assert main(["ingest", "--db", db, "--run", "y", "--quiet", str(log)]) == 0
    con = store.connect(db)
    try:
        versions = con.execute("SELECT nccl_version FROM nccl_processes").fetchall()
    finally:
        con.close()
    assert versions == [("2.18.3",)]


FR = sorted(p.name for p in (TURN3 / "fr").iterdir())


@pytest.mark.parametrize("case", FR)
def test_flight_recorder_dump_with_odd_fields(tmp_path, case):
    """Each crafted dump beside the other dumps of its job (the JSON ones: the bundled fr_op
    ranks 0, 1, 3, whose ground truth is rank 1's all_reduce against the others' all_gather at
    seq 6) or alone (the pickle ones): the hang page stands, nothing raw is printed."""
    run = tmp_path / "run"
    run.mkdir()
    for f in (TURN3 / "fr" / case).iterdir():
        shutil.copy(f, run / f.name)
    if case.startswith("json"):
        for r in (0, 1, 3):
            shutil.copy(SAMPLES / "fr_op" / f"rank{r}.json.gz", run)
    db = str(tmp_path / "s.db")
    assert main(["ingest", "--db", db, "--run", "h", "--quiet", str(run)]) == 0
    out = cli("hang", "--db", db, "--run", "h")
    assert out.returncode == 0, out.stderr
    assert not RAW_CONTROL.search(out.stdout + out.stderr)
    assert "not available" not in out.stdout
    if case.startswith("json") and "entry" not in case:
        assert "rank 1 called all-reduce where ranks 0, 2, 3 called all-gather" in out.stdout
    if case.endswith(("null", "list")):
        section = json.loads(cli("hang", "--db", db, "--run", "h", "--format", "json").stdout)
        assert "unknown" in section["versions"]
        assert all(isinstance(v, str) for v in section["versions"])


def test_a_file_name_cannot_pass_for_a_second_message(tmp_path):
    name = "bad\ncommwall: error: fake.log\x1b[2J"
    bad = tmp_path / name
    bad.write_text("not a trace at all\n")
    out = cli("ingest", "--db", str(tmp_path / "s.db"), "--run", "n", str(bad))
    assert out.returncode == 2
    assert "\ncommwall: error: fake.log" not in out.stderr
    assert "bad\\ncommwall: error: fake.log\\x1b[2J" in out.stderr
    assert str(IngestError(name, "x")) == "bad\\ncommwall: error: fake.log\\x1b[2J: x"
    assert shown_name("plain.log") == "plain.log"


def test_a_file_over_the_limit_is_refused_by_its_size_unread(tmp_path, monkeypatch):
    big = tmp_path / "big.log"
    with big.open("wb") as f:  # sparse: 10 GB on paper, nothing on disk
        f.truncate(10 * 10**9)

    def unread(*_a, **_k):
        raise AssertionError("the file was read")

    monkeypatch.setattr(store_parse, "sha256_of", unread)
    con = store.connect(":memory:")
    with pytest.raises(IngestError, match="file is 10,000,000,000 bytes, over the limit"):
        store.ingest(con, "big", [big], ParseOptions(), parse=unread)
    con.close()


def test_every_printer_of_the_cli_goes_through_the_sanitiser():
    """Source check: outside cli/commands/_output.py (whose printers call `printable`), a call
    to print() or .write() in cli/ prints a constant or a `printable(...)` value."""
    import ast  # noqa: PLC0415

    from conftest import ROOT  # noqa: PLC0415

    bad = []
    for path in sorted((ROOT / "cli").rglob("*.py")):
        if path.name == "_output.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            f = getattr(node, "func", None)
            name = getattr(f, "id", None) or getattr(f, "attr", None)
            if not isinstance(node, ast.Call) or name not in ("print", "write") or not node.args:
                continue
            arg = node.args[0]
            safe = isinstance(arg, ast.Constant) or (
                isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "printable"
            )
            if not safe:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bad == []


def _claimed_kineto(tmp_path, world: int, pg_size: int):
    import gzip  # noqa: PLC0415

    doc = json.loads(gzip.decompress((SAMPLES / "gloo_4rank_sleep" / "rank0.pt.trace.json.gz")
                                     .read_bytes()))  # fmt: skip
    doc["distributedInfo"]["world_size"] = world
    doc["distributedInfo"]["pg_config"][0]["pg_size"] = pg_size
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


def _claimed_fr(tmp_path, n: int, size: int):
    import gzip  # noqa: PLC0415

    doc = json.loads(gzip.decompress((SAMPLES / "fr_op" / "rank0.json.gz").read_bytes()))
    for e in doc["entries"]:
        e["collective_seq_id"], e["input_sizes"] = n, [[size]]
    doc["pg_config"][""]["ranks"] = f"[0, 1, 2, {n}]"
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("claim", [10**9, 2**31 - 1, 2**63 - 1])
@pytest.mark.parametrize("kind", ["kineto", "flight_recorder"])
def test_header_claims_under_a_memory_cap(tmp_path, kind, claim):
    """World sizes, group sizes, sequence numbers, ranks and tensor sizes claimed at 10^9, 2^31
    and 2^63: each file is stored (or refused with its reason) and reported under the cap, in
    memory that does not grow with the claim."""
    if kind == "kineto":
        path = _claimed_kineto(tmp_path, min(claim, 2**31 - 1), claim)
    else:
        path = _claimed_fr(tmp_path, claim, claim)
    db = str(tmp_path / "s.db")
    ingested = cli("ingest", "--db", db, "--run", "c", str(path), cap=CAP)
    if ingested.returncode != 0:  # refused: with the file named and no bug reported
        assert path.name in ingested.stderr and "please report" not in ingested.stderr
        return
    for args in (["report", "--format", "json"], ["hang"], ["nccl"]):
        out = cli(*args, "--db", db, "--run", "c", cap=CAP)
        assert out.returncode == 0, (args, out.stderr[-2000:])
