"""Running a training job under `commwall capture`: the environment that makes every source
useful, the run directory, the job's exit status passed through, and `manifest.json`
(docs/capture.md). The job's own command is run as given; only environment variables that
steer logging and tracing are added, never anything that changes what it computes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from commwall import __version__
from commwall import capture as layout

#: NCCL subsystems logged by default: INIT (versions, communicators, rings and trees), NET
#: (transports, GPU Direct RDMA, IB devices), GRAPH (topology search, channels), ENV (the
#: NCCL_* settings NCCL read) and TUNING (the algorithm tables and per-size choices): what
#: the NCCL log parser turns into findings, a few hundred lines per process. COLL (one line
#: per collective call, GBs for a long job) only with --nccl-coll.
NCCL_SUBSYS = "INIT,NET,GRAPH,ENV,TUNING"
#: Flight Recorder's ring buffer: entries per process group kept (each a few hundred bytes).
FR_BUFFER = 2000
#: Environment variables recorded in the manifest besides those capture sets: by prefix, and
#: by name (launchers' and the job's placement).
RECORDED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_", "TORCH_DISTRIBUTED_", "COMMWALL_")
RECORDED_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "OMP_NUM_THREADS",
    "SLURM_JOB_ID",
    "SLURM_NNODES",
    "SLURM_NTASKS",
    "SLURM_JOB_NODELIST",
)


class CaptureError(Exception):
    """The capture cannot start (the directory is taken, the plugin is missing)."""


@dataclass(frozen=True)
class Settings:
    """What the capture turns on."""

    nccl: bool = True
    nccl_coll: bool = False
    flight_recorder: bool = True
    fr_buffer: int = FR_BUFFER
    inspector_plugin: str | None = None
    hang_dump_s: float | None = None


def default_dir(now: datetime | None = None) -> Path:
    """commwall-runs/<UTC timestamp>, in the current directory."""
    now = now or datetime.now(timezone.utc)
    return Path("commwall-runs") / now.strftime("%Y%m%dT%H%M%SZ")


def prepare(root: Path, settings: Settings) -> None:
    """Create the run directory and its folders; refuse one that exists and is not empty."""
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise CaptureError(f"{root}: exists and is not an empty directory; choose another --out")
    if settings.inspector_plugin is not None and not Path(settings.inspector_plugin).is_file():
        raise CaptureError(f"{settings.inspector_plugin}: no such NCCL Inspector plugin file")
    folders = [layout.KINETO_DIR, layout.RANKS_DIR, layout.FR_DIR, layout.NCCL_DIR]
    if settings.inspector_plugin is not None:
        folders.append(layout.INSPECTOR_DIR)
    for name in folders:
        (root / name).mkdir(parents=True, exist_ok=True)


def environment(root: Path, settings: Settings, base: Mapping[str, str]) -> dict[str, str]:
    """The job's environment: `base` with capture's variables. Levels the user set already
    (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, the Flight Recorder buffer) are kept, so that the
    manifest and the checks see what the job really ran with; where files go is capture's."""
    env = dict(base)
    where = root.resolve()
    env[layout.DIR_ENV] = str(where)
    if settings.hang_dump_s is not None:
        env[layout.HANG_ENV] = f"{settings.hang_dump_s:g}"
    if settings.nccl:
        env.setdefault("NCCL_DEBUG", "INFO")
        subsys = NCCL_SUBSYS + (",COLL" if settings.nccl_coll else "")
        env.setdefault("NCCL_DEBUG_SUBSYS", subsys)
        env["NCCL_DEBUG_FILE"] = str(where / layout.NCCL_DIR / "%h.%p.log")
    if settings.flight_recorder:
        size = next((base[n] for n in layout.FR_BUFFER_ENVS if n in base), None)
        size = size if size is not None else str(settings.fr_buffer)
        for name in layout.FR_BUFFER_ENVS:
            env[name] = size
        env.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
        prefix = str(where / layout.FR_DIR / "rank_")
        env["TORCH_FR_DUMP_TEMP_FILE"] = prefix
        env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = prefix
    if settings.inspector_plugin is not None:
        env["NCCL_PROFILER_PLUGIN"] = str(Path(settings.inspector_plugin).resolve())
        env["NCCL_INSPECTOR_ENABLE"] = "1"
        env["NCCL_INSPECTOR_DUMP_DIR"] = str(where / layout.INSPECTOR_DIR)
    return env


def recorded(env: Mapping[str, str]) -> dict[str, str]:
    """The part of `env` the manifest keeps (RECORDED_PREFIXES, RECORDED_NAMES)."""
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith(RECORDED_PREFIXES) or k in RECORDED_NAMES
    }


def _moment() -> dict[str, Any]:
    ns = time.time_ns()
    utc = datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="microseconds")
    return {"utc": utc, "ns": ns}


def manifest(
    command: list[str], env: Mapping[str, str], settings: Settings, start: dict[str, Any]
) -> dict[str, Any]:
    """The manifest as written when the job starts (end and exit status still null)."""
    return {
        layout.MARK: layout.VERSION,
        "commwall_version": __version__,
        "command": command,
        "hosts": [socket.gethostname()],
        "start": start,
        "end": None,
        "exit_status": None,
        "signal": None,
        "settings": {
            "nccl_debug": env.get("NCCL_DEBUG"),
            "nccl_debug_subsys": env.get("NCCL_DEBUG_SUBSYS"),
            "flight_recorder": settings.flight_recorder and layout.fr_buffer_size(env) > 0,
            "flight_recorder_buffer": layout.fr_buffer_size(env),
            "inspector": settings.inspector_plugin is not None,
            "hang_dump_s": settings.hang_dump_s,
        },
        "environment": recorded(env),
    }


def write_manifest(root: Path, data: dict[str, Any]) -> None:
    """manifest.json, replaced whole (a reader never sees half of it)."""
    tmp = root / f".{layout.MANIFEST}.partial"
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, root / layout.MANIFEST)


#: Signals passed on to the job (the job decides how to end; a second Ctrl-C is passed too).
FORWARDED = (signal.SIGINT, signal.SIGTERM)


def run(command: list[str], root: Path, settings: Settings) -> int:
    """Run `command` under capture into `root` (prepared here); its exit status, or 128 + N
    when signal N ended it (the shell's convention)."""
    if not command:
        raise CaptureError("no command to run: put it after `--`")
    prepare(root, settings)
    env = environment(root, settings, os.environ)
    data = manifest(command, env, settings, _moment())
    write_manifest(root, data)
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as e:
        data.update(end=_moment(), exit_status=127)
        write_manifest(root, data)
        raise CaptureError(f"{command[0]}: cannot start ({e.strerror or e})") from e

    def forward(signum: int, frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        rc = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    status = rc if rc >= 0 else 128 - rc
    data.update(
        end=_moment(), exit_status=status, signal=signal.Signals(-rc).name if rc < 0 else None
    )
    write_manifest(root, data)
    return status
