"""Reading untrusted pickle data that may only hold plain values.

The standard unpickler runs code named in the data (any importable callable, with arguments of
the data's choosing). This reader first walks the opcodes and refuses every one that could name,
call or build an object — globals, `REDUCE`, `BUILD`, `INST`/`OBJ`/`NEWOBJ`, the extension
registry, persistent ids — and only then unpickles, with `find_class` refusing everything as a
second lock. What comes out is made of dict, list, tuple, set, str, bytes, int, float, bool and
None only.
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
    except UnsafePickle:
        raise
    except Exception as e:  # pickletools raises ValueError and others on garbage
        raise UnsafePickle(f"not a valid pickle stream ({e})") from e


def loads(data: bytes) -> object:
    """The plain value pickled in `data`; UnsafePickle when it is anything else. Nothing in
    the data is executed or imported."""
    check(data)
    try:
        return _NoGlobals(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except Exception as e:
        raise UnsafePickle(f"not a valid pickle stream ({e})") from e
