"""Freed memory handed back to the operating system after a large decode.

Decoding a large file frees as much as it allocates (each piece's copy, its events, the lists
built from them), but glibc's allocator keeps freed blocks in the process's heap. After it has
freed a block of a piece's size it serves later blocks of that size from the heap rather than
mapping them apart, so a file decoded in pieces leaves tens of MB in the heap that the process
no longer uses and the system cannot have back. `malloc_trim` returns them. Elsewhere (another
C library, another system) this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
from collections.abc import Callable
from functools import cache
from typing import Any


@cache
def _trim() -> Callable[..., Any] | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(name).malloc_trim if name else None
    return None


def give_back() -> None:
    """Return the heap's free memory to the system (glibc only; otherwise nothing)."""
    trim = _trim()
    if trim is not None:
        trim(0)
