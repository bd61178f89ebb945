"""The state machine that turns a stream of log chunks into the nccl_* tables.

Each chunk is looked at with Arrow first (chunk.py): COLL lines, nearly all of a big log, go
to the vectorised parser (coll_batch) on a worker thread and never become Python objects;
every other line mentioning NCCL is cleaned, its core prefix found, and its message matched
against the few families `grammar.dispatch` names. Lines without a prefix may be a bare
version line, a PyTorch ProcessGroupNCCL line, or a damaged NCCL line. Processes are
numbered in the order their first line appears.

Topology lines (rings, trees, connections, channel counts) carry no communicator: they are
attributed to the communicator being initialised on the same (process, device) — between
`Init START` and `Init COMPLETE` (2.18+), or up to the next `Init COMPLETE` (older
versions); lines after init (runtime connection setup) go to the last communicator seen
there.
"""

from __future__ import annotations

import re
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.collective_names import normalize_op
from commwall.ingest.formats.nccl_log import grammar as g
from commwall.ingest.formats.nccl_log.chunk import (
    LAST_ERROR,
    classify_lines,
    line_array,
    split_colls,
)
from commwall.ingest.formats.nccl_log.coll_batch import parse_tails
from commwall.ingest.formats.nccl_log.nccl_tests import CANDIDATE, TestTables
from commwall.ingest.formats.nccl_log.prefix import (
    LEVEL_TOKEN,
    NO_OUTER,
    STRIPPED,
    Outer,
    clean,
    core,
    outer,
)
from commwall.ingest.formats.nccl_log.tables import I32, SCHEMAS, Spool, column, rows_table
from commwall.ingest.formats.nccl_log.torch_lines import (
    OOM_MARK,
    TIMEOUT,
    TorchLine,
    classify,
    crash_of_error,
    last_error,
)
from commwall.ingest.schema import TEXT_CUT

#: Distinct line heads remembered by the COLL fast path before the cache is reset.
HEAD_CACHE = 4096
#: What may stand between `NCCL INFO ` and ` opCount` on a COLL line: the op name.
_OP = re.compile(r"(?:[A-Za-z]+:)?")
#: Threads parsing COLL chunks (and chunks in flight at most).
WORKERS = 2
#: Topology rows a (process, device) may hold while waiting for its communicator to be named;
#: beyond, they are stored without one. A real init holds hundreds (rings of a 4,096-rank job:
#: one line per channel); a log of one repeated ring line and no init held them all in memory.
MAX_PENDING = 1 << 16
#: Characters of an unknown line kept.
MAX_TEXT = TEXT_CUT
#: A line longer than this is not read (counted as kind `too_long`): NCCL's longest lines, the
#: ring orders of a 4096-rank job, are about 20,000 characters.
MAX_LINE_CHARS = 1 << 16
#: NCCL's note that a proxy thread's sockets are being torn down (its communicator is aborted:
#: at exit without destroy_process_group, or after a failure elsewhere); the error returns the
#: thread logs next unwind that abort (kind abort_unwind).
ABORT_CALLED = "socketProgressOpt: abort called"
#: Cells of a tuning-table row read (2.29 prints 7 algorithms x 3 protocols = 21).
MAX_TUNING_CELLS = 64
#: A run of more digits than this is no NCCL value (uint64 ids have 20): the line is counted
#: as kind `out_of_range` instead of being read.
_LONG_NUMBER = re.compile(r"\d{21}")

TESTS = "nccl_test_results"
_COMM_COLS = list(SCHEMAS["nccl_communicators"].names)
_PROC_COLS = list(SCHEMAS["nccl_processes"].names)
Key = tuple[int, "int | None"]


def _int(v: str | None) -> int | None:
    return None if v is None else int(v)


def _version_text(v: tuple[int, int, int]) -> str:
    return f"{v[0]}.{v[1]}" + (f".{v[2]}" if v[2] else "")


class LogParser:
    """Feed it the file in chunks (`feed`), call `finish`, then take the tables (`tables`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.spools = {
            name: Spool(schema)
            for name, schema in SCHEMAS.items()
            if name not in ("nccl_files", "nccl_processes", "nccl_communicators", TESTS)
        }
        self.tests = TestTables()
        self.n = 0
        self.count = dict(nccl=0, recognised=0, unknown=0, damaged=0, torch=0)
        # (host, pid) of NCCL's prefix; both None on a line whose prefix was cut off
        self.procs: dict[tuple[str | None, int | None], int] = {}
        self.hosts_of_pid: dict[int | None, list[tuple[str | None, int]]] = {}
        self.proc_rows: list[dict[str, Any]] = []
        self.comms: list[dict[str, Any]] = []
        self.comm_at: dict[tuple[int, str], int] = {}
        self.open: dict[Key, str] = {}
        self.last: dict[Key, str] = {}
        self.started: set[Key] = set()
        self.pending: dict[Key, list[tuple[str, Any]]] = {}
        self.tuning: dict[Key, dict[str, list]] = {}
        self.after_unwind: dict[tuple[int, int], bool] = {}
        #: threads whose last line was NCCL's `socketProgressOpt: abort called`, and the threads
        #: whose current error-return chain unwinds that abort
        self.aborting: set[tuple[int, int]] = set()
        self.mtus: set[tuple[int, int]] = set()  # (proc, IB MTU enum) stored
        self.abort_chain: set[tuple[int, int]] = set()
        #: per thread, the rows of its error-return chain not yet stored, and whether a WARN of
        #: the thread came right before the chain (kind decided when the chain ends: `_settle`)
        self.chain_rows: dict[tuple[int, int], tuple[bool, list[tuple]]] = {}
        #: per process, whether its last NCCL line was a chain's (an error goes on unwinding in
        #: the thread that called the one that failed), and the line of its last WARN; per
        #: thread, the line of its last NCCL line
        self.proc_last: dict[int, str] = {}
        self.proc_warn_n: dict[int, int] = {}
        self.thread_n: dict[tuple[int, int], int] = {}
        #: True while COLL lines the fast path rejected are read, after the lines that follow
        #: them (`_land`): they settle no chain and move no thread's state
        self.late = False
        self.chains = 0
        self.versions: set[str] = set()
        #: the `[rankN]:` headers of the PyTorch lines under each launcher tag's number
        self.tag_headers: dict[int, set[int]] = {}
        self.bare: list[tuple[Outer, re.Match[str]]] = []
        self.floor = (0, 0, 0)
        self.heads: dict[bytes, int] = {}
        self.head_info: list[tuple[int, int | None, str | None, str]] = []
        self.worker = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="nccl-coll")
        self.inflight: deque[tuple[Future, tuple]] = deque()
        self.families = {
            name[3:]: (getattr(g, name[3:].upper()), getattr(self, name))
            for name in dir(self)
            if name.startswith("_f_")
        }

    # ---- the stream -------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Consume the next complete lines of the file (`data` ends at a line end; a last
        line without one is completed)."""
        if not data.endswith(b"\n"):
            data += b"\n"
        lines, offsets = line_array(data)
        base, self.n = self.n, self.n + len(lines)
        colls, general = classify_lines(lines)
        self._nccl_tests(lines, base)
        heads, index, first, tails = split_colls(lines, colls)
        ids, new = self._head_ids(heads, first)
        valid = ids[index] >= 0
        walk = sorted(
            [*((r, None) for r in general), *new, *((r, None) for r in colls[~valid])],
            key=lambda e: e[0],
        )
        skip = -1
        for row, head in walk:
            if row == skip:
                continue
            self.n = base + row + 1
            if head is None:
                after = data[offsets[row + 1] : offsets[row + 2]] if row + 1 < len(lines) else b""
                if self._line(data[offsets[row] : offsets[row + 1]], after):
                    skip = row + 1
            else:
                self._register(*head)
        self.n = base + len(lines)
        rows = colls[valid]
        job = (data, offsets, rows, base + rows + 1)
        self._submit(job, tails.filter(pa.array(valid)), ids[index][valid])
        if len(self.heads) > HEAD_CACHE:
            self.heads.clear()
            self.head_info.clear()

    def _nccl_tests(self, lines: pa.Array, base: int) -> None:
        """Hand the lines that may belong to an nccl-tests table to its reader, in order."""
        rows = np.flatnonzero(np.asarray(pc.match_substring_regex(lines, CANDIDATE)))
        if rows.size:
            heads = pc.binary_slice(lines.take(pa.array(rows)), 0, MAX_TEXT).to_pylist()
            for row, head in zip(rows.tolist(), heads, strict=True):
                self.tests.line(base + row + 1, head.decode("utf-8", "replace").rstrip("\r\n"))

    def _head_ids(self, heads: list[bytes], first: np.ndarray) -> tuple[np.ndarray, list]:
        """Head id of each distinct COLL head (-1: not an NCCL INFO prefix; those lines take
        the general path), and the new valid heads as (first row, (id, match, outer, op))."""
        ids = np.empty(len(heads), np.int64)
        new = []
        for d, head in enumerate(heads):
            h = self.heads.get(head)
            if h is None:
                line = clean(head)
                readable = len(line) <= MAX_LINE_CHARS and not _LONG_NUMBER.search(line)
                m = core(line + " ") if readable else None
                op = (m.group("msg") or "").strip() if m else ""
                ok = m and m.group("level") in ("INFO", "TRACE") and _OP.fullmatch(op)
                h = len(self.head_info) if ok else -1
                self.heads[head] = h
                if ok and m is not None:
                    self.head_info.append((-1, None, None, "unknown"))
                    new.append((int(first[d]), (h, m, line[: m.start()], op[:-1] or None)))
            ids[d] = h
        return ids, new

    def _register(self, h: int, m: re.Match[str], outer_text: str, name: str | None) -> None:
        """A new COLL line head, at its first line: its process and op."""
        proc = self._proc(m, outer_text, count=False)
        self.head_info[h] = (proc, _int(m.group("dev")), name, normalize_op(name))

    def _submit(self, job: tuple, tails: pa.Array, ids: np.ndarray) -> None:
        """Parse a chunk's COLL tails on a worker thread (Arrow compute releases the GIL, so
        it overlaps with the next chunks); land the oldest chunks beyond WORKERS in flight."""
        info = self.head_info
        cols = {
            "proc": pa.array([i[0] for i in info], pa.int32()),
            "dev": column([i[1] for i in info], pa.int32()),
            "nccl_op": pa.array([i[2] for i in info], pa.string()),
            "op": pa.array([i[3] for i in info], pa.string()),
        }
        self.inflight.append((self.worker.submit(parse_tails, tails, job[3], ids, cols), job))
        while len(self.inflight) > WORKERS:
            self._land(*self.inflight.popleft())

    def _land(self, future: Future, job: tuple) -> None:
        """Store a parsed chunk of COLL lines; its malformed ones take the general path."""
        batch, bad = future.result()
        self.spools["nccl_colls"].add_batch(batch)
        self.count["nccl"] += batch.num_rows
        self.count["recognised"] += batch.num_rows
        procs = np.bincount(batch.column("proc").to_numpy(), minlength=len(self.proc_rows))
        for p, k in enumerate(procs.tolist()):
            self.proc_rows[p]["n_lines"] += k
        data, offsets, rows, line_nos = job
        keep_n = self.n
        self.late = True  # read after the lines that follow it: no thread's state moves
        for i in bad:
            self.n = int(line_nos[i])
            self._line(data[offsets[rows[i]] : offsets[rows[i] + 1]])
        self.late = False
        self.n = keep_n

    # ---- one general line ---------------------------------------------------------------

    def _line(self, raw: bytes, after: bytes = b"") -> bool:
        """Read one line (`after`: the next line of the file, or empty). True when the next
        line was read with it (the rest of a line a terminal or a web page wrapped)."""
        line = clean(raw)
        if len(line) > MAX_LINE_CHARS:
            self._unreadable("too_long", None, line)
            return False
        if _LONG_NUMBER.search(line):
            self._unreadable("out_of_range", None, line)
            return False
        m = core(line) or STRIPPED.search(line)
        if m is None:
            return self._unprefixed(line, after)
        self.count["nccl"] += 1
        level, msg = m.group("level"), m.group("msg") or ""
        if " nRanks " in msg and not msg.startswith("comm "):
            msg = g.RCCL_TAIL.sub("", msg)
        proc = self._proc(m, line[: m.start()])
        dev = _int(m.group("dev"))
        tid = _int(m.group("tid")) or 0
        family = None
        if level == "WARN":
            self._warn(m, proc, line[: m.start()])
        elif level != "CALL":
            try:
                family = self._message(msg, proc, dev, tid)
            except (ValueError, OverflowError):  # a value no column can hold
                self.count["damaged"] += 1
                self._unknown(proc, "out_of_range", line)
                return False
            if family is None and g.BENIGN.match(msg) is None:
                self._moved((proc, tid), level, None, handled=False)
                self._unknown(proc, "unknown", line)
                return False
        self._moved((proc, tid), level, family, handled=level == "INFO", msg=msg)
        self.count["recognised"] += 1
        return False

    def _moved(
        self, key: tuple[int, int], level: str, family: str | None, handled: bool, msg: str = ""
    ) -> None:
        """The thread `key` logged a line of `level` and `family` (None: not one this parser
        stores): end its error-return chain unless the line goes on with it (`_settle`;
        `handled`: the line is an INFO the thread logged on its own, understood or benign), and
        note what the thread and its process did last."""
        if self.late:
            return
        proc = key[0]
        if family != "unwind":
            self.aborting.discard(key)
            if msg.startswith(ABORT_CALLED):
                self.aborting.add(key)
            self._settle(key, handled=handled)
        if level == "WARN":
            self.proc_warn_n[proc] = self.n
        self.proc_last[proc] = family or "other"
        self.thread_n[key] = self.n
        self.after_unwind[key] = family == "unwind"

    def _message(self, msg: str, proc: int, dev: int | None, tid: int) -> str | None:
        """Store the message as the first family that matches; that family's name."""
        for name in g.dispatch(msg):
            rx, handle = self.families[name]
            m = rx.match(msg)
            if m:
                handle(m, proc, dev, tid)
                return name
        return None

    def _unprefixed(self, line: str, after: bytes) -> bool:
        t = classify(line)
        if t is not None and t.fields.get("rank_source") == "header":
            self._tag_header(line, t.fields["rank"])
        if t is None and LAST_ERROR in line:
            quoted = last_error(line, clean(after))
            if quoted is not None:  # not counted: neither an NCCL line nor a c10d one
                self._torch(quoted)
                return True
        v = g.BARE_VERSION.search(line) if t is None else None
        if v:
            self.bare.append((outer(line[: v.start()]), v))
            self.versions.add(v.group("ver"))
            self.count["nccl"] += 1
            self.count["recognised"] += 1
            return False
        joined = _unwrapped(line, after) if t is None or t.kind == "other" else None
        if joined is not None:  # two physical lines, one timeout
            self.count["nccl"] += 2
            self.count["torch"] += 2
            self.count["recognised"] += 2
            self._torch(joined)
            return True
        if t is not None and t.kind == "interrupt":  # the launcher's: neither NCCL's nor torch's
            self._torch(t)
            return False
        if t is not None and "NCCL" not in line:
            # a rank's fatal Python exception or out-of-memory: PyTorch's, not NCCL's (another
            # line read only for saying `out of memory` is none of this parser's business)
            if t.kind in ("crash", "oom") or OOM_MARK not in line:
                self.count["torch"] += 1
                self._torch(t)
            return False
        if t is not None:
            self.count["torch"] += 1
            self.count["nccl"] += 1
            if t.kind == "other":
                self._unknown(None, "torch", line)
                return False
            self._torch(t)
            crash = crash_of_error(line, t)
            if crash is not None:  # the rank died of it: a crash row as well as the error
                self._torch(crash)
            self.count["recognised"] += 1
        elif LEVEL_TOKEN.search(line):
            self.count["nccl"] += 1
            self.count["damaged"] += 1
            self._unknown(None, "damaged", line)
        return False

    def _tag_header(self, line: str, rank: int) -> None:
        """Note that the launcher tag in front of `line`'s `[rankN]:` header (`7: [rank7]:
        ...`), if any, carried PyTorch's rank `rank`."""
        at = line.find("[rank")
        o = outer(line[:at]) if at > 0 else NO_OUTER
        if o.tag_rank is not None and not (o.tag or "").startswith("[rank"):
            self.tag_headers.setdefault(o.tag_rank, set()).add(rank)

    def _unreadable(self, kind: str, proc: int | None, line: str) -> None:
        """A line too long, or with a number out of range, counted as NCCL's when it names
        NCCL (the caller only passes lines that mention it) and kept (cut) for the report."""
        self.count["nccl"] += 1
        self.count["damaged"] += 1
        self._unknown(proc, kind, line)

    def _unknown(self, proc: int | None, kind: str, line: str) -> None:
        self.count["unknown"] += 1
        self.spools["nccl_unknown"].add((proc, self.n, kind, line[:MAX_TEXT]))

    def _need(self, version: tuple[int, int, int]) -> None:
        if version > self.floor:
            self.floor = version

    # ---- processes and communicators -------------------------------------------------------

    def _proc(self, m: re.Match[str], outer_text: str, count: bool = True) -> int:
        key = (m.group("host"), _int(m.group("pid")))
        p = self.procs.get(key)
        if p is None:
            p = self._glued(key)
        if p is None:
            p = self._unglued(key)
        if p is None:
            p = self.procs[key] = len(self.proc_rows)
            self.hosts_of_pid.setdefault(key[1], []).append((key[0], p))
            row = dict.fromkeys(_PROC_COLS)
            row.update(proc=p, host=key[0], pid=key[1], devices=[], first_line=self.n, n_lines=0)
            self.proc_rows.append(row)
        row = self.proc_rows[p]
        if count:
            row["n_lines"] += 1
        dev = m.group("dev")
        if dev is not None and int(dev) not in row["devices"]:
            row["devices"].append(int(dev))
        if row["launcher_tag"] is None and outer_text.strip():
            o = outer(outer_text)
            row["launcher_tag"], row["tag_rank"] = o.tag, o.tag_rank
        return p

    def _glued(self, key: tuple[str | None, int | None]) -> int | None:
        """The known process a line glued to other output names: same pid, and its host ends
        with the known host (`-1mew0` after `... 1/-1/-1` printed without a newline)."""
        host, pid = key
        if host is None:
            return None
        for known, p in self.hosts_of_pid.get(pid, ()):
            if known is not None and host.endswith(known) and host != known:
                self.procs[key] = p
                return p
        return None

    def _unglued(self, key: tuple[str | None, int | None]) -> int | None:
        """The known process whose first line was glued to other output (`sumoneflow-27`: an
        nccl-tests table row's `sum` before `oneflow-27:433602`), now seen with its own host
        name: same pid, and the known host ends with this one. It takes this host's name."""
        host, pid = key
        if host is None:
            return None
        known = self.hosts_of_pid.get(pid, [])
        for i, (glued, p) in enumerate(known):
            if glued is not None and glued.endswith(host) and glued != host:
                self.procs[key] = p
                self.proc_rows[p]["host"] = host
                known[i] = (host, p)
                return p
        return None

    def _comm(self, proc: int, comm: str, fresh: bool = False) -> dict[str, Any]:
        at = self.comm_at.get((proc, comm))
        if at is not None:
            row = self.comms[at]
            if not (fresh and row["status"] in ("Destroy COMPLETE", "Abort COMPLETE")):
                return row
        row = dict.fromkeys(_COMM_COLS)
        row.update(proc=proc, comm=comm, line_no=self.n, connected=[])
        self.comm_at[(proc, comm)] = len(self.comms)
        self.comms.append(row)
        return row

    def _attach(self, key: Key, table: str, row: list[Any] | dict[str, Any]) -> None:
        """Store a topology row (a list, comm at index 1) or apply a communicator update (a
        dict, table `@comm`)."""
        comm = self.open.get(key) or (self.last.get(key) if key in self.started else None)
        if comm is None:
            waiting = self.pending.setdefault(key, [])
            waiting.append((table, row))
            if len(waiting) >= MAX_PENDING:  # no communicator is coming: store them without
                self._resolve(key, None)
        else:
            self._place(key[0], comm, table, row)

    def _place(self, proc: int, comm: str | None, table: str, row: Any) -> None:
        if table != "@comm":
            row[1] = comm
            self.spools[table].add(tuple(row))
        elif comm is not None:
            c = self._comm(proc, comm)
            for k, v in row.items():
                if k == "connected":
                    c[k].append(v)
                else:
                    c[k] = v

    def _resolve(self, key: Key, comm: str | None) -> None:
        for table, row in self.pending.pop(key, []):
            self._place(key[0], comm, table, row)

    # ---- message families (name = grammar regex) -----------------------------------------------

    def _f_version(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        row = self.proc_rows[proc]
        row["nccl_version"], row["version_suffix"] = m.group("ver"), m.group("suffix") or None
        row["cuda_version"] = m.group("cuda")
        self.versions.add(m.group("ver"))

    def _f_rccl_version(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        row = self.proc_rows[proc]
        row["nccl_version"], row["version_suffix"] = m.group("ver"), m.group("suffix") or None
        self.versions.add(m.group("ver"))

    def _f_git_version(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self.proc_rows[proc]["git_version"] = f"{m.group('branch')} {m.group('sha')}"
        self._need((2, 29, 0))

    def _f_cuda_driver(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self.proc_rows[proc]["cuda_driver"] = int(m.group("v"))
        self._need((2, 13, 4))

    def _net(self, proc: int, kind: str, **cols: Any) -> None:
        names = SCHEMAS["nccl_network"].names
        cols.update(proc=proc, line_no=self.n, kind=kind)
        self.spools["nccl_network"].add(tuple(cols.get(c) for c in names))

    def _f_bootstrap(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        if not m.group("space"):
            self._need((2, 24, 0))
        for it in g.IFACE_ITEM.finditer(m.group("items")):
            self._net(
                proc, "bootstrap", idx=_int(it.group("idx")), device=it.group("dev"),
                address=it.group("addr"), port=int(it.group("port")),
            )  # fmt: skip

    def _f_ib_using(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        ro = "relaxed ordering" if m.group("ro") else None
        if ro:
            self._need((2, 12, 7))
        for it in g.IB_ITEM.finditer(m.group("devs")):
            self._net(
                proc, "ib", idx=int(it.group("idx")), device=it.group("dev"),
                port=int(it.group("port")), link=it.group("link"), detail=ro,
                address=f"{m.group('oobif')}:{m.group('oobip')}",
            )  # fmt: skip

    def _f_no_ib(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "no_ib", detail=m.group(0))

    def _f_socket_using(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        for it in g.IFACE_ITEM.finditer(m.group("items")):
            self._net(
                proc, "socket", idx=_int(it.group("idx")), device=it.group("dev"),
                address=it.group("addr"), port=int(it.group("port")),
            )  # fmt: skip

    def _f_socket_threads(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "socket_threads", idx=int(m.group("threads")), detail=m.group(0))

    def _f_network(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "network", device=m.group("net"))

    def _f_assigned_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 27, 0))
        self._net(proc, "plugin", device=m.group("name"), detail=m.group(0))

    def _f_net_plugin_named(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "network", device=m.group("name"), detail=m.group(0))

    def _f_net_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "plugin", detail=m.group(0))

    def _f_other_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "plugin", device=m.group("kind").lower(), detail=m.group(0))

    def _f_loaded_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "plugin", device=m.group("kind").lower(), detail=m.group(0))

    def _f_ofi(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        nics = g.OFI_NICS.search(m.group("rest"))
        provider = g.OFI_PROVIDER.search(m.group("rest"))
        self._net(
            proc, "ofi", idx=int(nics.group("n")) if nics else None,
            device=provider.group("p") if provider else None, detail=m.group(0),
        )  # fmt: skip

    def _f_ib_mtu(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        mtu = int(m.group("mtu"))
        if (proc, mtu) not in self.mtus:  # one row per process and MTU, not one per QP
            self.mtus.add((proc, mtu))
            self._net(
                proc, "ib_mtu", idx=mtu, device=f"IbDev {m.group('ibdev')}",
                port=int(m.group("port")), detail=m.group(0),
            )  # fmt: skip

    def _f_gdr(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "gdr", enabled=m.group("s").lower() == "enabled", detail=m.group(0))

    def _f_comm(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        event = m.group("event")
        c = self._comm(proc, m.group("comm"), fresh=event in ("Init START", "Init COMPLETE"))
        for col, grp in (
            ("rank", "rank"), ("nranks", "nranks"), ("cuda_dev", "cudaDev"),
            ("nvml_dev", "nvmlDev"),
        ):  # fmt: skip
            c[col] = int(m.group(grp)) if m.group(grp) is not None else c[col]
        for col, grp in (("bus_id", "busId"), ("comm_id", "commId"), ("api", "func")):
            c[col] = m.group(grp) or c[col]
        c["parent"] = m.group("parent") or c["parent"]
        c["status"] = event or c["status"]
        self._comm_versions(m)
        key = (proc, dev)
        if event == "Init START":
            self._resolve(key, self.open.get(key))
            self.open[key] = self.last[key] = c["comm"]
            self.started.add(key)
        elif event == "Init COMPLETE":
            self._resolve(key, c["comm"])
            self.open.pop(key, None)
            self.last[key] = c["comm"]

    def _comm_versions(self, m: re.Match[str]) -> None:
        for grp, version in (
            ("grank", (2, 29, 0)), ("func", (2, 21, 0)), ("commId", (2, 16, 0)),
            ("parent", (2, 21, 0)),
        ):  # fmt: skip
            if m.group(grp):
                self._need(version)
        if m.group("event") == "Init START":
            self._need((2, 18, 0))
        elif m.group("event") in ("Destroy COMPLETE", "Abort COMPLETE"):
            self._need((2, 12, 0))

    def _f_comm_nodes(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        c = self._comm(proc, m.group("comm"))
        c["rank"] = c["rank"] if c["rank"] is not None else int(m.group("rank"))
        c["nranks"] = c["nranks"] if c["nranks"] is not None else int(m.group("nranks"))
        c["n_nodes"], c["local_ranks"] = int(m.group("nnodes")), int(m.group("lranks"))
        c["local_rank"], c["mnnvl"] = int(m.group("lrank")), m.group("mnnvl") != "0"
        self._need((2, 20, 3))

    def _f_init_timings(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 23, 0) if m.group("func") else (2, 22, 0))
        rank, nranks = int(m.group("rank")), int(m.group("nranks"))
        for c in reversed(self.comms):
            if c["proc"] == proc and c["rank"] == rank and c["nranks"] == nranks:
                c["init_seconds"] = float(m.group("total"))
                return
        self._attach((proc, dev), "@comm", {"init_seconds": float(m.group("total"))})

    def _f_ring_order(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        ranks = [int(r) for r in m.group("ranks").split()]
        row: list[Any] = [proc, None, self.n, "ring", int(m.group("ch")), _int(m.group("nch"))]
        row.append(ranks)
        row += [bool(m.group("trunc")), None, None, None]
        self._attach((proc, dev), "nccl_channels", row)

    def _f_trees(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        for e in g.TREE_ENTRY.finditer(m.group("entries")):
            body = e.group("body")
            t = g.TREE_DOWN_FIRST.match(body)
            if t:
                self._need((2, 5, 0) if t.group(6) else (2, 8, 0))
                *down, me, up = (int(x) for x in t.groups()[:5])
            elif t := g.TREE_UP_FIRST.match(body):
                up, me, *down = (int(x) for x in t.groups())
            else:
                continue
            row: list[Any] = [proc, None, self.n, "tree", int(e.group("ch")), None, None, None]
            row += [me, up]
            row.append([d for d in down if d >= 0])
            self._attach((proc, dev), "nccl_channels", row)

    def _f_connection(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        if m.group("conn") is not None:
            self._need((2, 12, 0))
        elif m.group("kw") == "Channel":
            self._need((2, 7, 0))
        src, dst, direction = int(m.group("src")), int(m.group("dst")), m.group("dir")
        via = m.group("via")
        transport, net, net_dev, proxy, gdr, shared = _transport(via)
        if transport == "P2P/CUMEM":
            self._need((2, 18, 1))
        row: list[Any] = [proc, None, self.n, int(m.group("ch")), _int(m.group("conn")), src]
        row += [
            dst,
            m.group("srcid"),
            m.group("dstid"),
            direction,
            src if direction == "receive" else dst,
        ]
        row += [via, transport, net, net_dev, proxy, gdr, shared]
        self._attach((proc, dev), "nccl_connections", row)

    def _f_collnet(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        via = m.group(0).split(" via ", 1)[1]
        row: list[Any] = [proc, None, self.n, int(m.group("ch")), _int(m.group("conn"))]
        row += [int(m.group("rank")), None, None, None, m.group("dir"), None, via]
        row += [f"COLLNET/{m.group('name')}", m.group("name"), int(m.group("dev")), None]
        row.append(bool(m.group("gdr")))
        row.append(bool(m.group("shared")))
        self._attach((proc, dev), "nccl_connections", row)

    def _f_nvls_support(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 17, 1))
        self._attach((proc, dev), "@comm", {"nvls_support": not m.group("no")})

    def _f_nvls_comm(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 18, 1))
        self._comm(proc, m.group("comm"))["nvls_heads"] = int(m.group("nheads"))

    def _f_connected(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 8, 3))
        what = m.group("what") or m.group("nvls") or m.group("collnet")
        update: dict[str, Any] = {"connected": what}
        if m.group("pxn") is not None:
            self._need((2, 24, 0))
            update.update(ring_pxn=int(m.group("pxn")), ring_gdr=int(m.group("gdr")))
        self._attach((proc, dev), "@comm", update)

    def _f_channel_counts(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        update = {f"{k}_channels": _int(m.group(k)) for k in ("coll", "collnet", "nvls", "p2p")}
        self._attach((proc, dev), "@comm", update)

    def _f_coll(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        datatype = int(m.group("dtype"))
        dtype, size = g.DATATYPES[datatype] if datatype < len(g.DATATYPES) else (None, None)
        count = int(m.group("count"))
        self.spools["nccl_colls"].add(
            (
                proc, self.n, dev, m.group("comm"), int(m.group("opcount"), 16),
                normalize_op(m.group("op")), m.group("op"), count, datatype, dtype,
                None if size is None else count * size, int(m.group("redop")),
                _int(m.group("root")), int(m.group("nranks")), m.group("stream"),
            )
        )  # fmt: skip

    def _tuning_row(self, proc: int, dev: int | None, **cols: Any) -> None:
        names = SCHEMAS["nccl_tuning"].names
        cols.update(proc=proc, line_no=self.n)
        self._attach((proc, dev), "nccl_tuning", [cols.get(c) for c in names])

    def _f_tuning_choice(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        algo, proto = m.group("algo"), m.group("proto")
        if m.group("lo") is not None:
            self._need((2, 24, 3))
        else:
            self._need((2, 23, 0) if m.group("func") else (2, 20, 0))
        self._tuning_row(
            proc, dev, kind="choice", func=m.group("func"), bytes=int(m.group("bytes")),
            algo=g.ALGOS[int(algo)] if algo.isdigit() and int(algo) < len(g.ALGOS) else algo,
            proto=g.PROTOS[int(proto)] if proto.isdigit() and int(proto) < 3 else proto,
            time_us=float(m.group("time")) if m.group("time") else None,
            channel_lo=_int(m.group("lo")), channel_hi=_int(m.group("hi")),
        )  # fmt: skip

    def _f_tuning_old_header(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        cols = [c.split("/") for c in m.group("cells").split("|") if "/" in c]
        self.tuning[(proc, dev)] = {"cols": [(a.strip(), p.strip()) for a, p in cols]}

    def _f_tuning_algos(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        algos = [c.strip() for c in m.group("cells").split("|") if c.strip()]
        self.tuning[(proc, dev)] = {"algos": algos, "cols": []}
        self._need((2, 18, 1))

    def _f_tuning_protos(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        state = self.tuning.setdefault((proc, dev), {"algos": []})
        protos = [c.strip() for c in m.group("cells").split("|") if c.strip()]
        algos = state.get("algos", [])
        state["cols"] = [(algos[i // 3], p) for i, p in enumerate(protos) if i // 3 < len(algos)]

    def _f_tuning_threads(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        state = self.tuning.setdefault((proc, dev), {"cols": []})
        state["threads"] = [int(c) for c in re.findall(r"-?\d+", m.group("cells"))]

    def _f_tuning_row(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        state = self.tuning.get((proc, dev), {})
        cols, threads = state.get("cols", []), state.get("threads", [])
        cells = g.TUNING_CELL.finditer(m.group("cells"))
        for i, (lat, bw) in enumerate(c.groups() for c in islice(cells, MAX_TUNING_CELLS)):
            algo, proto = cols[i] if i < len(cols) else (None, None)
            self._tuning_row(
                proc, dev, kind="table", func=m.group("func"),
                algo=g.ALGO_SPELLINGS.get(algo, algo.upper()) if algo else None,
                proto=proto.upper() if proto else None,
                latency_us=float(lat), bw_gbps=float(bw),
                max_threads=threads[i] if i < len(threads) else None,
            )  # fmt: skip

    def _f_tuning_matrix(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 24, 0))

    def _f_env(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self.spools["nccl_env"].add((proc, self.n, m.group("name"), m.group("value")))

    def _f_unwind(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        key = (proc, tid)
        if not self.after_unwind.get(key):
            self.chains += 1
            # a chain that starts right after the thread's `abort called` unwinds the abort
            if key in self.aborting:
                self.abort_chain.add(key)
            else:
                self.abort_chain.discard(key)
        row = (
            proc, None, "ERROR", "unwind", m.group("file"), int(m.group("line")),
            int(m.group("code")), m.group("thread"), self.chains, tid, m.group(0),
        )  # fmt: skip
        if key in self.abort_chain:
            self._problem(*row[:3], "abort_unwind", *row[4:])
            return
        if key not in self.chain_rows:
            # warned: a WARN of the process on or since the thread's own previous line (that
            # line itself, or another thread's: the error goes on unwinding in the calling
            # thread), or another chain of the process right before this one (lines count from 1)
            warned = (
                self.proc_warn_n.get(proc, -1) >= self.thread_n.get(key, 0)
                or self.proc_last.get(proc) == "unwind"
            )
            self.chain_rows[key] = (warned, [])
        self.chain_rows[key][1].append((self.n, row))

    def _settle(self, key: tuple[int, int], handled: bool) -> None:
        """Store the thread's pending error-return chain (if any) now that it ended: kind
        `handled_unwind` when `handled` (the thread's next line is an INFO of its own) and
        neither a WARN nor another chain of the process came right before the chain, else
        `unwind`. NCCL reports a failure with a WARN and unwinds it up to the API call that
        fails; a lone `file:line -> code` between two ordinary INFO lines is a return its caller
        checked and went on from (RCCL's probe of the BIOS version after finding amdkfd's
        memory_peers: `net_ib.cc:708 -> 2`, then `Using network IB`)."""
        chain = self.chain_rows.pop(key, None)
        if chain is None:
            return
        warned, rows = chain
        kind = "handled_unwind" if handled and not warned else "unwind"
        keep = self.n
        for n, row in rows:
            self.n = n
            self._problem(*row[:3], kind, *row[4:])
        self.n = keep

    # ---- warnings, errors, PyTorch ---------------------------------------------------------

    def _problem(self, *row: Any) -> None:
        self.spools["nccl_warnings"].add((row[0], self.n, *row[1:]))

    def _warn(self, m: re.Match[str], proc: int, outer_text: str) -> None:
        o = outer(outer_text) if outer_text.strip() else NO_OUTER
        if o.ts is not None:
            self._need((2, 26, 2))
        msg = m.group("msg") or ""
        kind = next((k for k, rx in g.WARN_KINDS if rx.search(msg)), "other")
        self._problem(
            proc, o.ts, "WARN", kind, m.group("src"), _int(m.group("srcline")), None, None,
            None, _int(m.group("tid")), msg,
        )  # fmt: skip

    def _torch(self, t: TorchLine) -> None:
        f = t.fields
        if t.kind == "error":
            where = f.get("where") or ""
            file, _, line = where.rpartition(":")
            kind = "test_failure" if "Test NCCL failure" in t.message else "torch_nccl_error"
            self._problem(
                None, None, "ERROR", kind, file or where, _int(line) if line.isdigit() else None,
                None, None, None, None, t.message,
            )  # fmt: skip
            if f.get("version"):
                self.versions.add(f["version"])
            return
        names = SCHEMAS["nccl_timeouts"].names
        f.update(line_no=self.n, kind=t.kind, message=t.message[:MAX_TEXT])
        self.spools["nccl_timeouts"].add(tuple(f.get(c) for c in names))

    # ---- the end -----------------------------------------------------------------------------

    def finish(self) -> None:
        """Land the last COLL chunk, place pending rows, attribute bare version lines."""
        while self.inflight:
            self._land(*self.inflight.popleft())
        self.worker.shutdown()
        for thread in list(self.chain_rows):  # a chain the log ends in: not known handled
            self._settle(thread, handled=False)
        for key in list(self.pending):
            self._resolve(key, self.open.get(key) or self.last.get(key))
        for o, v in self.bare:
            tagged = [r for r in self.proc_rows if o.tag and r["launcher_tag"] == o.tag]
            owners = tagged if o.tag else self.proc_rows
            if len(owners) == 1 and owners[0]["nccl_version"] is None:
                owners[0].update(
                    nccl_version=v.group("ver"), version_suffix=v.group("suffix") or None,
                    cuda_version=v.group("cuda"),
                )  # fmt: skip

    def tables(self) -> dict[str, pa.Table]:
        """Every nccl_* table of the file (call `finish` first)."""
        out = {name: s.table() for name, s in self.spools.items()}
        out["nccl_timeouts"] = self._confirm_tags(out["nccl_timeouts"])
        # error-return chains are stored when they end (`_settle`): back in file order
        w = out["nccl_warnings"]
        out["nccl_warnings"] = w.take(pc.sort_indices(w, [("line_no", "ascending")]))
        out["nccl_processes"] = rows_table(self.proc_rows, SCHEMAS["nccl_processes"])
        out["nccl_communicators"] = rows_table(self.comms, SCHEMAS["nccl_communicators"])
        self.tests.finish()
        out[TESTS] = rows_table(self.tests.rows, SCHEMAS[TESTS])
        c = self.count
        out["nccl_files"] = rows_table(
            [
                {
                    "lines_total": self.n, "lines_nccl": c["nccl"],
                    "lines_recognised": c["recognised"], "lines_unknown": c["unknown"],
                    "lines_damaged": c["damaged"], "lines_torch": c["torch"],
                    "n_processes": len(self.proc_rows),
                    "versions": sorted(self.versions, key=_version_key),
                    "shape_version": _version_text(self.floor) if any(self.floor) else None,
                }
            ],
            SCHEMAS["nccl_files"],
        )  # fmt: skip
        return out

    def _confirm_tags(self, t: pa.Table) -> pa.Table:
        """`t` (nccl_timeouts) with rank_source `tag_header` on the rows whose rank is a
        launcher tag's number N where every `[rankM]:` header under that tag is N (`7:
        torch.OutOfMemoryError: ...` in a file whose `7: [rank7]: ...` lines say tag 7 is rank
        7): PyTorch itself vouches for the tag, with or without NCCL processes under it."""
        tags = [tag for tag, ranks in self.tag_headers.items() if ranks == {tag}]
        if not tags or t.num_rows == 0:
            return t
        source = t.column("rank_source")
        hit = pc.and_(
            pc.equal(source, "launcher_tag"), pc.is_in(t.column("rank"), pa.array(tags, I32))
        )
        marked = pc.if_else(pc.fill_null(hit, False), "tag_header", source)
        return t.set_column(t.schema.get_field_index("rank_source"), "rank_source", marked)

    def discard(self) -> None:
        """Stop the worker and drop spilled data after a failure."""
        self.worker.shutdown(cancel_futures=True)
        for s in self.spools.values():
            s.discard()


def _unwrapped(line: str, after: bytes) -> TorchLine | None:
    """A watchdog timeout cut in two by a terminal or a web page (`... operation time` +
    `out: WorkNCCL(SeqNum=92, ...`): the timeout read from `line` and the next line, or None.
    Tried for lines that are no PyTorch line, or one of no known kind (`[Rank 3] Watch`)."""
    if not after:
        return None
    rest = clean(after)
    for glue in ("", " "):
        joined = line + glue + rest
        m = TIMEOUT.search(joined)
        if m and m.start() < len(line) < m.end():  # the timeout spans the two lines
            return classify(joined)
    return None


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _transport(via: str) -> tuple[str, str | None, int | None, int | None, bool | None, bool]:
    """(transport, net, net_dev, proxy_rank, gdr, shared) of a connection's `via` text."""
    m = g.VIA_NET.match(via)
    if m:
        net = m.group("net")
        return (
            f"NET/{net}", net, int(m.group("dev")), _int(m.group("proxy")),
            bool(m.group("gdr")), bool(m.group("shared")),
        )  # fmt: skip
    m = g.VIA_P2P.match(via)
    if m:
        kind = "direct" if m.group("kind") == "direct pointer" else m.group("kind")
        return f"P2P/{kind}", None, None, None, None, "/Shared" in via
    if g.VIA_SHM.match(via):
        return "SHM", None, None, None, None, False
    return via.split("/", 1)[0], None, None, None, None, False
