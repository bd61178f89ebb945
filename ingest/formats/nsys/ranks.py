"""Which rank each GPU process of an nsys export is.

nsys knows processes, not ranks. Rules, first match wins for a process (the rule is stored
in `ranks.rank_source`):

1. `--rank-map` (`rank map`): `HOST:PID=RANK`, `PID=RANK`, or `device:ID=RANK`
   (also `dev:ID`, `gpu:ID`);
2. NCCL NVTX payloads (`nccl payload`): the `Rank` of the process's largest communicator
   (exported with `--include-blobs=true`);
3. the `MPI_RANKS` table (`MPI_RANKS`);
4. for a report holding one GPU process only: the environment captured with it (`environment
   RANK`, also OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID), then a rank or worker
   number in the file name (`file name`), then `--rank`;
5. the CUDA device id, when the remaining processes use distinct devices (`device id`);
6. otherwise process order: remaining processes by pid take the lowest unused ranks
   (`process order`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from commwall.ingest.errors import IngestError
from commwall.ingest.formats.kineto.reader import RANK_IN_NAME
from commwall.ingest.formats.nsys.db import Export
from commwall.ingest.formats.nsys.nvtx import Nvtx

RANK_ENV = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
WORLD_ENV = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
_MAP_ENTRY = re.compile(
    r"^(?:(?P<dev>dev|device|gpu):(?P<id>\d+)|(?:(?P<host>[^:=]+):)?(?P<pid>\d+))"
    r"=(?P<rank>\d+)$"
)


@dataclass(frozen=True)
class Process:
    """A process with GPU activity: `proc` is globalPid >> 24 (host bits and pid)."""

    proc: int
    pid: int
    host: str | None
    device: int | None


@dataclass(frozen=True)
class RankOf:
    """A process's rank, the rule that gave it, and the world size when known."""

    rank: int
    source: str
    world_size: int | None = None


@dataclass(frozen=True)
class Clues:
    """What the export says about ranks: NCCL payload (rank, nranks) and MPI ranks per proc,
    and the environment captured with the profiled process."""

    payload: dict[int, tuple[int, int]]
    mpi: dict[int, int]
    env: dict[str, str]


#: Ranks and world sizes are stored as int32.
_INT32_MAX = 2**31 - 1


def _fits(rank: object, size: object) -> bool:
    """A rank clue that can be right: 0 <= rank < size <= int32 max (a payload field decoded
    from corrupt bytes can hold anything)."""
    return isinstance(rank, int) and isinstance(size, int) and 0 <= rank < size <= _INT32_MAX


def gather(ex: Export, nvtx: Nvtx) -> Clues:
    """Rank clues of an export: communicator-init payloads (the largest communicator of each
    process), MPI_RANKS, and the captured environment (process environment first, then the
    environment nsys itself ran in)."""
    payload: dict[int, tuple[int, int]] = {}
    for (proc, _, _), f in sorted(nvtx.payloads.items()):
        if "rank" in f and "no. of ranks" in f and _fits(f["rank"], f["no. of ranks"]):
            if proc not in payload or f["no. of ranks"] > payload[proc][1]:
                payload[proc] = (f["rank"], f["no. of ranks"])
    mpi: dict[int, int] = {}
    if (t := ex.table("MPI_RANKS")) is not None:
        for proc, r in ex.rows(f'SELECT "globalTid" >> 24, "rank" FROM "{t}"'):
            if isinstance(r, int) and _fits(r, _INT32_MAX):
                mpi.setdefault(proc, r)
    env: dict[str, str] = {}
    if (t := ex.table("TARGET_INFO_SYSTEM_ENV")) is not None:
        for (value,) in ex.rows(f"SELECT value FROM \"{t}\" WHERE name = 'DeviceEnvironment'"):
            for kv in str(value).split(";"):
                key, eq, val = kv.partition("=")
                if eq:
                    env[key] = val
    if (t := ex.table("META_DATA_CAPTURE")) is not None:
        q = f"SELECT value FROM \"{t}\" WHERE name LIKE '%ENVIRONMENT_VARIABLE'"
        for (value,) in ex.rows(q):
            k, _, v = str(value).partition("=")
            env[k] = v.strip('"')
    return Clues(payload, mpi, env)


def parse_rank_map(path: Path, entries: tuple[str, ...]) -> list[tuple[str, str | int, int]]:
    """`--rank-map` entries as (kind, key, rank): ("device", id, r), ("hostpid", "host:pid", r)
    or ("pid", pid, r); IngestError on an entry that fits no form."""
    out: list[tuple[str, str | int, int]] = []
    for e in entries:
        m = _MAP_ENTRY.match(e.strip())
        if m is None:
            raise IngestError(
                path,
                f"bad --rank-map entry {e!r}: expected PID=RANK, HOST:PID=RANK or device:ID=RANK",
            )
        rank = int(m["rank"])
        if m["dev"]:
            out.append(("device", int(m["id"]), rank))
        elif m["host"]:
            out.append(("hostpid", f"{m['host']}:{int(m['pid'])}", rank))
        else:
            out.append(("pid", int(m["pid"]), rank))
    return out


def _env_int(env: dict[str, str], keys: tuple[str, ...]) -> tuple[str, int] | None:
    for k in keys:
        v = env.get(k, "").strip()
        if v.isascii() and v.isdigit() and len(v) < 10:  # else no clue (it fits no int32)
            return k, int(v)
    return None


def assign(
    path: Path,
    procs: list[Process],
    clues: Clues,
    rank_map: tuple[str, ...] = (),
    rank: int | None = None,
) -> dict[int, RankOf]:
    """Rank of every process (keyed by proc), by the rules in the module docstring; IngestError
    when two processes end up with the same rank."""
    entries = parse_rank_map(path, rank_map)
    by_dev = {k: r for kind, k, r in entries if kind == "device"}
    by_pid = {k: r for kind, k, r in entries if kind == "pid"}
    by_host = {k: r for kind, k, r in entries if kind == "hostpid"}
    world_env = _env_int(clues.env, WORLD_ENV)
    out: dict[int, RankOf] = {}
    for p in procs:
        dev = None if p.device is None else by_dev.get(p.device)
        hit = by_host.get(f"{p.host}:{p.pid}", by_pid.get(p.pid, dev))
        if hit is not None:
            out[p.proc] = RankOf(hit, "rank map", clues.payload.get(p.proc, (0, None))[1])
        elif p.proc in clues.payload:
            r, n = clues.payload[p.proc]
            out[p.proc] = RankOf(r, "nccl payload", n)
        elif p.proc in clues.mpi:
            out[p.proc] = RankOf(clues.mpi[p.proc], "MPI_RANKS")
    rest = [p for p in procs if p.proc not in out]
    if len(procs) == 1 and rest:
        single = _single(path, clues.env, rank)
        if single is not None:
            out[rest[0].proc] = RankOf(single[0], single[1], world_env[1] if world_env else None)
            rest = []
    taken = {r.rank for r in out.values()}
    devices = [p.device for p in rest if p.device is not None]
    if rest and len(devices) == len(rest) and len(set(devices)) == len(devices):
        if not taken & set(devices):
            out.update({p.proc: RankOf(d, "device id") for p, d in zip(rest, devices, strict=True)})
            rest = []
    free = (r for r in range(len(procs) + len(taken)) if r not in taken)
    for p in sorted(rest, key=lambda q: q.pid):
        out[p.proc] = RankOf(next(free), "process order")
    _check_unique(path, procs, out)
    return out


def _single(path: Path, env: dict[str, str], rank: int | None) -> tuple[int, str] | None:
    found = _env_int(env, RANK_ENV)
    if found:
        return found[1], f"environment {found[0]}"
    m = RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1)), "file name"
    if rank is not None:
        return rank, "--rank"
    return None


def _check_unique(path: Path, procs: list[Process], out: dict[int, RankOf]) -> None:
    seen: dict[int, Process] = {}
    for p in procs:
        r = out[p.proc]
        if r.rank in seen:
            q = seen[r.rank]
            raise IngestError(
                path,
                f"processes {q.pid} and {p.pid} both map to rank {r.rank} ({r.source}); "
                "say which is which with --rank-map PID=RANK",
            )
        seen[r.rank] = p
