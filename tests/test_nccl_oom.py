"""A rank that runs out of GPU memory: its `torch.OutOfMemoryError` (or the older
`RuntimeError: CUDA out of memory`, `torch.cuda.OutOfMemoryError`, C++'s `what():`) is a crash
row of its own kind (`oom`), and when a rank has several fatal errors the report names the
first as what it died of; the later ones (a prefetcher's timeout, the watchdog's) came after.

The real case is 029 (MLPerf GNN, 8 x H200 under `srun --label`): rank 7's embedding thread ran
out of GPU memory ten minutes before the watchdog fired, and the report used to blame the last
error rank 7 printed, a prefetcher timeout, sending the reader to the input pipeline."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest
from nccl_real import ingest_all, real_logs
from test_nccl_lines import run

from commwall.analysis.db import load_modules
from commwall.analysis.hangs.stopped import crash_stop, stop_sentence
from commwall.analysis.nccl.crashes import crash_sentence, oom_quote
from commwall.analysis.nccl.section import nccl_section
from commwall.ingest import store
from commwall.ingest.formats.nccl_log import parse
from commwall.ingest.formats.nccl_log.parser import MAX_LINE_CHARS
from commwall.ingest.formats.nccl_log.torch_lines import classify

LOG_029_REAL = next(log for log in real_logs() if log.name.startswith("029"))
LOG_029 = LOG_029_REAL.path

# ---- 029, read by hand -------------------------------------------------------------------

#: Lines of 029 (1-based) and what they say, checked against the file below.
#: 4486 `7: Exception in thread Thread-33 (EmbedThread):`: the traceback of rank 7's thread
#: 4513 `7: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB. GPU 7 has a
#:      total capacity of 139.80 GiB of which 1.28 GiB is free. Including non-PyTorch ...`
#: 4637 `5: RuntimeError: Time out when prefetcher wait for the sampled batch at 600 seconds.`
#:      (the first of every rank's prefetcher timeouts, to line 4836; under launcher tags only)
#: 4837 `2: [rank2]:[E1003 22:26:03.467156987 ProcessGroupNCCL.cpp:633] [Rank 2] Watchdog caught
#:      collective operation timeout: WorkNCCL(SeqNum=92, OpType=ALLREDUCE, ...`: the first
#: 5136 `7: [rank7]: RuntimeError: Time out when prefetcher gets embed data at 600 seconds.`
BY_HAND = {
    4486: "7: Exception in thread Thread-33 (EmbedThread):",
    4513: "7: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB. GPU 7 has "
    "a total capacity of 139.80 GiB of which 1.28 GiB is free.",
    4637: "5: RuntimeError: Time out when prefetcher wait for the sampled batch at 600 seconds.",
    4837: "2: [rank2]:[E1003 22:26:03.467156987 ProcessGroupNCCL.cpp:633] [Rank 2] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=92, OpType=ALLREDUCE",
    5136: "7: [rank7]: RuntimeError: Time out when prefetcher gets embed data at 600 seconds.",
}


@pytest.fixture(scope="module")
def lines_029() -> list[str]:
    with gzip.open(LOG_029, "rt", errors="replace") as f:
        return f.read().splitlines()


@pytest.fixture(scope="module")
def section_029(tmp_path_factory):
    (s,) = ingest_all(tmp_path_factory.mktemp("oom") / "s.duckdb", [LOG_029_REAL]).values()
    return s


def test_the_lines_this_file_relies_on(lines_029):
    for no, text in BY_HAND.items():
        assert lines_029[no - 1].startswith(text), no
    # nothing before line 4513 says rank 7 (or any rank) ran out of memory
    assert not any("out of memory" in s for s in lines_029[:4512])
    # the first watchdog timeout of the file is line 4837
    first = next(i for i, s in enumerate(lines_029, 1) if "Watchdog caught collective" in s)
    assert first == 4837


def test_029_oom_is_a_crash_row_of_rank_7(tmp_path):
    # line 4513 `7: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB ...`
    # carries only the launcher tag `7:`; the tag is rank 7 because every `[rankN]:` header
    # under it says so (line 5136 `7: [rank7]: RuntimeError: ...`); the file has no NCCL INFO
    # line, so no NCCL process vouches for the tag.
    rows = parse(LOG_029).tables["nccl_timeouts"].to_pylist()
    oom = [r for r in rows if r["kind"] == "oom"]
    assert [(r["line_no"], r["rank"], r["rank_source"]) for r in oom] == [(4513, 7, "tag_header")]
    assert oom[0]["message"].startswith(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB."
    )
    # the line-5136 exception is still a crash row of rank 7, after it
    (later,) = [r for r in rows if r["kind"] == "crash" and r["rank"] == 7]
    assert later["line_no"] == 5136 and later["message"].startswith("RuntimeError: Time out")


def test_029_rank_7_died_of_running_out_of_gpu_memory(section_029):
    c = section_029["crashed"]
    (r7,) = [r for r in c["by_rank"] if r["rank"] == 7]
    # line 4513 is rank 7's first fatal error, line 5136 its last
    assert (r7["kind"], r7["line"]) == ("oom", 4513)
    assert r7["crash"].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
    assert r7["later_crash"] == (
        "RuntimeError: Time out when prefetcher gets embed data at 600 seconds."
    )
    (t,) = section_029["timeouts"]["collectives"]
    assert t["crashed"] == [7] and t["likely_culprits"] == [7]
    # line 4513 comes before the first watchdog line, 4837
    assert t["crash_details"][7]["before_timeout"] is True
    assert t["crash_details"][7]["line"] == 4513


def test_029_the_sentence_names_the_oom_and_the_timeouts_after_it(section_029):
    (finding,) = [f for f in section_029["findings"] if f.startswith("watchdog timeout")]
    assert "rank 7 died: it ran out of GPU memory (torch.OutOfMemoryError" in finding
    # quoted from line 4513: what was asked for and what was free
    assert "Tried to allocate 2.16 GiB" in finding and "of which 1.28 GiB is free" in finding
    assert "before the watchdog timed out" in finding
    # the prefetcher timeout of line 5136 is named as later, not as the cause
    assert finding.index("out of GPU memory") < finding.index("Time out when prefetcher")
    assert "later errors came after that (the last: RuntimeError: Time out" in finding
    # PyTorch's advice on fragmentation, after the free memory, is left out
    assert "expandable_segments" not in finding
    # the watchdog is still what stopped the job
    stop = stop_sentence({"nccl": section_029})
    assert stop.startswith("The job stopped: NCCL's watchdog timed out on 1 collective(s)")
    assert "rank 7 died: it ran out of GPU memory" in stop


# ---- line shapes ---------------------------------------------------------------------------

OOM_NEW = (
    "CUDA out of memory. Tried to allocate 2.16 GiB. GPU 7 has a total capacity of 139.80 GiB "
    "of which 1.28 GiB is free."
)
OOM_OLD = (
    "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.24 "
    "GiB already allocated; 3.19 MiB free; 14.35 GiB reserved in total by PyTorch)"
)

# line -> (rank, rank_source, message) of the oom row; rank None: no tag names one
SHAPES = {
    # srun --label: the launcher tag alone (029 line 4513)
    f"7: torch.OutOfMemoryError: {OOM_NEW}": (7, "launcher_tag", f"torch.OutOfMemoryError: {OOM_NEW}"),
    # PyTorch's own rank prefix, with and without a launcher tag in front
    f"[rank3]: torch.cuda.OutOfMemoryError: {OOM_NEW}": (3, "header", f"torch.cuda.OutOfMemoryError: {OOM_NEW}"),
    f"4: [rank4]: RuntimeError: {OOM_OLD}": (4, "header", f"RuntimeError: {OOM_OLD}"),
    # OpenMPI --tag-output
    "[1,5]<stderr>:RuntimeError: CUDA error: out of memory": (5, "launcher_tag", "RuntimeError: CUDA error: out of memory"),
    # C++'s what() of c10::OutOfMemoryError
    f"2:   what():  {OOM_NEW}": (2, "launcher_tag", OOM_NEW),
    # ROCm
    "6: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB.": (6, "launcher_tag", "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB."),
    # no rank anywhere: unattributed
    f"torch.OutOfMemoryError: {OOM_NEW}": (None, None, f"torch.OutOfMemoryError: {OOM_NEW}"),
    # torchrun's [defaultN]: is a local rank, no global one
    f"[default3]:torch.OutOfMemoryError: {OOM_NEW}": (None, None, f"torch.OutOfMemoryError: {OOM_NEW}"),
}  # fmt: skip


@pytest.mark.parametrize("line", list(SHAPES))
def test_oom_line_shapes(line):
    t = classify(line)
    assert t is not None and t.kind == "oom"
    rank, source, message = SHAPES[line]
    assert (t.fields["rank"], t.fields["rank_source"], t.message) == (rank, source, message)


@pytest.mark.parametrize(
    "line",
    [
        # 029 line 5113: rank 7's loader echoing the error it caught, not the exception itself
        "7: Catch exception in the EmbedThread: CUDA out of memory. Tried to allocate 2.16 GiB.",
        # a logger's sentence about an OOM that was handled
        "WARNING: caught RuntimeError: CUDA out of memory, retrying with a smaller batch",
        "7: ValueError: CUDA out of memory is not a value",
        "7: torch.OutOfMemoryError",  # no message: not a traceback's last line
        # Python's logging format: a level, the logger, then the message it logged
        "WARNING:__main__:RuntimeError: CUDA out of memory. Retrying with a smaller batch",
        "INFO:root:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20 MiB",
        # a c10 warning header (`[W file:line]`) in front: PyTorch warned, nothing died
        "[rank1]:[W reducer.cpp:1] RuntimeError: CUDA out of memory. Tried to allocate 2 MiB",
    ],
)
def test_lines_that_are_no_oom(line):
    t = classify(line)
    assert t is None or t.kind != "oom"


def test_oom_rows_land_in_tables():
    out = run(
        f"7: torch.OutOfMemoryError: {OOM_NEW}",
        f"torch.OutOfMemoryError: {OOM_NEW}",
        "7: Catch exception in the EmbedThread: CUDA out of memory.",
        # NCCL's own out-of-memory is an NCCL warning, not a PyTorch crash
        "node01:4100:4100 [0] misc/utils.cc:12 NCCL WARN Cuda failure 'out of memory'",
    )
    got = [(r["line_no"], r["kind"], r["rank"]) for r in out["nccl_timeouts"]]
    assert got == [(1, "oom", 7), (2, "oom", None)]
    assert [w["level"] for w in out["nccl_warnings"]] == ["WARN"]
    assert out["_count"][0]["torch"] == 2  # PyTorch's lines, not NCCL's
    assert out["_count"][0]["nccl"] == 1


def test_a_launcher_tag_is_a_rank_only_where_its_headers_agree():
    def sources(*lines: str) -> list:
        return [(r["rank"], r["rank_source"]) for r in run(*lines)["nccl_timeouts"]]

    oom = f"1: torch.OutOfMemoryError: {OOM_NEW}"
    # tag 1 prints `[rank1]:` only: PyTorch vouches for it
    assert sources(oom, "1: [rank1]: RuntimeError: later") == [
        (1, "tag_header"),
        (1, "header"),
    ]
    # tag 1 is a node running ranks 8 and 9 (torchrun under srun): no rank
    assert sources(oom, "1: [rank8]: RuntimeError: a", "1: [rank9]: RuntimeError: b") == [
        (1, "launcher_tag"),
        (8, "header"),
        (9, "header"),
    ]


@pytest.mark.parametrize(
    "message,quote",
    [
        (
            f"torch.OutOfMemoryError: {OOM_NEW} Including non-PyTorch memory, this process has",
            f"torch.OutOfMemoryError: {OOM_NEW}",
        ),
        (
            f"RuntimeError: {OOM_OLD}",
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB "
            "total capacity; 14.24 GiB already allocated; 3.19 MiB free …)",
        ),
        ("RuntimeError: CUDA error: out of memory", "RuntimeError: CUDA error: out of memory"),
    ],
)
def test_oom_quote(message, quote):
    assert oom_quote(message) == quote


@pytest.mark.parametrize(
    "line",
    [
        "[" * (MAX_LINE_CHARS - 100) + " out of memory",
        "a:" * ((MAX_LINE_CHARS - 100) // 2) + " out of memory",
        "7: " * ((MAX_LINE_CHARS - 100) // 3) + "RuntimeError: out of memory",
        "(" * (MAX_LINE_CHARS - 100) + "torch.OutOfMemoryError: CUDA out of memory x",
    ],
    ids=["brackets", "colons", "tags", "parens"],
)
def test_oom_shapes_take_linear_time(tmp_path, line):
    p = tmp_path / "long.log"
    p.write_text(f"node01:4100:4100 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n{line}\n")
    t0 = time.perf_counter()
    parse(p)
    assert time.perf_counter() - t0 < 1.5


# ---- the report ------------------------------------------------------------------------------


def _section(tmp_path: Path, *tail: str, tags: tuple[str, ...] = ("2:", "3:")) -> dict:
    """Two processes under launcher tags (ranks 2 and 3 of a 4-rank communicator, by their
    init lines), then `tail`."""
    lines = [
        f"{tag} nodeA:{100 + i}:{110 + i} [{i}] NCCL INFO ncclCommInitRank comm 0x{i + 1} rank "
        f"{2 + i} nranks 4 cudaDev {i} busId {i + 1}000 commId 0xabc - Init START"
        for i, tag in enumerate(tags)
    ] + list(tail)
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    con = store.connect(tmp_path / "s.duckdb")
    assert store.ingest(con, "r", [log]).committed
    return nccl_section(load_modules(con), 1)


def test_the_first_fatal_error_is_what_the_rank_died_of(tmp_path):
    s = _section(
        tmp_path,
        f"3: torch.OutOfMemoryError: {OOM_NEW} Including non-PyTorch memory ...",
        "3: RuntimeError: Time out when prefetcher wait for sample flag at 600 seconds.",
        "3: [rank3]: RuntimeError: Time out when prefetcher gets embed data at 600 seconds.",
    )
    (r,) = s["crashed"]["by_rank"]
    assert (r["rank"], r["kind"], r["line"]) == (3, "oom", 3)
    assert r["later_crash"].startswith("RuntimeError: Time out when prefetcher gets embed")
    assert crash_stop({"nccl": s}) == (
        f"The job died: rank 3 died of running out of GPU memory (torch.OutOfMemoryError: "
        f"{OOM_NEW}), and its later errors came after that (the last: RuntimeError: Time out "
        "when prefetcher gets embed data at 600 seconds.)."
    )


def test_an_oom_of_no_known_rank_is_unattributed(tmp_path):
    s = _section(tmp_path, f"torch.OutOfMemoryError: {OOM_NEW}")
    c = s["crashed"]
    assert (c["ranks"], c["unattributed"]) == ([], 1)
    assert c["unattributed_first"]["kind"] == "oom"
    assert crash_stop({"nccl": s}) == (
        "The job died: a process of no known rank died of running out of GPU memory "
        f"(torch.OutOfMemoryError: {OOM_NEW})."
    )


def test_crash_sentence_without_a_kind_is_unchanged():
    # a section made before crash rows had a kind reads as before
    crashed = {"by_rank": [{"rank": 1, "crash": "NCCL error in: x.cpp:1, internal error",
                            "last_error": None}]}  # fmt: skip
    assert crash_sentence(crashed) == "rank 1 died of NCCL error in: x.cpp:1, internal error"
