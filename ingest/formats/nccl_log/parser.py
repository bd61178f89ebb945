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

The message families live in mixins, one concept each: init_lines (communicators and
topology), net_lines (versions, environment, network), tuning, problems (WARN lines and
error-return chains), unprefixed (PyTorch and other prefix-less lines), all built on
state.ParserState.
"""

from __future__ import annotations

import re
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.collective_names import normalize_op
from commwall.ingest.formats.nccl_log import grammar as g
from commwall.ingest.formats.nccl_log.chunk import classify_lines, line_array, split_colls
from commwall.ingest.formats.nccl_log.coll_batch import parse_tails
from commwall.ingest.formats.nccl_log.init_lines import InitLines
from commwall.ingest.formats.nccl_log.nccl_tests import CANDIDATE, TestTables
from commwall.ingest.formats.nccl_log.net_lines import NetworkLines
from commwall.ingest.formats.nccl_log.prefix import STRIPPED, clean, core
from commwall.ingest.formats.nccl_log.problems import ProblemLines
from commwall.ingest.formats.nccl_log.state import MAX_TEXT, TESTS, ParserState, opt_int
from commwall.ingest.formats.nccl_log.tables import I32, SCHEMAS, column, rows_table
from commwall.ingest.formats.nccl_log.tuning import TuningLines
from commwall.ingest.formats.nccl_log.unprefixed import UnprefixedLines

#: Distinct line heads remembered by the COLL fast path before the cache is reset.
HEAD_CACHE = 4096
#: What may stand between `NCCL INFO ` and ` opCount` on a COLL line: the op name.
_OP = re.compile(r"(?:[A-Za-z]+:)?")
#: Threads parsing COLL chunks (and chunks in flight at most).
WORKERS = 2
#: A line longer than this is not read (counted as kind `too_long`): NCCL's longest lines, the
#: ring orders of a 4096-rank job, are about 20,000 characters.
MAX_LINE_CHARS = 1 << 16
#: A run of more digits than this is no NCCL value (uint64 ids have 20): the line is counted
#: as kind `out_of_range` instead of being read.
_LONG_NUMBER = re.compile(r"\d{21}")


def _version_text(v: tuple[int, int, int]) -> str:
    return f"{v[0]}.{v[1]}" + (f".{v[2]}" if v[2] else "")


class LogParser(InitLines, NetworkLines, TuningLines, ProblemLines, UnprefixedLines, ParserState):
    """Feed it the file in chunks (`feed`), call `finish`, then take the tables (`tables`)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.tests = TestTables()
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
        self.head_info[h] = (proc, opt_int(m.group("dev")), name, normalize_op(name))

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
        dev = opt_int(m.group("dev"))
        tid = opt_int(m.group("tid")) or 0
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

    def _message(self, msg: str, proc: int, dev: int | None, tid: int) -> str | None:
        """Store the message as the first family that matches; that family's name."""
        for name in g.dispatch(msg):
            rx, handle = self.families[name]
            m = rx.match(msg)
            if m:
                handle(m, proc, dev, tid)
                return name
        return None

    def _unreadable(self, kind: str, proc: int | None, line: str) -> None:
        """A line too long, or with a number out of range, counted as NCCL's when it names
        NCCL (the caller only passes lines that mention it) and kept (cut) for the report."""
        self.count["nccl"] += 1
        self.count["damaged"] += 1
        self._unknown(proc, kind, line)

    def _f_coll(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        datatype = int(m.group("dtype"))
        dtype, size = g.DATATYPES[datatype] if datatype < len(g.DATATYPES) else (None, None)
        count = int(m.group("count"))
        self.spools["nccl_colls"].add(
            (
                proc, self.n, dev, m.group("comm"), int(m.group("opcount"), 16),
                normalize_op(m.group("op")), m.group("op"), count, datatype, dtype,
                None if size is None else count * size, int(m.group("redop")),
                opt_int(m.group("root")), int(m.group("nranks")), m.group("stream"),
            )
        )  # fmt: skip

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


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))
