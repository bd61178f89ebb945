"""One job's items shared between this process and forked children, for several cores on one
file.

Items are handed out through a pipe holding one token per item, so each process claims the
next one as soon as it is free and none waits while work remains (the make-jobserver trick).
A child runs only the item function, on memory it shares copy-on-write with this process, and
streams its results back pickled. Whatever goes wrong on a child's side (no fork on this
platform, the child dies, a result that does not pickle) ends with its items done here, so no
result is lost; an exception the function raises in a child is raised here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import struct
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TypeVar

R = TypeVar("R")
MAX_ITEMS = 1024  # tokens of 4 bytes: at most PIPE_BUF, so writing them never blocks
STUCK_S = 60.0  # a child this much (or 4x this side's time) later than this side is stuck


_PR_SET_PDEATHSIG = 1


#: Environment variable naming the command's process to its helper processes (set by
#: `mark_command`), which end themselves if it is gone before they are tied to their parent.
COMMAND_PID = "COMMWALL_COMMAND_PID"


def mark_command() -> None:
    """Name this process as the command that helper processes started from now on serve."""
    os.environ[COMMAND_PID] = str(os.getpid())


def die_with_parent() -> None:
    """Have the kernel kill this (child) process when its parent dies, even by `kill -9`
    (Linux; elsewhere nothing): no worker outlives the command that started it."""
    if sys.platform != "linux":
        return
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    command = int(os.environ.get(COMMAND_PID) or 0)
    if os.getppid() != parent or (command and not exists(command)):
        os._exit(1)  # the parent, or the command, died before this took effect


def exists(pid: int) -> bool:
    """Whether process `pid` exists (of any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (macOS)
        return os.cpu_count() or 1


def shared_map(fn: Callable[[int], R], n: int, processes: int = 2) -> list[R]:
    """[fn(0), ..., fn(n - 1)], computed here and in `processes - 1` forked children at once."""
    children = min(processes, n) - 1
    if children < 1 or n > MAX_ITEMS or not hasattr(os, "fork"):
        return [fn(i) for i in range(n)]
    tokens, w = os.pipe()
    os.write(w, b"".join(struct.pack("<i", i) for i in range(n)))
    os.close(w)
    kids: list[tuple[int, threading.Thread, list]] = []
    t = time.monotonic()
    try:
        for _ in range(children):
            kids.append(_fork(fn, tokens))
        mine = {i: fn(i) for i in _claims(tokens)}
    except BaseException:
        for pid, _, _ in kids:
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(tokens)
        for pid, reader, _ in kids:
            reader.join(max(STUCK_S, 4 * (time.monotonic() - t)))
            if reader.is_alive():
                os.kill(pid, signal.SIGKILL)
                reader.join()
            os.waitpid(pid, 0)
    theirs: dict[int, R] = {}
    for _, _, got in kids:
        ok, value = got[0] if got else (True, {})
        if not ok:
            raise value
        theirs.update(value)
    return [mine[i] if i in mine else theirs[i] if i in theirs else fn(i) for i in range(n)]


def _fork(fn: Callable[[int], R], tokens: int) -> tuple[int, threading.Thread, list]:
    """A child claiming items from `tokens`: (its pid, the thread receiving its results, the
    list they arrive in)."""
    results, w = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork in a threaded process (DuckDB and progress bars start
        # threads): the child touches no lock those threads could hold, only `fn`.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover (the child: its work is checked through the results)
        _child(fn, tokens, results, w)
    os.close(w)
    got: list[tuple[bool, object]] = []
    reader = threading.Thread(target=_receive, args=(results, got), daemon=True)
    reader.start()
    return pid, reader, got


def _child(fn: Callable[[int], R], tokens: int, results: int, w: int) -> None:  # pragma: no cover
    die_with_parent()
    os.close(results)
    try:
        try:
            out: tuple[bool, object] = (True, {i: fn(i) for i in _claims(tokens)})
        except BaseException as e:  # noqa: BLE001 (sent to the parent, raised there)
            out = (False, e)
        with os.fdopen(w, "wb") as f:
            pickle.dump(out, f, protocol=5)  # streamed: no second copy of the results
    finally:
        os._exit(0)


def _claims(tokens: int) -> Iterator[int]:
    """The items this process claims, one at a time, until none is left."""
    while len(token := os.read(tokens, 4)) == 4:
        yield struct.unpack("<i", token)[0]


def _receive(fd: int, got: list) -> None:
    """Unpickle the child's results as they stream in; nothing when they do not arrive whole
    (the child died, or its results do not pickle): its items are then redone here."""
    with os.fdopen(fd, "rb") as f, contextlib.suppress(Exception):
        got.append(pickle.load(f))
