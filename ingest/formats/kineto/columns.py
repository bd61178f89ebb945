"""A Kineto trace's complete events as column chunks, decoded in batches (in parallel when big).

`Chunks` holds one chunk per decoded batch of the complete (`X`) events: start, duration,
dictionary-encoded category and name, and the integer ids (pid, tid, stream, correlation,
external id). Only the events whose args matter beyond those columns (steps, host collective
and point-to-point ops, communication kernels: `_kept_rows`) are kept whole, by row. `decode`
fills it from the fast path (shared with forked processes for a big file) or the careful one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from operator import attrgetter

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest import classify
from commwall.ingest.exec import forked
from commwall.ingest.formats.kineto import events as kineto_events
from commwall.ingest.formats.kineto.comm_args import ALLTOALL_OP, NO_ARGS, P2P_OPS, as_int
from commwall.ingest.formats.kineto.events import Args, Event

DROPPED_CATS = frozenset({"python_function", "Trace"})


class Chunks:
    """Column chunks of the complete events, one chunk per decoded batch. Names and categories
    are dictionary-encoded per batch (in Arrow) and unified at the end."""

    def __init__(self) -> None:
        self.ts: list[np.ndarray] = []
        self.dur: list[np.ndarray] = []
        self.cat: list[pa.DictionaryArray] = []
        self.name: list[pa.DictionaryArray] = []
        self.ints: dict[str, list[pa.Array]] = {
            k: [] for k in ("pid", "tid", "stream", "correlation", "external_id")
        }
        self.n = 0  # complete events
        self.events = 0  # all events seen
        self.kept: dict[int, Event] = {}  # row → event, for the rows `_kept_rows` picks

    def collect(self, batches: Iterator[list[Event]], comm: re.Pattern[str]) -> Chunks:
        """Add every batch; keep the events whose args matter (see `_kept_rows`)."""
        for evs in batches:
            self.events += len(evs)
            offset = self.n
            xs, cats, names = self.add(evs)
            if not xs:
                continue
            cat_values = [*cats.dictionary.to_pylist(), None]  # code -1: no category
            cat_codes = pc.fill_null(cats.indices, -1).to_numpy(False)
            for j in _kept_rows(cats, names, comm):
                e = xs[j]
                e.cat = cat_values[cat_codes[j]]
                if e.args is not None:
                    e.args = _detached(e.args)
                self.kept[offset + int(j)] = e
        return self

    def __getstate__(self) -> dict:
        """Pickled (to cross processes) with the kept events as JSON: far faster than structs."""
        state = self.__dict__.copy()
        state["kept"] = (list(self.kept), msgspec.json.encode(list(self.kept.values())))
        return state

    def __setstate__(self, state: dict) -> None:
        rows, blob = state["kept"]
        self.__dict__.update(state, kept=dict(zip(rows, _KEPT.decode(blob), strict=True)))

    def extend(self, other: Chunks) -> Chunks:
        """These chunks followed by `other`'s."""
        self.ts += other.ts
        self.dur += other.dur
        self.cat += other.cat
        self.name += other.name
        for k, v in other.ints.items():
            self.ints[k] += v
        self.kept.update((self.n + i, e) for i, e in other.kept.items())
        self.n += other.n
        self.events += other.events
        return self

    def add(self, evs: list[Event]) -> tuple[list[Event], pa.DictionaryArray, pa.DictionaryArray]:
        """Append the complete events of a batch; returns them with their encoded (cat, name)
        columns."""
        xs = [e for e in evs if e.ph == "X" and e.ts is not None and e.cat not in DROPPED_CATS]
        if not xs:
            return (
                xs,
                pa.array([], pa.string()).dictionary_encode(),
                pa.array([], pa.string()).dictionary_encode(),
            )
        self.ts.append(np.array(list(map(_TS, xs)), np.float64))  # µs, checked in `in_range`
        dur = np.array(list(map(_DUR, xs)), np.float64)  # a missing dur is NaN
        self.dur.append(np.nan_to_num(dur, nan=0.0))  # negative ones: clamped in `parse`
        cats = _legacy(pa.array(list(map(_CAT, xs)), pa.string()).dictionary_encode())
        names = pc.fill_null(pa.array(list(map(_NAME, xs)), pa.string()), "").dictionary_encode()
        self.cat.append(cats)
        self.name.append(names)
        args = [e.args or NO_ARGS for e in xs]
        i = self.ints
        i["pid"].append(_ids(list(map(_PID, xs))))
        i["tid"].append(_ids(list(map(_TID, xs))))
        i["stream"].append(pa.array(list(map(_STREAM, args)), I64))
        i["correlation"].append(pa.array(list(map(_CORR, args)), I64))
        ext = pa.array(list(map(_EXT, args)), I64)
        if ext.null_count:
            ext = pc.coalesce(ext, pa.array(list(map(_LEGACY_EXT, args)), I64))
        i["external_id"].append(ext)
        self.n += len(xs)
        return xs, cats, names

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the rows where `mask` is true (the kept events renumbered)."""
        ends = np.cumsum([len(t) for t in self.ts])
        for i, (a, b) in enumerate(zip(ends - [len(t) for t in self.ts], ends, strict=True)):
            m = mask[a:b]
            pm = pa.array(m)
            self.ts[i], self.dur[i] = self.ts[i][m], self.dur[i][m]
            self.cat[i], self.name[i] = self.cat[i].filter(pm), self.name[i].filter(pm)
            for col in self.ints.values():
                col[i] = col[i].filter(pm)
        row = np.cumsum(mask) - 1
        self.kept = {int(row[r]): e for r, e in self.kept.items() if mask[r]}
        self.n = int(np.count_nonzero(mask))

    def column(self, name: str) -> pa.ChunkedArray:
        """One whole integer column (chunks are not copied)."""
        return pa.chunked_array(self.ints[name], I64)

    def strings(self, which: str) -> tuple[pa.ChunkedArray, np.ndarray, list[str]]:
        """A string column unified to one dictionary: (column, codes, dictionary values)."""
        col = pa.chunked_array(getattr(self, which)).unify_dictionaries()
        codes = np.concatenate([c.indices.to_numpy(False) for c in col.chunks])
        values = col.chunks[0].dictionary.to_pylist() if col.num_chunks else []
        return col, codes, values


def _legacy(cats: pa.DictionaryArray) -> pa.DictionaryArray:
    """Legacy (PyTorch <= 1.9) category names mapped to modern ones, on the dictionary only."""
    values = cats.dictionary.to_pylist()
    if not any(v in classify.LEGACY_CATS for v in values):
        return cats
    mapped = pa.array([classify.LEGACY_CATS.get(v, v) for v in values], pa.string())
    return pa.DictionaryArray.from_arrays(cats.indices, mapped)


_KEPT = msgspec.json.Decoder(list[Event])
PARALLEL_PIECES = 8  # pieces (about 16 MB) per decoding process, at least
I64 = pa.int64()
_TS, _DUR, _CAT, _NAME, _PID, _TID = (
    attrgetter(f) for f in ("ts", "dur", "cat", "name", "pid", "tid")
)
_STREAM, _CORR, _EXT, _LEGACY_EXT = (
    attrgetter(f) for f in ("stream", "correlation", "external_id", "legacy_external_id")
)


def _ids(values: list) -> pa.Array:
    """pid/tid values (ints, or strings in some traces) as int64; non-numbers are null."""
    try:
        return pa.array(values, I64)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([as_int(v) for v in values], I64)


def _kept_rows(
    cats: pa.DictionaryArray, names: pa.DictionaryArray, comm: re.Pattern[str]
) -> np.ndarray:
    """Rows of a batch whose args matter beyond their columns: steps, host collective ops
    (`record_param_comms`, `nccl:*`, `gloo:*`, ...) and communication kernels."""
    values = names.dictionary.to_pylist()
    host = [
        i
        for i, n in enumerate(values)
        if n.startswith(("ProfilerStep#", "nccl:", "record_param_comms"))
        or classify.HOST_COMM.match(n)
        or n in P2P_OPS
        or n == ALLTOALL_OP
    ]
    commk = [i for i, n in enumerate(values) if comm.search(n)]
    kernel = [i for i, c in enumerate(cats.dictionary.to_pylist()) if c == "kernel"]
    n_idx, c_idx = names.indices.to_numpy(False), cats.indices.to_numpy(False)
    mask = np.isin(n_idx, host) | (np.isin(n_idx, commk) & np.isin(c_idx, kernel))
    return np.flatnonzero(mask)


def _detached(a: Args) -> Args:
    """The args with their raw fields copied out of the decoded piece (a raw field refers to
    the whole piece, which would otherwise stay in memory), legacy external id resolved."""
    return msgspec.structs.replace(
        a,
        external_id=a.legacy_external_id if a.external_id is None else a.external_id,
        input_dims=msgspec.Raw(bytes(a.input_dims)),
        input_type=msgspec.Raw(bytes(a.input_type)),
        concrete=msgspec.Raw(bytes(a.concrete)),
    )


def decode(trace: kineto_events.Trace, comm: re.Pattern[str], jobs: int) -> Chunks:
    """All events as column chunks: on the fast path, shared with forked processes when the
    file has enough pieces (PARALLEL_PIECES per process) and `jobs` allows (0: one per core);
    on the careful path when the fast path cannot decode the file."""
    try:
        spans = trace.spans()
        processes = min(jobs or forked.cores(), forked.cores(), len(spans) // PARALLEL_PIECES)
        if processes < 2:
            return Chunks().collect(trace.events(spans), comm)
        # the last piece brings the fields after the array: it is read here, first
        last = Chunks().collect(trace.events(spans[-1:]), comm)
        inner = spans[:-1]
        parts = forked.shared_map(
            lambda i: Chunks().collect(trace.events(inner[i : i + 1]), comm), len(inner), processes
        )
        out = Chunks()
        for part in parts:
            out.extend(part)
        return out.extend(last)
    except kineto_events.Uncut:
        return Chunks().collect(trace.careful(), comm)
