"""Reading untrusted pickle data that may only hold plain values.

The standard unpickler runs code named in the data (any importable callable, with arguments of
the data's choosing). This reader first walks the opcodes and refuses every one that could name,
call or build an object — globals, `REDUCE`, `BUILD`, `INST`/`OBJ`/`NEWOBJ`, the extension
registry, persistent ids — and only then unpickles, with `find_class` refusing everything as a
second lock. What comes out is made of dict, list, tuple, set, str, bytes, int, float, bool and
None only.

Integers are limited to 64 bits (MAX_INT): beyond them, keys that all hash alike make building
a dict quadratic.

A pickle may also reference one container from many places (its memo), so a small stream can
stand for an enormous value (a 500 KB dump whose entries all share one list of 4,096 shapes
took a minute to read, and four times as many entries four times as long): the values it
expands to, counting a shared container once per reference, are limited to EXPANSION times its
size plus EXPANSION_SLACK, and a container that holds itself is refused.
"""

from __future__ import annotations

import io
import pickle
import pickletools

#: Opcodes that build plain containers, numbers, strings and bytes (and the memo/stack moves).
ALLOWED = frozenset(
    {
        "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "MEMOIZE",
        "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET",
        "NONE", "NEWTRUE", "NEWFALSE",
        "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
        "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE",
        "BINUNICODE", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8",
        "EMPTY_LIST", "APPEND", "APPENDS", "LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1",
        "TUPLE2", "TUPLE3", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
        "EMPTY_SET", "ADDITEMS", "FROZENSET",
    }
)  # fmt: skip


#: Values a pickle may expand to: EXPANSION x its size in bytes + EXPANSION_SLACK (a plain dump
#: expands to fewer values than it has bytes; shared strings and small lists add little).
EXPANSION, EXPANSION_SLACK = 8, 1 << 20
_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})


#: The largest integer read. Python hashes an int modulo 2**61 - 1, so keys k·(2**61 - 1) all
#: collide, and a 2.4 MB pickle of 150,000 of them took 258 s to build its dict (quadratic);
#: no value of a plain dump (ranks, sequence numbers, ns timestamps) needs more than 64 bits,
#: and within them only a handful of keys share a hash.
MAX_INT = (1 << 63) - 1


class UnsafePickle(ValueError):
    """The pickle names or builds something other than plain values."""


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        raise UnsafePickle(f"refused to load {module}.{name}")


def check(data: bytes) -> None:
    """Raise UnsafePickle naming the first opcode outside ALLOWED (or a malformed stream)."""
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.name not in ALLOWED:
                what = f" ({arg})" if isinstance(arg, str) else ""
                raise UnsafePickle(f"opcode {op.name}{what} at byte {pos} is not plain data")
            if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > MAX_INT:
                raise UnsafePickle(f"an integer of {arg.bit_length()} bits at byte {pos}")
    except UnsafePickle:
        raise
    except Exception as e:  # pickletools raises ValueError and others on garbage
        raise UnsafePickle(f"not a valid pickle stream ({e})") from e


def loads(data: bytes) -> object:
    """The plain value pickled in `data`; UnsafePickle when it is anything else. Nothing in
    the data is executed or imported."""
    check(data)
    try:
        value = _NoGlobals(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except Exception as e:
        raise UnsafePickle(f"not a valid pickle stream ({e})") from e
    expanded(value, EXPANSION * len(data) + EXPANSION_SLACK)
    return value


def expanded(root: object, limit: int) -> int:
    """How many values `root` holds, counting a container once per place that references it
    (as JSON would write it out); UnsafePickle past `limit`, or when a container holds itself.
    Linear in the distinct objects and references, whatever they expand to; no recursion."""
    if type(root) not in _CONTAINERS:
        return 1
    size: dict[int, int] = {}  # id of a counted container → values it expands to
    path: set[int] = set()  # containers whose parts are being counted: the current ancestors
    stack = [root]
    while stack:
        obj = stack[-1]
        key = id(obj)
        if key in size:
            stack.pop()
            continue
        if key not in path:  # first visit: count its containers first
            path.add(key)
            parts = [c for c in _items(obj) if type(c) in _CONTAINERS and id(c) not in size]
            if any(id(c) in path for c in parts):
                raise UnsafePickle("a container holds itself (a cycle): not plain data")
            if parts:
                stack.extend(parts)
                continue
        stack.pop()
        path.discard(key)
        # scalars count 1; an id in `size` is a live container's, never a scalar's
        n = 1 + sum(size.get(id(c), 1) for c in _items(obj))
        if n > limit:
            raise UnsafePickle(
                f"shared references expand it to over {limit:,} values (a pickle bomb)"
            )
        size[key] = n
    return size[id(root)]


def _items(obj: object) -> list:
    """What a container holds (a dict: its keys and values); nothing for anything else."""
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    return list(obj) if isinstance(obj, list | tuple | set | frozenset) else []
