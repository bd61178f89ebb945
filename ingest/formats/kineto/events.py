"""Kineto trace bytes → the trace's top-level fields and its events, decoded in batches.

The fast path cuts the `traceEvents` array into pieces of about `PIECE` bytes at event
boundaries (`}, {`) and decodes each piece straight into typed structs, so no per-event
intermediate is built and memory stays near the file's size. A cut is only trusted when both
sides decode: a boundary inside a string or a nested object leaves invalid JSON, and the
decode then falls back to the careful path, which decodes the array as raw events first and
reports what is wrong with the file, naming the event.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import msgspec

from commwall.ingest.errors import IngestError
from commwall.ingest.schema import MAX_NS

#: Bounds the decoder enforces (a value outside is an error naming the file and the JSON path):
#: integers must fit the store's columns, strings stay below MAX_STRING characters.
MAX_STRING = 1 << 16
I64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
Count = Annotated[int, msgspec.Meta(ge=0, le=(1 << 31) - 1)]
Str = Annotated[str, msgspec.Meta(max_length=MAX_STRING)]
BaseNs = Annotated[int, msgspec.Meta(ge=0, le=MAX_NS)]
Id = I64 | Str | None
Num = I64 | float | None
PIECE = 2 << 20  # bytes of JSON decoded at a time on the fast path (at least)
MAX_PIECES = 1000  # larger pieces beyond this, so that two processes can share them
BATCH = 16384  # events decoded at a time on the careful path
_CUT = re.compile(rb"\}\s*,\s*\{")
#: A UTF-8 byte-order mark, which some editors and Windows tools write before JSON: skipped.
BOM = b"\xef\xbb\xbf"
_SPACE = re.compile(rb"(?:\xef\xbb\xbf)?\s*")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


class Args(msgspec.Struct, gc=False):
    """The event args commwall uses; everything else is skipped by the decoder."""

    external_id: I64 | None = msgspec.field(name="External id", default=None)
    legacy_external_id: I64 | None = msgspec.field(name="external id", default=None)
    correlation: I64 | None = None
    device: I64 | None = None
    stream: I64 | None = None
    coll_name: Str | None = msgspec.field(name="Collective name", default=None)
    in_nelems: I64 | None = msgspec.field(name="In msg nelems", default=None)
    out_nelems: I64 | None = msgspec.field(name="Out msg nelems", default=None)
    group_size: Count | None = msgspec.field(name="Group size", default=None)
    dtype: Str | None = None
    pg_name: Str | I64 | None = msgspec.field(name="Process Group Name", default=None)
    pg_desc: Str | None = msgspec.field(name="Process Group Description", default=None)
    seq: I64 | None = msgspec.field(name="Seq", default=None)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b"null"))
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=msgspec.Raw(b"null"))
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=msgspec.Raw(b"null"))
    dst_rank: I64 | Str | None = msgspec.field(name="Dst Rank", default=None)
    src_rank: I64 | Str | None = msgspec.field(name="Src Rank", default=None)
    pg_ranks: Str | list[I64] | None = msgspec.field(name="Process Group Ranks", default=None)
    in_split: Str | list[I64] | None = msgspec.field(name="In split size", default=None)
    out_split: Str | list[I64] | None = msgspec.field(name="Out split size", default=None)


class Event(msgspec.Struct, gc=False):
    ph: Str | None = None
    cat: Str | None = None
    name: Str | None = None
    pid: Id = None
    tid: Id = None
    ts: Num = None
    dur: Num = None
    args: Args | None = None


class PGConfig(msgspec.Struct):
    pg_name: Str | I64 | None = None
    pg_desc: Str | None = None
    pg_size: Count | None = None
    ranks: list[I64] | Str | None = None


class DistInfo(msgspec.Struct):
    rank: Count | Str | None = None
    world_size: Count | Str | None = None
    backend: Str | None = None
    nccl_version: Str | None = None
    pg_config: list[PGConfig] | None = None


class DeviceProp(msgspec.Struct):
    id: I64 | None = None
    name: Str | None = None


class Header(msgspec.Struct):
    """The trace's top-level fields other than its events."""

    distributedInfo: DistInfo | None = None  # noqa: N815 (Kineto's keys)
    baseTimeNanoseconds: BaseNs | None = None  # noqa: N815
    deviceProperties: list[DeviceProp] | None = None  # noqa: N815
    host_name: Str | None = None

    def update(self, other: Header) -> None:
        """Take the fields that `other` has."""
        for f in self.__struct_fields__:
            if getattr(other, f) is not None:
                setattr(self, f, getattr(other, f))


class _Head(Header):
    traceEvents: list[msgspec.Raw] | None = None  # noqa: N815


class _Tail(Header):
    traceEvents: list[Event] | None = None  # noqa: N815


_HEAD = msgspec.json.Decoder(_Head)
_TAIL = msgspec.json.Decoder(_Tail)
_EVENTS = msgspec.json.Decoder(list[Event])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_BAD = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError)
_TOO_DEEP = "not valid JSON for commwall: nested deeper than the decoder's recursion limit"
_NOT_UTF8 = "not valid JSON: a string is not valid UTF-8"


class Uncut(Exception):
    """The fast path cannot decode this file; decode it with `Trace.careful()`."""


class Trace:
    """A trace's top-level fields and its events, decoded a batch at a time: by the fast path
    (`spans()`, then `events(spans)`), or by `careful()` when the fast path raises Uncut."""

    def __init__(self, path: Path, data: bytes | bytearray | mmap.mmap) -> None:
        self.path, self._data = path, data
        self.header = Header()

    def spans(self) -> list[tuple[int, int]]:
        """Byte spans (start, end) of the pieces of the event array, cut at event boundaries;
        the last one's end is -1: it runs to the end of the file. Raises Uncut when the array
        cannot be found this way."""
        data = self._data
        found = _find_events(data)
        if found is None:
            raise Uncut
        head, pos, self._bare = found
        if not self._bare:
            try:
                self.header.update(_HEAD.decode(head))
            except _BAD as e:
                raise Uncut from e
        spans = []
        piece = max(PIECE, len(data) // MAX_PIECES)
        while (m := _CUT.search(data, pos + piece)) is not None:
            spans.append((pos, m.start() + 1))
            # the search mapped the pages around the cut, as much as a whole piece where the
            # kernel maps large folios: dropped at once, or the whole file would count here
            self._release(pos, m.end() + mmap.PAGESIZE)
            pos = m.end() - 1
        spans.append((pos, -1))
        return spans

    def events(self, spans: list[tuple[int, int]]) -> Iterator[list[Event]]:
        """The events of pieces from `spans()`, one batch per piece; the last piece also brings
        the top-level fields after the array. Raises Uncut when a piece does not decode (a cut
        inside a string or a nested object, or a file with errors in it)."""
        mv = memoryview(self._data)
        for a, b in spans:
            try:
                if b >= 0:
                    events = _EVENTS.decode(b"".join((b"[", mv[a:b], b"]")))
                elif self._bare:
                    events = _EVENTS.decode(b"".join((b"[", mv[a:])))
                else:
                    rest = _TAIL.decode(b"".join((b'{"traceEvents":[', mv[a:])))
                    self.header.update(rest)
                    events = rest.traceEvents or []
            except _BAD as e:
                raise Uncut from e
            self._release(a, len(self._data) if b < 0 else b)
            yield events

    def _release(self, a: int, b: int) -> None:
        """Drop a decoded piece's pages of a memory-mapped file from this process: they stay
        in the page cache and come back if read again, but no longer count against it."""
        dontneed = getattr(mmap, "MADV_DONTNEED", None)
        if isinstance(self._data, mmap.mmap) and dontneed is not None:
            lo = -(-a // mmap.PAGESIZE) * mmap.PAGESIZE
            hi = min(b, len(self._data)) // mmap.PAGESIZE * mmap.PAGESIZE
            if hi > lo:
                self._data.madvise(dontneed, lo, hi - lo)

    def careful(self) -> Iterator[list[Event]]:
        """Events from the array decoded as raw events first, BATCH at a time; raises
        IngestError naming the file, and the event where there is one, for what is wrong."""
        self.header = Header()
        raws = self._raw_events()
        for off in range(0, len(raws), BATCH):
            chunk = b"[" + b",".join(raws[off : off + BATCH]) + b"]"
            try:
                events = _EVENTS.decode(chunk)
            except msgspec.ValidationError as e:
                where = re.sub(r"\$\[(\d+)\]", _in_trace_events(off), str(e))
                raise IngestError(self.path, f"not a valid Kineto trace: {where}") from e
            except RecursionError as e:
                raise IngestError(self.path, f"{_TOO_DEEP} (near event {off})") from e
            except UnicodeDecodeError as e:
                raise IngestError(self.path, f"{_NOT_UTF8} (near event {off})") from e
            yield events

    def _raw_events(self) -> list[msgspec.Raw]:
        path = self.path
        data = memoryview(self._data)[len(BOM) :] if self._data[:3] == BOM else self._data
        k = _skip_space(data)
        first = data[k : k + 1]
        try:
            if first == b"[":
                return _RAWS.decode(data)
            if first != b"{":
                raise IngestError(path, "not JSON (content does not start with '{' or '[')")
            head = _HEAD.decode(data)
        except msgspec.ValidationError as e:
            raise IngestError(path, f"not a valid Kineto trace: {e}") from e
        except msgspec.DecodeError as e:
            raise IngestError(path, f"not valid JSON: {e}") from e
        except RecursionError as e:
            raise IngestError(path, _TOO_DEEP) from e
        except UnicodeDecodeError as e:
            raise IngestError(path, _NOT_UTF8) from e
        if head.traceEvents is None:
            raise IngestError(path, "JSON but not a Kineto trace: no 'traceEvents' array")
        raws, head.traceEvents = head.traceEvents, None
        self.header.update(head)
        return raws


def _skip_space(data: bytes | bytearray | mmap.mmap | memoryview) -> int:
    """Offset of the first non-whitespace byte."""
    m = _SPACE.match(data)
    return m.end() if m else 0


def _in_trace_events(off: int) -> Callable[[re.Match[str]], str]:
    """Rewrites a batch's `$[i]` into the file's `$.traceEvents[off + i]`."""
    return lambda m: f"$.traceEvents[{off + int(m[1])}]"


def _find_events(data: bytes | bytearray | mmap.mmap) -> tuple[bytes, int, bool] | None:
    """Where the fast path starts: (the top-level object before the events, closed so that it
    decodes; offset of the first event; whether the file is a bare array), or None."""
    start = _skip_space(data)
    if data[start : start + 1] == b"[":
        return b"", start + 1, True
    k = data.find(b'"traceEvents"')
    m = _EVENTS_KEY.match(data, k) if k > 0 else None
    if m is None:
        return None
    return bytes(data[start:k]) + b'"traceEvents":[]}', m.end(), False
