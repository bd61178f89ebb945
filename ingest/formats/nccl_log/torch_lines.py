"""PyTorch ProcessGroupNCCL (c10d) lines: watchdog timeouts, progress, flight-recorder
notices, crash blocks and NCCL errors (nccl_logs.md §13)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from commwall.ingest.formats.nccl_log.prefix import outer

C = re.compile

#: c10 log headers: PyTorch >= 2.2 (`[rank3]:[E1104 10:15:42.1 File.cpp:616] `, rank tag
#: optional), <= 2.1 (`[E File.cpp:616] `) and glog builds (`E1104 10:15:42.1 123 File.cpp:616] `).
HEADERS = (
    C(
        r"(?:\[rank(?P<rank>\d+)\]:)?\[(?P<sev>[EWIF])(?P<mmdd>\d{3,4}) "
        r"(?P<hms>\d\d:\d\d:\d\d\.\d+) (?P<file>[\w.]+):(?P<line>\d+)\] ?(?P<msg>.*)$"
    ),
    C(r"\[(?P<sev>[EWIF]) (?P<file>[\w.]+):(?P<line>\d+)\] ?(?P<msg>.*)$"),
    C(
        r"(?:^|\s)(?P<sev>[EWIF])(?P<mmdd>\d{4}) (?P<hms>\d\d:\d\d:\d\d\.\d+) +\d+ "
        r"(?P<file>[\w.]+):(?P<line>\d+)\] ?(?P<msg>.*)$"
    ),
)
PG = C(
    r"\[(?:PG (?P<pg>\d+)(?: \((?P<desc>[^)]*)\))?|PG ID (?P<pgid>\d+) PG GUID (?P<guid>[^\s(\]]+)"
    r"(?:\((?P<desc2>[^)]*)\))?) Rank (?P<rank>\d+)\]"
)
TIMEOUT = C(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+)(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?, "
    r"Timeout\(ms\)=(?P<tmo>\d+)\)(?: ran for (?P<ran>\d+) milliseconds before timing out)?"
)
#: A rank's progress: last enqueued / completed SeqNum (three wordings plus the dump-signal
#: notice), and the work it is about when the line names one.
PROGRESS = C(
    r"[Ll]ast enqueued (?:NCCL )?work: (?P<enq>-?\d+), "
    r"last completed (?:NCCL )?work: (?P<done>-?\d+)"
)
PROGRESS_AT = C(
    r"(?:detected by watchdog at work: |watchdog at work sequence id: |Timeout at NCCL work: )"
    r"(?P<seq>\d+)"
)
HEARTBEAT = C(r"watchdog got stuck for (?P<s>\d+) seconds|Heartbeat monitor timed out")
DUMP = C(
    r"(?i)dump(?:ing)? (?:debug info|signal)|flight ?recorder|preparing to dump|signal dumping"
)
CRASH = C(
    r"what\(\):|terminate called after throwing|"
    r"Some NCCL operations have failed or timed out\. Due to the asynchronous"
)
#: The last line of a Python traceback under PyTorch's rank prefix (`[rank7]: RuntimeError:
#: Time out when ...`): the rank died of that exception (a crash row, as `what():` is).
PY_EXCEPTION = C(
    r"\[rank(?P<rank>\d+)\]: (?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): (?P<msg>.*)$"
)
#: A rank's process or thread dying of running out of GPU memory: the last line of its Python
#: traceback (`torch.OutOfMemoryError` since PyTorch 2.5, `torch.cuda.OutOfMemoryError` 1.13 to
#: 2.4, `RuntimeError` before; `CUDA error: out of memory` when the CUDA runtime says it) or the
#: `what():` of C++'s c10::OutOfMemoryError, with nothing but tags in front (launcher tags,
#: `[rankN]:`, bracketed timestamps): a logger's sentence that mentions an OOM is no death.
OOM = C(
    # tags: bracketed (not a c10 warning or info header, `[W reducer.cpp:1]`), parenthesised, or
    # a word and a colon that is no logging level (`WARNING:__main__:` is a logger's sentence)
    r"^(?P<pre>(?:\s*(?:\[(?![WI][\d ])[^\]]*\]:?|\([^)]*\)"
    r"|(?!(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):)[^\s:\[(]+:))*)\s*"
    r"(?:(?P<exc>(?:torch\.(?:cuda\.)?)?OutOfMemoryError|RuntimeError):|what\(\):)\s*"
    r"(?P<msg>(?:CUDA|HIP) (?:error: )?out of memory\b.*)$"
)
#: What every OOM line holds (chunk.classify_lines lets the lines that say it through).
OOM_MARK = "out of memory"
#: A launcher stopping the job from outside: the user's Ctrl-C (MPICH/Intel MPI's Hydra
#: `[mpiexec@host] Sending Ctrl-C to processes as requested`; Slurm's `srun: interrupt (one more
#: within 1 sec to abort)`, `srun: forcing job termination`), a signal forwarded (Open MPI's
#: `mpirun: Forwarding signal 2 to job`), the scheduler cancelling the job (`*** STEP 12.0 ON
#: node CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***`) or torchrun's agent killed
#: (`Received 15 death signal, shutting down workers`). Phrases no other program prints.
INTERRUPT = C(
    r"(?P<msg>\[mpiexec@[^\]]*\] Sending Ctrl-C to processes as requested"
    r"|srun: interrupt \(one more within 1 sec to abort\)|srun: forcing job termination"
    r"|mpirun: Forwarding signal \d+ to job"
    r"|\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT [^*]*\*\*\*"
    r"|Received (?:\d+|(?:Signals\.)?SIG[A-Z]+) death signal, shutting down workers)"
)
#: What every INTERRUPT line holds, as one RE2-compatible alternation of literal parts
#: (chunk.classify_lines lets such lines through).
INTERRUPT_MARKS = (
    r"Sending Ctrl-C to processes|srun: interrupt|srun: forcing job termination|"
    r"mpirun: Forwarding signal|CANCELLED AT|death signal, shutting down"
)
NCCL_ERROR = C(
    r"NCCL error in: (?P<where>\S+?),? (?P<what>.*?)(?:, NCCL version (?P<ver>\d+\.\d+\.\d+\S*))?$"
)
TEST_FAILURE = C(r"Test NCCL failure (?P<where>\S+) '(?P<what>[^']*)'")
#: PyTorch's NCCL exception text carries NCCL's own last error on the line after this one
#: (`Last error:` / `NET/IB : Requested properties for vNic 8, ...`), under the same tag.
LAST_ERROR = C(r"^(?P<pre>.*?)Last error:\s*$")


@dataclass
class TorchLine:
    """One recognised PyTorch line. `kind`: timeout | progress | heartbeat | dump | crash |
    oom (a crash of running out of GPU memory) | last_error (a row of nccl_timeouts) or error
    (a row of nccl_warnings) or other (an unknown c10d line)."""

    kind: str
    fields: dict = field(default_factory=dict)
    message: str = ""


def _int(v: str | None) -> int | None:
    return None if v is None else int(v)


def _identity(msg: str, header_rank: str | None) -> dict:
    out: dict = {"rank": _int(header_rank), "rank_source": "header" if header_rank else None}
    m = PG.search(msg)
    if m:
        out["pg"] = m.group("pg") or m.group("pgid")
        out["pg_desc"] = m.group("desc") or m.group("desc2") or m.group("guid")
        out["pg_rank"] = int(m.group("rank"))
        if out["rank"] is None and (out["pg"] == "0" or out["pg_desc"] == "default_pg"):
            out["rank"], out["rank_source"] = out["pg_rank"], "default_pg"
    return out


def launcher_rank(prefix: str) -> dict:
    """The rank a launcher's tag in front of a PyTorch line names (`7:   what(): ...` under
    srun --label): rank and rank_source 'launcher_tag' (the analysis keeps it only where the
    log's NCCL processes with that tag all hold that one rank), or 'header' for PyTorch's own
    `[rankN]:`; no rank when the text names none."""
    o = outer(prefix)
    if o.tag_rank is None:
        return {}
    source = "header" if (o.tag or "").startswith("[rank") else "launcher_tag"
    return {"rank": o.tag_rank, "rank_source": source}


def crash_of_error(line: str, t: TorchLine) -> TorchLine | None:
    """The crash an NCCL error line also is: the `what():` of the exception a rank died of
    (`terminate called after throwing ... what():  NCCL error in: ..., invalid usage`), with
    the rank its header or launcher tag names; None for any other error line."""
    if t.kind != "error" or "what():" not in line:
        return None
    at = line.index("what():")
    f = {k: t.fields.get(k) for k in ("rank", "rank_source", "pg", "pg_desc", "pg_rank")}
    if f["rank"] is None:
        f.update(launcher_rank(line[:at]))
    return TorchLine("crash", f, line[at + len("what():") :].strip())


def last_error(line: str, after: str) -> TorchLine | None:
    """NCCL's last error quoted under a crash (`Last error:` and, on the next line under the
    same tag, its text), as a last_error row with the tag's rank; None when `line` is not that
    or the next line is not under the same tag."""
    m = LAST_ERROR.match(line)
    if m is None:
        return None
    pre = m.group("pre")
    text = after[len(pre) :].strip() if after.startswith(pre) else ""
    if not text or LAST_ERROR.match(after):
        return None
    return TorchLine("last_error", launcher_rank(pre), text)


def out_of_memory(line: str) -> TorchLine | None:
    """The oom crash `line` is (`7: torch.OutOfMemoryError: CUDA out of memory. Tried to
    allocate 2.16 GiB ...`), with the rank its `[rankN]:` or launcher tag names (none when the
    line has no such tag); None for any other line."""
    m = OOM.match(line) if OOM_MARK in line else None
    if m is None:
        return None
    exc = m.group("exc")
    rank = {"rank": None, "rank_source": None} | launcher_rank(m.group("pre"))
    return TorchLine("oom", rank, (f"{exc}: " if exc else "") + m.group("msg"))


def interrupted(line: str) -> TorchLine | None:
    """The interrupt row of `line` when it is a launcher stopping the job (INTERRUPT): kind
    interrupt, no rank (the launcher speaks for the whole job); None for any other line."""
    m = INTERRUPT.search(line) if ("Ctrl-C" in line or "srun:" in line or "signal" in line
                                  or "CANCELLED" in line) else None  # fmt: skip
    if m is None:
        return None
    return TorchLine("interrupt", {"rank": None, "rank_source": None}, m.group("msg").strip())


def classify(line: str) -> TorchLine | None:
    """The PyTorch line `line` is, or None when it is not one (the caller checked it mentions
    NCCL, or is a fatal exception's shape: a rank's Python exception, an out-of-memory, or a
    launcher's interrupt)."""
    oom = out_of_memory(line)
    if oom is not None:
        return oom
    stop = interrupted(line)
    if stop is not None:
        return stop
    header = next((m for rx in HEADERS if (m := rx.search(line))), None)
    if header is None and (py := PY_EXCEPTION.search(line)) and not TIMEOUT.search(line):
        rank = {"rank": int(py.group("rank")), "rank_source": "header"}
        return TorchLine("crash", rank, f"{py.group('exc')}: {py.group('msg')}")
    msg = header.group("msg") if header else line
    if header is None and not any(
        rx.search(line) for rx in (CRASH, TEST_FAILURE, NCCL_ERROR, TIMEOUT, PROGRESS)
    ):
        return None
    f = _identity(msg, header.groupdict().get("rank") if header else None)
    if header and header.groupdict().get("mmdd"):
        f["time_text"] = f"{header.group('mmdd')} {header.group('hms')}"
    crash = CRASH.search(line)
    m = TIMEOUT.search(msg)
    if m:  # a crash's `what():` that quotes the timeout keeps kind crash, with its fields
        f.update(
            seq=int(m.group("seq")), op_type=m.group("op"), numel_in=_int(m.group("nin")),
            numel_out=_int(m.group("nout")), timeout_ms=int(m.group("tmo")),
            ran_ms=_int(m.group("ran")),
        )  # fmt: skip
        return TorchLine("crash" if crash else "timeout", f, msg)
    m = PROGRESS.search(msg)
    if m:
        at = PROGRESS_AT.search(msg)
        f.update(last_enqueued=int(m.group("enq")), last_completed=int(m.group("done")))
        f["seq"] = int(at.group("seq")) if at else None
        return TorchLine("progress", f, msg)
    m = NCCL_ERROR.search(msg) or TEST_FAILURE.search(msg)
    if m:
        f.update(where=m.group("where"), what=m.group("what"))
        f["version"] = m.groupdict().get("ver")
        return TorchLine("error", f, msg)
    if crash:
        return TorchLine("crash", f, msg)
    m = HEARTBEAT.search(msg)
    if m:
        f["ran_ms"] = int(m.group("s")) * 1000 if m.group("s") else None
        return TorchLine("heartbeat", f, msg)
    if DUMP.search(msg):
        return TorchLine("dump", f, msg)
    return TorchLine("other", f, msg)
