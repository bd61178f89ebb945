"""Two lines in a training script that make every rank leave what commwall reads
(docs/capture.md):

    import commwall.capture
    with commwall.capture.profile(steps=range(5, 8)) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

Every rank profiles the same steps (the schedule counts `prof.step()` calls, never time) and
writes `DIR/kineto/rank<R>.pt.trace.json.gz`, plus `DIR/ranks/rank<R>.json` (host, pid, world
size, the steps it profiled, whether Flight Recorder was on). A rank whose job stalls (no
`step()` for `hang_dump_s` seconds) or leaves the block with an exception (gloo's timeout)
writes its Flight Recorder buffer to `DIR/fr/rank_<R>.json`. DIR is the argument, else
`COMMWALL_CAPTURE_DIR` (set by `commwall capture`); without one, or with `COMMWALL_CAPTURE=0`,
`profile` returns an object whose methods do nothing, and torch is never imported.

This module is also the one definition of the run directory's layout, which `commwall
capture` writes and `commwall ingest` checks (ingest/capture_manifest.py). Importing it loads
no torch and no other part of commwall.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

#: Environment: the run directory (set by `commwall capture`), and the switch that turns the
#: helper off (`0`).
DIR_ENV = "COMMWALL_CAPTURE_DIR"
SWITCH_ENV = "COMMWALL_CAPTURE"
#: Environment: seconds without a `step()` after which a rank dumps its Flight Recorder buffer.
HANG_ENV = "COMMWALL_CAPTURE_HANG_S"
#: Default of HANG_ENV: PyTorch's default collective timeout for NCCL (10 minutes).
HANG_S = 600.0
#: The run directory's layout (relative names).
MANIFEST = "manifest.json"
NCCL_DIR = "nccl"
FR_DIR = "fr"
KINETO_DIR = "kineto"
RANKS_DIR = "ranks"
INSPECTOR_DIR = "inspector"
#: The key that marks a JSON file as a commwall capture manifest, and its version.
MARK = "commwall_capture"
VERSION = 1
#: Flight Recorder's ring-buffer size: the name PyTorch 2.13 reads first, then the older one.
FR_BUFFER_ENVS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


def trace_name(rank: int) -> str:
    """The profiler trace of rank `rank`, relative to the run directory."""
    return f"{KINETO_DIR}/rank{rank}.pt.trace.json.gz"


def rank_info_name(rank: int) -> str:
    """What the helper records of rank `rank`, relative to the run directory."""
    return f"{RANKS_DIR}/rank{rank}.json"


def fr_dump_name(rank: int) -> str:
    """The helper's Flight Recorder dump of rank `rank` (the prefix PyTorch's own dump on an
    NCCL timeout writes to is `fr/rank_`, followed by the rank alone)."""
    return f"{FR_DIR}/rank_{rank}.json"


def fr_buffer_size(env: Mapping[str, str] | None = None) -> int:
    """Flight Recorder's buffer size as PyTorch reads it from `env` (0: off)."""
    env = os.environ if env is None else env
    for name in FR_BUFFER_ENVS:
        if name in env:
            try:
                return max(0, int(env[name]))
            except ValueError:
                return 0
    return 0


class Disabled:
    """What `profile` returns when capture is off: every method does nothing."""

    enabled = False

    def __enter__(self) -> Disabled:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def step(self) -> None:
        """Nothing."""


def window(steps: Iterable[int]) -> tuple[int, int]:
    """(first, last) step of a non-empty run of consecutive step numbers ≥ 0, else ValueError."""
    s = sorted(set(steps))
    if not s or s[0] < 0 or s != list(range(s[0], s[-1] + 1)):
        raise ValueError(f"steps must be consecutive numbers from 0 up, got {s[:8]}")
    return s[0], s[-1]


def profile(
    steps: Iterable[int] = range(5, 8),
    dir: str | Path | None = None,
    hang_dump_s: float | None = None,
) -> Profiler | Disabled:
    """The capture of this rank: profiles `steps` (numbers of `step()` calls made before the
    step begins, from 0) into the run directory `dir` (default: COMMWALL_CAPTURE_DIR), and
    dumps Flight Recorder after `hang_dump_s` seconds without a step (default:
    COMMWALL_CAPTURE_HANG_S, else HANG_S). A Disabled object when there is no directory or
    COMMWALL_CAPTURE=0."""
    first, last = window(steps)
    where = dir if dir is not None else os.environ.get(DIR_ENV)
    if not where or os.environ.get(SWITCH_ENV, "1").strip() == "0":
        return Disabled()
    hang = hang_dump_s if hang_dump_s is not None else float(os.environ.get(HANG_ENV, HANG_S))
    return Profiler(Path(where), first, last, hang)


class Profiler:
    """The enabled capture of one rank (see the module's docstring)."""

    enabled = True

    def __init__(self, root: Path, first: int, last: int, hang_dump_s: float) -> None:
        self.root, self.first, self.last, self.hang_dump_s = root, first, last, hang_dump_s
        self.steps_done = 0
        self.profiled: list[int] = []
        self._prof: Any = None
        self._last_step = time.monotonic()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._dumped = False

    # -- the profiler ------------------------------------------------------------------------

    def __enter__(self) -> Profiler:
        import torch  # noqa: PLC0415 (only an enabled capture loads torch)
        from torch.profiler import ProfilerActivity, schedule  # noqa: PLC0415
        from torch.profiler import profile as torch_profile  # noqa: PLC0415

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        warmup = min(1, self.first)
        self._prof = torch_profile(
            activities=activities,
            schedule=schedule(
                wait=self.first - warmup,
                warmup=warmup,
                active=self.last - self.first + 1,
                repeat=1,
            ),
            on_trace_ready=self._export,
            record_shapes=True,
            with_stack=False,
        )
        self._prof.__enter__()
        self._last_step = time.monotonic()
        if fr_buffer_size() > 0 and not _nccl_dumps_itself():
            self._watchdog = threading.Thread(
                target=self._watch, name="commwall-capture-watchdog", daemon=True
            )
            self._watchdog.start()
        return self

    def step(self) -> None:
        """Mark the end of a training step (call it once per step, on every rank)."""
        self._last_step = time.monotonic()
        self.steps_done += 1
        if self._prof is not None:
            self._prof.step()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if exc_type is not None and fr_buffer_size() > 0 and not _nccl_dumps_itself():
            self.dump_flight_recorder()  # a collective's timeout, Ctrl-C, a crash
        if self._prof is not None:
            try:
                self._prof.__exit__(exc_type, exc, tb)
            finally:
                self._prof = None
        self._write_info()

    def _export(self, prof: Any) -> None:
        """on_trace_ready: this rank's trace of the profiled steps."""
        path = self.root / trace_name(_rank())
        path.parent.mkdir(parents=True, exist_ok=True)
        # hidden until whole (a directory walk skips dot files); the exporter gzips by suffix
        partial = path.with_name(f".{path.name}.partial.gz")
        prof.export_chrome_trace(str(partial))
        os.replace(partial, path)
        self.profiled = list(range(self.first, min(self.last, int(prof.step_num)) + 1))
        self._write_info()

    def _write_info(self) -> None:
        rank = _rank()
        info = {
            "rank": rank,
            "world_size": _world_size(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "backend": _backend(),
            "steps_requested": [self.first, self.last],
            "steps_profiled": self.profiled,
            "steps_done": self.steps_done,
            "flight_recorder_buffer": fr_buffer_size(),
            "flight_recorder_dumped": self._dumped,
        }
        _write_json(self.root / rank_info_name(rank), info)

    # -- Flight Recorder -------------------------------------------------------------------

    def _watch(self) -> None:
        """Dump Flight Recorder once when no step has ended for `hang_dump_s` seconds."""
        tick = min(1.0, max(0.05, self.hang_dump_s / 4))
        while not self._stop.wait(tick):
            if not self._dumped and time.monotonic() - self._last_step > self.hang_dump_s:
                self.dump_flight_recorder()
                self._write_info()

    def dump_flight_recorder(self) -> bool:
        """Write this rank's Flight Recorder buffer (JSON, PyTorch's own serialiser) to
        `fr/rank_<R>.json`; False when PyTorch has none to give."""
        try:
            import torch  # noqa: PLC0415

            c10d = torch._C._distributed_c10d  # private: the serialiser PyTorch's dumps use
            data = getattr(c10d, "_dump_fr_trace_json")(True, False)  # noqa: B009
        except Exception:  # noqa: BLE001 (no distributed build, no buffer: nothing to dump)
            return False
        path = self.root / fr_dump_name(_rank())
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.partial")
        tmp.write_bytes(data if isinstance(data, bytes) else str(data).encode())
        os.replace(tmp, path)
        self._dumped = True
        return True


def _dist() -> Any:
    """torch.distributed when a process group is up, else None."""
    try:
        import torch.distributed as dist  # noqa: PLC0415
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _rank() -> int:
    d = _dist()
    return int(d.get_rank()) if d is not None else int(os.environ.get("RANK", "0"))


def _world_size() -> int:
    d = _dist()
    return int(d.get_world_size()) if d is not None else int(os.environ.get("WORLD_SIZE", "1"))


def _backend() -> str | None:
    d = _dist()
    return str(d.get_backend()) if d is not None else None


def _nccl_dumps_itself() -> bool:
    """PyTorch writes the dump on an NCCL timeout itself (TORCH_NCCL_DUMP_ON_TIMEOUT=1, into
    TORCH_FR_DUMP_TEMP_FILE<rank>): the helper does not write a second one."""
    backend = _backend() or ""
    return "nccl" in backend and os.environ.get("TORCH_NCCL_DUMP_ON_TIMEOUT", "0") == "1"


def _write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)
