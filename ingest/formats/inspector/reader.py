"""Reading NCCL Inspector JSON, line by line, restoring each record's context.

v4.3 writes one `dump_stats` marker per communicator dump with `header` and `metadata`, then
exactly `coll_records` + `p2p_records` + `proxy_records` payload lines without them; v4.0-v4.2
payload lines carry their own `header` and `metadata` (v4.1 and v4.2 write a marker too, for
their drop counters). The rules of NCCL's own `inspector_json_reader.py` are kept: a marker
while a v4.3 dump still owes records is an interleaved or truncated dump; a v4.3 payload beyond
its marker's counts, a payload without a marker before it, a payload with its own header inside
a v4.3 dump, and a file ending inside a dump are errors. Each names the file and the line; with
`keep_going` the bad batch is skipped, counted and listed (`inspector_skipped`) and reading
resumes at the next marker or self-contained record.

A v4.3 batch is stored only once it is complete (memory: at most MAX_PENDING records of it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from commwall.ingest.collective_names import normalize_op
from commwall.ingest.errors import IngestError
from commwall.ingest.formats.inspector import tables as T
from commwall.ingest.formats.inspector.records import (
    DECODER,
    CollPerf,
    DumpStats,
    Header,
    Metadata,
    P2pPerf,
    ProxyTrace,
    Record,
)
from commwall.ingest.schema import MAX_NS, TEXT_CUT

#: Most records one dump batch may hold before it is an over-long batch (the plugin's rings
#: hold 1,024 records by default; NCCL_INSPECTOR_DUMP_*_RING_SIZE raises it).
MAX_PENDING = 1 << 20
#: Skipped batches listed one by one in inspector_skipped (the rest are only counted).
MAX_LISTED = 1000
#: Versions whose payload lines carry no context of their own (after a marker).
MARKER_CONTEXT = (4, 3)
_KINDS = ("coll_perf", "p2p_perf", "proxy_trace")
_NS = 1000  # the plugin writes µs


def version_tuple(v: str) -> tuple[int, int] | None:
    """'v4.3' -> (4, 3); None for a version that is not `v<major>.<minor>`."""
    major, _, minor = v.strip().lstrip("vV").partition(".")
    if not major.isdigit() or not (minor or "0").isdigit():
        return None
    return int(major), int(minor or 0)


class BadBatch(Exception):
    """What is wrong at a line; the reader turns it into an IngestError or a skipped batch."""


@dataclass
class Context:
    """The header and metadata records take, from their own line or from a v4.3 marker."""

    header: Header
    metadata: Metadata
    version: tuple[int, int]
    ts: int  # dump_timestamp_us in ns


@dataclass
class Pending:
    """A v4.3 dump being read: its marker, what it still owes, and its records so far."""

    line: int
    ctx: Context
    stats: DumpStats
    remaining: dict[str, int]
    records: list[tuple[str, Any]] = field(default_factory=list)

    def owed(self) -> int:
        return sum(self.remaining.values())


def _check_ts(ns: int, what: str) -> int:
    if not 0 <= ns < MAX_NS:
        raise BadBatch(f"{what} {ns // _NS} µs is outside the years 1970-2200")
    return ns


def _cut(s: str | None) -> str | None:
    return None if s is None else s[:TEXT_CUT]


class Reader:
    """One Inspector JSON file, fed line by line (`feed`), then `finish` and `tables`."""

    def __init__(self, path: Path, keep_going: bool = False, instances: bool = True) -> None:
        self.path = path
        self.keep_going = keep_going
        self.instances = instances
        self.pending: Pending | None = None
        self.resync = False
        self.colls = T.Rows(T.COLLS)
        self.p2p = T.Rows(T.P2P)
        self.minutes: dict[tuple, list[Any]] = {}
        self.dumps: dict[tuple, list[int]] = {}
        self.proxy: dict[tuple, list[int]] = {}
        self.comms: dict[tuple, list[Any]] = {}
        self.skipped: list[tuple[int, int, int, str]] = []
        self.n_skipped_batches = 0
        self.n_skipped_lines = 0
        self.n_lines = 0
        self.n_records = {"coll": 0, "p2p": 0, "proxy": 0}
        self.versions: set[str] = set()
        self.verbose = False

    # -- the line state machine -------------------------------------------------------------

    def feed(self, lineno: int, raw: bytes) -> None:
        """Read line `lineno` (1-based) of the file."""
        self.n_lines = lineno
        if not raw.strip():
            return
        try:
            rec = self._decode(raw)
            self._line(lineno, rec)
        except BadBatch as e:
            self._bad(lineno, str(e))

    def _decode(self, raw: bytes) -> Record:
        try:
            return DECODER.decode(raw)
        except msgspec.ValidationError as e:
            raise BadBatch(f"not an Inspector record ({e})") from e
        except msgspec.DecodeError as e:
            raise BadBatch(f"damaged line, not JSON ({e})") from e

    def _line(self, lineno: int, rec: Record) -> None:
        payloads = [k for k in _KINDS if getattr(rec, k) is not None]
        if rec.dump_stats is not None:
            self._close_or_skip(lineno)
            self.resync = False
            self._marker(lineno, rec)
            return
        if not payloads:
            raise BadBatch("neither a dump_stats marker nor a coll_perf, p2p_perf or proxy_trace")
        if len(payloads) > 1:
            raise BadBatch(f"one line holds {' and '.join(payloads)}: one record per line")
        kind = payloads[0]
        body = getattr(rec, kind)
        _validate(kind, body)
        if rec.header is not None or rec.metadata is not None:
            if self.pending is not None and self.pending.owed() > 0:
                p = self.pending
                self._bad(
                    lineno,
                    f"a record with its own header inside the dump of line {p.line}, which "
                    f"announced {p.owed()} more records (interleaved batches)",
                    upto=lineno - 1,
                )
            self._close_pending(lineno)
            self.resync = False
            ctx = self._context(rec)
            self._commit(ctx, [(kind, body)])
            return
        if self.resync:
            self.n_skipped_lines += 1
            return
        if self.pending is None:
            raise BadBatch(
                f"a {kind} record without context: no v4.3 dump_stats marker before it (a file "
                "cut, filtered or merged without its markers)"
            )
        p = self.pending
        if p.remaining.get(kind, 0) <= 0:
            announced = getattr(p.stats, _COUNT[kind])
            raise BadBatch(
                f"more {kind} records than the {announced} announced by the dump_stats marker "
                f"of line {p.line} (an over-long batch)"
            )
        p.remaining[kind] -= 1
        p.records.append((kind, body))
        if len(p.records) > MAX_PENDING:
            raise BadBatch(f"a dump of over {MAX_PENDING:,} records (an over-long batch)")

    def _context(self, rec: Record) -> Context:
        if rec.header is None or rec.metadata is None:
            raise BadBatch("a record with a header but no metadata, or metadata but no header")
        v = rec.metadata.inspector_output_format_version
        vt = version_tuple(v)
        if vt is None:
            raise BadBatch(f"unknown inspector_output_format_version {v[:40]!r}")
        self.versions.add(v[:16])
        ts = _check_ts(rec.metadata.dump_timestamp_us * _NS, "dump_timestamp_us")
        if rec.header.rank < 0 or rec.header.n_ranks <= 0 or rec.header.rank >= rec.header.n_ranks:
            raise BadBatch(f"header rank {rec.header.rank} of n_ranks {rec.header.n_ranks}")
        return Context(rec.header, rec.metadata, vt, ts)

    def _marker(self, lineno: int, rec: Record) -> None:
        ctx = self._context(rec)
        stats = rec.dump_stats
        assert stats is not None
        counts = {k: getattr(stats, _COUNT[k]) for k in _KINDS}
        if any(n < 0 for n in counts.values()):
            raise BadBatch(f"negative record counts in dump_stats {counts}")
        if ctx.version >= MARKER_CONTEXT:
            self.pending = Pending(lineno, ctx, stats, counts)
        else:  # v4.1/v4.2: the payload lines carry their own context; only drops to count
            self._dump_stats(ctx, stats)

    def _close_or_skip(self, lineno: int) -> None:
        """`_close_pending`, a dump that still owes records skipped (with `keep_going`) up to
        the line before `lineno`."""
        try:
            self._close_pending(lineno)
        except BadBatch as e:
            self._bad(lineno, str(e), upto=lineno - 1)

    def _close_pending(self, lineno: int) -> None:
        """Store the dump being read, or say what it lacks when `lineno` starts another."""
        p = self.pending
        if p is None:
            return
        if p.owed() > 0:
            raise BadBatch(
                f"the dump_stats marker of line {p.line} announced {p.owed()} more records, but "
                "another dump starts here (a truncated or interleaved dump)"
            )
        self.pending = None
        self._dump_stats(p.ctx, p.stats)
        self._commit(p.ctx, p.records)

    def _bad(self, lineno: int, problem: str, upto: int | None = None) -> None:
        """Stop with an IngestError naming the line, or (`keep_going`) skip the dump being
        read (or this line) up to line `upto` (default `lineno`) and resume at the next
        marker or self-contained record."""
        start = self.pending.line if self.pending is not None else lineno
        if not self.keep_going:
            where = f"line {lineno}" if start == lineno else f"line {lineno} (dump of line {start})"
            raise IngestError(self.path, f"{where}: {problem}")
        end = lineno if upto is None else upto
        self.n_skipped_batches += 1
        self.n_skipped_lines += max(1, end - start + 1)
        if len(self.skipped) < MAX_LISTED:
            self.skipped.append((start, lineno, max(1, end - start + 1), problem[:TEXT_CUT]))
        self.pending = None
        self.resync = True

    def finish(self) -> None:
        """End of file: a dump still owed records is truncated."""
        p = self.pending
        if p is not None and p.owed() > 0:
            self._bad(
                self.n_lines,
                f"the file ends inside the dump of line {p.line}, {p.owed()} of its records "
                "missing (a truncated dump)",
            )
            return
        if p is not None:
            self._close_pending(self.n_lines)

    # -- storing ---------------------------------------------------------------------------

    def _comm(self, ctx: Context, ts: int) -> list[Any]:
        h, m = ctx.header, ctx.metadata
        key = (h.id[:TEXT_CUT], h.rank, _cut(m.hostname), m.pid)
        c = self.comms.get(key)
        if c is None:
            name = _cut(h.comm_name)
            v = m.inspector_output_format_version[:16]
            c = self.comms[key] = [name, h.n_ranks, h.nnodes, v, ts, ts, 0, 0, 0, False]
        c[4], c[5] = min(c[4], ts), max(c[5], ts)
        return c

    def _dump_stats(self, ctx: Context, s: DumpStats) -> None:
        h, m = ctx.header, ctx.metadata
        c = self._comm(ctx, ctx.ts)
        del c
        minute = ctx.ts - ctx.ts % T.NS_PER_MINUTE
        key = (h.id[:TEXT_CUT], h.rank, m.pid, minute)
        d = self.dumps.get(key)
        if d is None:
            d = self.dumps[key] = [0] * 11
        vals = (
            1, s.coll_records, s.p2p_records, s.proxy_records, s.coll_dropped_since_last_dump,
            s.p2p_dropped_since_last_dump, s.proxy_dropped_since_last_dump,
            s.proxy_ops_dropped_since_last_dump,
        )  # fmt: skip
        for i, v in enumerate(vals):
            d[i] += v
        for i, v in enumerate((s.coll_dropped_total, s.p2p_dropped_total,
                               s.proxy_dropped_total), start=8):  # fmt: skip
            d[i] = max(d[i], v)

    def _commit(self, ctx: Context, records: list[tuple[str, Any]]) -> None:
        for kind, body in records:
            if kind == "coll_perf":
                self._coll(ctx, body)
            elif kind == "p2p_perf":
                self._p2p(ctx, body)
            else:
                self._proxy(ctx, body)

    def _times(self, ctx: Context, trace: Any) -> tuple[int, int | None, int | None]:
        """(ts, kernel start, host start) of a record: verbose kernel times when present."""
        if trace is None or not trace.kernel_events:
            return ctx.ts, None, None
        self.verbose = True
        k0 = min(k.kernel_start_ts for k in trace.kernel_events) * _NS
        k1 = max(k.kernel_stop_ts for k in trace.kernel_events) * _NS
        start = getattr(trace, "coll_start_ts", None) or getattr(trace, "p2p_start_ts", 0)
        return (_check_ts(k1, "kernel_stop_ts"), _check_ts(k0, "kernel_start_ts"),
                _check_ts(start * _NS, "start_ts") if start else None)  # fmt: skip

    def _coll(self, ctx: Context, c: CollPerf) -> None:
        if c.coll_exec_time_us < 0 or c.coll_sn < 0 or c.coll_msg_size_bytes < 0:
            raise BadBatch(f"coll_perf with a negative value (coll_sn {c.coll_sn})")
        ts, k0, s0 = self._times(ctx, c.event_trace_ts)
        h = ctx.header
        comm = self._comm(ctx, ts)
        comm[6] += 1
        comm[9] = comm[9] or k0 is not None
        self.n_records["coll"] += 1
        op = normalize_op(c.coll)
        log2 = c.coll_msg_size_bytes.bit_length() - 1
        exec_ns = c.coll_exec_time_us * _NS
        algo, proto = c.coll_algo[:64], c.coll_proto[:64]
        if self.instances:
            self.colls.add((h.id[:TEXT_CUT], h.rank, ctx.metadata.pid, c.coll_sn, op, c.coll[:64],
                            algo, proto, c.coll_msg_size_bytes, log2, exec_ns, c.coll_algobw_gbs,
                            c.coll_busbw_gbs, _cut(c.coll_timing_source), ts, k0,
                            s0))  # fmt: skip
        self._minute(ctx, "coll", op, log2, algo, proto, ts, c.coll_msg_size_bytes, exec_ns,
                     c.coll_busbw_gbs)  # fmt: skip

    def _p2p(self, ctx: Context, p: P2pPerf) -> None:
        if p.p2p_exec_time_us < 0 or p.p2p_sn < 0 or p.p2p_msg_size_bytes < 0:
            raise BadBatch(f"p2p_perf with a negative value (p2p_sn {p.p2p_sn})")
        ts, k0, _ = self._times(ctx, p.event_trace_ts)
        h = ctx.header
        comm = self._comm(ctx, ts)
        comm[7] += 1
        self.n_records["p2p"] += 1
        op = normalize_op(p.p2p)
        exec_ns = p.p2p_exec_time_us * _NS
        if self.instances:
            self.p2p.add((h.id[:TEXT_CUT], h.rank, ctx.metadata.pid, p.p2p_sn, op, p.p2p[:64],
                          p.p2p_peer, p.p2p_msg_size_bytes, exec_ns, p.p2p_busbw_gbs, ts,
                          k0))  # fmt: skip
        log2 = p.p2p_msg_size_bytes.bit_length() - 1
        self._minute(ctx, "p2p", op, log2, None, None, ts, p.p2p_msg_size_bytes, exec_ns,
                     p.p2p_busbw_gbs)  # fmt: skip

    def _proxy(self, ctx: Context, x: ProxyTrace) -> None:
        h = ctx.header
        comm = self._comm(ctx, ctx.ts)
        comm[8] += 1
        self.n_records["proxy"] += 1
        stamps = [v for v in (x.event_trace_ts or {}).values() if isinstance(v, int) and v > 0]
        dur = (max(stamps) - min(stamps)) * _NS if stamps else 0
        minute = ctx.ts - ctx.ts % T.NS_PER_MINUTE
        key = (h.id[:TEXT_CUT], h.rank, x.record_type[:32], x.peer, _cut(x.direction), minute)
        a = self.proxy.get(key)
        if a is None:
            a = self.proxy[key] = [0, 0, 0]
        a[0] += 1
        a[1] += x.trans_size_bytes
        a[2] += dur

    def _minute(self, ctx: Context, kind: str, op: str, log2: int, algo: str | None,
                proto: str | None, ts: int, size: int, exec_ns: int,
                busbw: float) -> None:  # fmt: skip
        h = ctx.header
        key = (h.id[:TEXT_CUT], h.rank, ctx.metadata.pid, kind, op, log2, algo, proto,
               ts - ts % T.NS_PER_MINUTE)  # fmt: skip
        a = self.minutes.get(key)
        if a is None:
            self.minutes[key] = [1, size, exec_ns, exec_ns, exec_ns, busbw, busbw]
            return
        a[0] += 1
        a[1] += size
        a[2] += exec_ns
        if exec_ns < a[3]:
            a[3] = exec_ns
        if exec_ns > a[4]:
            a[4] = exec_ns
        a[5] += busbw
        if busbw > a[6]:
            a[6] = busbw

    def tables(self) -> dict[str, Any]:
        """The store's inspector_* tables of this file (Arrow)."""
        comms = [(k[0], v[0], k[1], v[1], v[2], k[2], k[3], *v[3:]) for k, v in self.comms.items()]
        return {
            "inspector_comms": T.table_of(T.COMMS, comms),
            "inspector_colls": self.colls.table(),
            "inspector_p2p": self.p2p.table(),
            "inspector_minutes": T.table_of(T.MINUTES, T.keyed_rows(self.minutes)),
            "inspector_dumps": T.table_of(T.DUMPS, T.keyed_rows(self.dumps)),
            "inspector_proxy": T.table_of(T.PROXY, T.keyed_rows(self.proxy)),
            "inspector_skipped": T.table_of(T.SKIPPED, self.skipped),
        }

    def detail(self) -> dict[str, Any]:
        """Facts for the file's `detail` (the ingest summary reports them)."""
        dropped = {"coll": 0, "p2p": 0, "proxy": 0}
        last: dict[tuple, list[int]] = {}
        for (comm, rank, pid, _), d in self.dumps.items():
            cur = last.setdefault((comm, rank, pid), [0, 0, 0])
            for i in range(3):
                cur[i] = max(cur[i], d[8 + i])
        for v in last.values():
            for i, k in enumerate(("coll", "p2p", "proxy")):
                dropped[k] += v[i]
        out: dict[str, Any] = {
            "versions": sorted(self.versions),
            "records": dict(self.n_records),
            "communicators": len({k[0] for k in self.comms}),
            "verbose": self.verbose,
            "instances_kept": self.instances,
            "lost_records": dropped,
            "lines": self.n_lines,
        }
        if self.n_skipped_batches:
            out["skipped_batches"] = self.n_skipped_batches
            out["skipped_lines"] = self.n_skipped_lines
            out["dropped_events"] = self.n_skipped_lines
            out["dropped_reason"] = "bad Inspector batches skipped (--keep-going)"
        return out


def _validate(kind: str, body: Any) -> None:
    """BadBatch for values no operation can have: negative sizes, times or sequence numbers,
    kernel times outside 1970-2200."""
    if kind == "proxy_trace":
        return
    sn, size, exec_us = (
        (body.coll_sn, body.coll_msg_size_bytes, body.coll_exec_time_us)
        if kind == "coll_perf"
        else (body.p2p_sn, body.p2p_msg_size_bytes, body.p2p_exec_time_us)
    )
    if sn < 0 or size < 0 or exec_us < 0 or size >= 1 << 62 or exec_us * _NS >= MAX_NS:
        raise BadBatch(f"{kind} with an impossible value (sn {sn}, {size} bytes, {exec_us} µs)")
    trace = body.event_trace_ts
    if trace is not None:
        start = getattr(trace, "coll_start_ts", None) or getattr(trace, "p2p_start_ts", 0)
        if start:
            _check_ts(start * _NS, "start_ts")
        for k in trace.kernel_events:
            _check_ts(k.kernel_start_ts * _NS, "kernel_start_ts")
            _check_ts(k.kernel_stop_ts * _NS, "kernel_stop_ts")


_COUNT = {"coll_perf": "coll_records", "p2p_perf": "p2p_records", "proxy_trace": "proxy_records"}
