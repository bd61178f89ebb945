"""Generate NCCL Inspector output (JSON v4.0-v4.3 and Prometheus textfiles) for a job whose
truth is known.

No real Inspector output is known to be published, so this writes what the plugin of
NVIDIA/nccl (``plugins/profiler/inspector/``) writes, field for field, for a simulated job:

* **JSON** (one newline-delimited file per process, ``<host>-<pid>.log``), as
  ``inspector_json.cc`` writes it. ``v4.3``: one ``dump_stats`` marker per communicator dump
  carrying ``header`` (``id``, ``comm_name``, ``rank``, ``n_ranks``, ``nnodes``) and ``metadata``
  (``inspector_output_format_version``, ``git_rev``, ``rec_mechanism``, ``dump_timestamp_us``,
  ``hostname``, ``pid``) once, then exactly ``coll_records`` ``{"coll_perf": ...}`` lines,
  ``p2p_records`` ``{"p2p_perf": ...}`` lines and ``proxy_records`` ``{"proxy_trace": ...}``
  lines. ``v4.1``/``v4.2``: the same marker (no proxy counters), each payload line with its own
  ``header`` and ``metadata``. ``v4.0``: no marker, every line self-contained, and no
  ``coll_algo``/``coll_proto``. ``verbose`` adds ``event_trace_sn``/``event_trace_ts`` (per
  channel kernel start and stop, µs); ``proxy`` adds ``proxy_op`` records (v4.3 only).
* **Prometheus** (``--prom``): ``nccl_inspector_metrics_<gpu uuid>.prom`` per rank, as
  ``inspector_prom.cc`` writes it: per (communicator name, collective, message size bucket,
  algo_proto) the geometric mean of the bus bandwidth and the mean execution time, with
  ``--prom-stats`` the per-device counters.

The simulated job
-----------------
``hosts`` × ``gpus`` ranks (global rank = host × gpus + local GPU). Communicators:

* ``DP``: every rank; an ``AllReduce`` of 1.5 GiB (``RING``/``SIMPLE``), ``colls_per_minute``
  per minute, bus bandwidth ``dp_busbw`` GB/s when healthy;
* ``TP hNN``: the GPUs of one host; an ``AllGather`` of 64 MiB over NVLink (``tp_busbw``),
  never touched by a NIC;
* ``PP pNN``: hosts (2i, 2i+1); a ``ReduceScatter`` of 256 MiB and, with ``p2p``, a ``Send`` from
  each rank of the first host to its peer on the second (``Recv`` there);
* ``EP eNN``: hosts (2i+1, 2i+2 mod hosts); an ``AllReduce`` of 128 MiB.

Per instance every member arrives at the nominal time plus a uniform jitter (0-``jitter_us``);
``slow_rank`` arrives ``slow_delay_us`` later from minute ``slow_from_min`` on. The data moves
once the last member has arrived and takes ``bytes × busbw factor ÷ bus bandwidth``; the bus
bandwidth of a communicator spanning ``nic_host`` (more than one node) is multiplied by
``nic_factor`` from minute ``nic_from_min`` on. A rank's ``coll_exec_time_us`` is completion
minus its own arrival (it waits inside the kernel), so the last rank to arrive has the shortest
execution, and its bus bandwidth is the fabric's.

Each process dumps every ``dump_interval_s`` seconds: the records completed since its last dump,
per communicator. A communicator ring holds ``ring_size`` records; ``stall_rank`` does not dump
during minutes ``stall_minutes``, so its rings overflow and the oldest records are lost (counted
in ``*_dropped_total`` / ``*_dropped_since_last_dump``, as the plugin does).

Truth (``ground_truth.json`` with ``--out``; ``Truth`` from ``write_job``)
--------------------------------------------------------------------------
Per communicator: its id, name, members (global ranks), hosts, op and size; per instance the
global rank that arrived last and the fabric's bus bandwidth; the records lost per (communicator,
global rank); the slow rank and the minute it turns slow; the NIC host and the minute it degrades,
and the communicators it degrades.

Run from the repository root (no dependency beyond Python)::

    python sample_traces/generate_inspector.py --out /some/dir --minutes 60 --verbose
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: 2026-01-01 00:00 UTC in µs: where the simulated job starts.
START_US = 1_767_225_600_000_000
US_PER_MIN = 60_000_000
GIB = 1 << 30
MIB = 1 << 20
#: The busbw factor of each collective over n ranks (nccl-tests' definitions).
FACTORS = {
    "AllReduce": lambda n: 2 * (n - 1) / n,
    "AllGather": lambda n: (n - 1) / n,
    "ReduceScatter": lambda n: (n - 1) / n,
    "Send": lambda n: 1.0,
    "Recv": lambda n: 1.0,
}


@dataclass
class JobSpec:
    """What to simulate (see the module docstring)."""

    hosts: int = 4
    gpus: int = 2
    minutes: int = 60
    colls_per_minute: int = 6
    start_us: int = START_US
    jitter_us: int = 200
    slow_rank: int | None = 3
    slow_from_min: float = 30.0
    slow_delay_us: int = 3000
    nic_host: int | None = 2
    nic_from_min: float = 20.0
    nic_factor: float = 210 / 480
    dp_busbw: float = 480.0
    tp_busbw: float = 300.0
    pp_busbw: float = 400.0
    ep_busbw: float = 360.0
    version: str = "v4.3"
    verbose: bool = False
    proxy: bool = False
    p2p: bool = True
    dump_interval_s: float = 10.0
    ring_size: int = 1024
    stall_rank: int | None = None
    stall_minutes: tuple[float, float] = (40.0, 45.0)
    seed: int = 0
    channels: int = 2
    host_names: tuple[str, ...] = ()  # names of the hosts (default h00, h01, ...)
    pid_base: int = 1000  # the process of global rank r is pid_base + r


@dataclass
class Comm:
    """A communicator of the simulated job."""

    comm_id: str
    name: str
    members: list[int]  # global ranks, in comm-rank order
    hosts: list[int]
    op: str
    size: int
    busbw: float
    period_us: int
    offset_us: int

    @property
    def nnodes(self) -> int:
        return len(set(self.hosts))


@dataclass
class Truth:
    """What the job was made to show."""

    spec: dict
    ranks: dict[int, dict]  # global rank -> host name, pid, gpu uuid
    comms: dict[str, dict]  # comm id -> name, members, hosts, op, size, nnodes
    last: dict[str, dict[int, int]] = field(default_factory=dict)  # comm id -> sn -> rank
    fabric_busbw: dict[str, dict[int, float]] = field(default_factory=dict)
    instance_us: dict[str, dict[int, int]] = field(default_factory=dict)  # nominal start
    dropped: dict[str, dict[int, int]] = field(default_factory=dict)  # comm id -> rank -> n
    dropped_sns: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    degraded_comms: list[str] = field(default_factory=list)
    n_coll_records: int = 0
    n_p2p_records: int = 0
    n_proxy_records: int = 0
    files: list[str] = field(default_factory=list)


def host_name(h: int, spec: JobSpec | None = None) -> str:
    """Host `h`'s name: spec.host_names[h] where given, else hNN."""
    if spec is not None and h < len(spec.host_names):
        return spec.host_names[h]
    return f"h{h:02d}"


def comm_id_of(name: str, seed: int) -> str:
    """A 64-bit communicator hash as the plugin prints it (`0x` and lower-case hex)."""
    return "0x" + hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:14].lstrip("0")


def communicators(spec: JobSpec) -> list[Comm]:
    """The job's communicators (module docstring)."""
    H, G = spec.hosts, spec.gpus
    period = US_PER_MIN // spec.colls_per_minute
    out = [
        Comm(comm_id_of("DP", spec.seed), "DP", list(range(H * G)),
             [r // G for r in range(H * G)], "AllReduce", 3 * GIB // 2, spec.dp_busbw,
             period, 0),
    ]  # fmt: skip
    for h in range(H):
        members = [h * G + g for g in range(G)]
        if G > 1:
            out.append(Comm(comm_id_of(f"TP{h}", spec.seed), f"TP {host_name(h)}", members,
                            [h] * G, "AllGather", 64 * MIB, spec.tp_busbw, period,
                            period // 4))  # fmt: skip
    pairs = [("PP", f"p{i:02d}", (2 * i, 2 * i + 1)) for i in range(H // 2)]
    if H > 2:
        pairs += [("EP", f"e{i:02d}", (2 * i + 1, (2 * i + 2) % H)) for i in range(H // 2)]
    for kind, tag, (a, b) in pairs:
        members = [a * G + g for g in range(G)] + [b * G + g for g in range(G)]
        op, size, bw, off = (
            ("ReduceScatter", 256 * MIB, spec.pp_busbw, period // 2)
            if kind == "PP"
            else ("AllReduce", 128 * MIB, spec.ep_busbw, 3 * period // 4)
        )
        out.append(Comm(comm_id_of(kind + tag, spec.seed), f"{kind} {tag}", members,
                        [m // G for m in members], op, size, bw, period, off))  # fmt: skip
    return out


@dataclass
class _Rec:
    """One completed operation on one rank, before it is dumped."""

    end_us: int
    kind: str  # coll | p2p | proxy
    body: dict


def _coll_body(spec: JobSpec, c: Comm, sn: int, arrive: int, end: int, with_algo: bool) -> dict:
    n = len(c.members)
    exec_us = max(1, end - arrive)
    algobw = c.size / (exec_us * 1000.0)
    body: dict = {"coll": c.op}
    if with_algo:
        body |= {"coll_algo": "RING", "coll_proto": "SIMPLE"}
    body |= {
        "coll_sn": sn,
        "coll_msg_size_bytes": c.size,
        "coll_exec_time_us": exec_us,
        "coll_timing_source": "kernel_gpu",
        "coll_algobw_gbs": round(algobw, 6),
        "coll_busbw_gbs": round(algobw * FACTORS[c.op](n), 6),
    }
    if spec.verbose:
        body |= _trace("coll", spec.channels, arrive, end, sn)
    return body


def _trace(prefix: str, channels: int, arrive: int, end: int, sn: int) -> dict:
    base = 1 + 4 * sn * (channels + 1)
    sn_k = [
        {"channel_id": ch, "kernel_start_sn": base + 2 + 3 * ch,
         "kernel_stop_sn": base + 4 + 3 * ch, "kernel_record_sn": base + 3 + 3 * ch}
        for ch in range(channels)
    ]  # fmt: skip
    ts_k = [
        {"channel_id": ch, "kernel_start_ts": arrive + ch, "kernel_stop_ts": end - ch,
         "kernel_record_ts": end - ch}
        for ch in range(channels)
    ]  # fmt: skip
    return {
        "event_trace_sn": {f"{prefix}_start_sn": base, f"{prefix}_stop_sn": base + 1,
                           "kernel_events": sn_k},
        "event_trace_ts": {f"{prefix}_start_ts": arrive - 60, f"{prefix}_stop_ts": arrive - 55,
                           "kernel_events": ts_k},
    }  # fmt: skip


def _p2p_body(spec: JobSpec, op: str, sn: int, peer: int, size: int, arrive: int,
              end: int) -> dict:  # fmt: skip
    exec_us = max(1, end - arrive)
    algobw = size / (exec_us * 1000.0)
    body = {
        "p2p": op,
        "p2p_sn": sn,
        "p2p_peer": peer,
        "p2p_msg_size_bytes": size,
        "p2p_exec_time_us": exec_us,
        "p2p_timing_source": "kernel_gpu",
        "p2p_algobw_gbs": round(algobw, 6),
        "p2p_busbw_gbs": round(algobw, 6),
    }
    if spec.verbose:
        body |= _trace("p2p", spec.channels, arrive, end, sn)
    return body


def _proxy_body(c_rank: int, peer: int, sn: int, op_sn: int, rec_sn: int, start: int,
                end: int, size: int) -> dict:  # fmt: skip
    return {
        "record_type": "proxy_op",
        "record_sn": rec_sn,
        "parent_type": "coll",
        "parent_sn": sn,
        "proxy_op_sn": op_sn,
        "rank": c_rank,
        "channel_id": 0,
        "peer": peer,
        "direction": "send",
        "n_steps": 1,
        "chunk_size_bytes": size,
        "n_steps_started": 1,
        "n_steps_completed": 1,
        "n_steps_dropped": 0,
        "trans_size_bytes": size,
        "event_trace_sn": {"proxy_op_start_sn": 1, "proxy_op_in_progress_sn": 2,
                           "proxy_op_stop_sn": 3},
        "event_trace_ts": {"proxy_op_start_ts": start, "proxy_op_in_progress_ts": start + 5,
                           "proxy_op_stop_ts": end},
    }  # fmt: skip


def simulate(spec: JobSpec) -> tuple[list[Comm], Truth, dict[tuple[str, int], list[_Rec]]]:
    """The job's records per (comm id, global rank), in completion order, and its truth."""
    rng = random.Random(spec.seed)
    comms = communicators(spec)
    G = spec.gpus
    truth = Truth(
        spec={k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(spec).items()},
        ranks={
            r: {"host": host_name(r // G, spec), "pid": spec.pid_base + r, "gpu": f"GPU{r % G}",
                "uuid": f"GPU-{hashlib.sha256(f'{spec.seed}:{r}'.encode()).hexdigest()[:8]}"}
            for r in range(spec.hosts * G)
        },
        comms={
            c.comm_id: {"name": c.name, "members": c.members,
                        "hosts": sorted({host_name(h, spec) for h in c.hosts}), "op": c.op,
                        "size": c.size, "nnodes": c.nnodes}
            for c in comms
        },
    )  # fmt: skip
    nic_us = spec.start_us + int(spec.nic_from_min * US_PER_MIN)
    slow_us = spec.start_us + int(spec.slow_from_min * US_PER_MIN)
    end_us = spec.start_us + spec.minutes * US_PER_MIN
    recs: dict[tuple[str, int], list[_Rec]] = {(c.comm_id, r): [] for c in comms for r in c.members}
    with_algo = _version(spec.version) >= (4, 3)
    for c in comms:
        spans_nic = spec.nic_host is not None and spec.nic_host in c.hosts and c.nnodes > 1
        if spans_nic:
            truth.degraded_comms.append(c.comm_id)
        last, fabric, nominal = {}, {}, {}
        n = len(c.members)
        factor = FACTORS[c.op](n)
        proxy_sn = 0
        sn = 0
        t = spec.start_us + c.offset_us
        while t < end_us:
            sn += 1
            arrive = {r: t + rng.randrange(spec.jitter_us + 1) for r in c.members}
            if spec.slow_rank in arrive and t >= slow_us:
                arrive[spec.slow_rank] += spec.slow_delay_us
            bw = c.busbw * (spec.nic_factor if spans_nic and t >= nic_us else 1.0)
            bw *= 1 + rng.uniform(-0.02, 0.02)
            transfer = max(1, round(c.size * factor / (bw * 1000.0)))
            first_last = max(arrive.values())
            lasts = [r for r in c.members if arrive[r] == first_last]
            end = first_last + transfer
            last[sn], nominal[sn] = lasts[0], t
            fabric[sn] = c.size / (transfer * 1000.0) * factor
            for i, r in enumerate(c.members):
                body = _coll_body(spec, c, sn, arrive[r], end, with_algo)
                recs[(c.comm_id, r)].append(_Rec(end, "coll", body))
                if spec.proxy and with_algo and c.nnodes > 1:
                    proxy_sn += 1
                    peer = (i + 1) % n
                    recs[(c.comm_id, r)].append(
                        _Rec(end + 1, "proxy", _proxy_body(i, peer, sn, proxy_sn, proxy_sn,
                                                           arrive[r], end, c.size // n))
                    )  # fmt: skip
            if spec.p2p and c.name.startswith("PP"):
                half = n // 2
                size = 32 * MIB
                p_end = end + transfer // 4 + 1
                for i in range(half):
                    src, dst = c.members[i], c.members[i + half]
                    recs[(c.comm_id, src)].append(
                        _Rec(p_end, "p2p", _p2p_body(spec, "Send", sn, i + half, size, end, p_end))
                    )
                    recs[(c.comm_id, dst)].append(
                        _Rec(p_end, "p2p", _p2p_body(spec, "Recv", sn, i, size, end, p_end))
                    )
            t += c.period_us
        truth.last[c.comm_id] = last
        truth.fabric_busbw[c.comm_id] = fabric
        truth.instance_us[c.comm_id] = nominal
    for v in recs.values():
        v.sort(key=lambda x: x.end_us)
    return comms, truth, recs


def _version(v: str) -> tuple[int, int]:
    major, _, minor = v.lstrip("v").partition(".")
    return int(major), int(minor or 0)


def _dump_times(spec: JobSpec, rank: int) -> list[int]:
    """When process `rank` dumps (µs): every interval, except while it stalls."""
    step = int(spec.dump_interval_s * 1_000_000)
    end = spec.start_us + spec.minutes * US_PER_MIN + 2 * step + 60_000_000
    lo = spec.start_us + int(spec.stall_minutes[0] * US_PER_MIN)
    hi = spec.start_us + int(spec.stall_minutes[1] * US_PER_MIN)
    out, t = [], spec.start_us + step
    while t <= end:
        if not (rank == spec.stall_rank and lo <= t < hi):
            out.append(t)
        t += step
    return out


def _dumps(
    spec: JobSpec, records: list[_Rec], times: list[int]
) -> list[tuple[int, list[_Rec], dict[str, int]]]:
    """(dump time, records written, drop counts) per dump with something to say, one ring per
    kind of `ring_size` records: the oldest are overwritten when a dump comes late."""
    out, i = [], 0
    total = {"coll": 0, "p2p": 0, "proxy": 0}
    for t in times:
        batch = []
        while i < len(records) and records[i].end_us <= t:
            batch.append(records[i])
            i += 1
        kept: list[_Rec] = []
        since = {"coll": 0, "p2p": 0, "proxy": 0}
        for kind in ("coll", "p2p", "proxy"):
            mine = [r for r in batch if r.kind == kind]
            lost = max(0, len(mine) - spec.ring_size)
            since[kind] = lost
            total[kind] += lost
            kept += mine[lost:]
        if kept or any(since.values()):
            out.append((t, kept, {**{f"{k}_since": v for k, v in since.items()},
                                  **{f"{k}_total": v for k, v in total.items()}}))  # fmt: skip
    return out


def _dumps_lines(spec: JobSpec, c: Comm, rank: int, truth: Truth, dumps: list) -> list[str]:
    ver = _version(spec.version)
    info = truth.ranks[rank]
    header = {"id": c.comm_id, "comm_name": c.name, "rank": c.members.index(rank),
              "n_ranks": len(c.members), "nnodes": c.nnodes}  # fmt: skip
    lines = []
    for t, kept, drops in dumps:
        meta = {"inspector_output_format_version": spec.version, "git_rev": "",
                "rec_mechanism": "nccl_profiler_interface", "dump_timestamp_us": t,
                "hostname": info["host"], "pid": info["pid"]}  # fmt: skip
        colls = [r for r in kept if r.kind == "coll"]
        p2ps = [r for r in kept if r.kind == "p2p"]
        proxies = [r for r in kept if r.kind == "proxy"] if ver >= (4, 3) else []
        if ver >= (4, 1):
            stats = {"coll_records": len(colls), "coll_dropped_total": drops["coll_total"],
                     "coll_dropped_since_last_dump": drops["coll_since"],
                     "p2p_records": len(p2ps), "p2p_dropped_total": drops["p2p_total"],
                     "p2p_dropped_since_last_dump": drops["p2p_since"]}  # fmt: skip
            if ver >= (4, 3) and spec.proxy:
                stats |= {"proxy_records": len(proxies),
                          "proxy_dropped_total": drops["proxy_total"],
                          "proxy_dropped_since_last_dump": drops["proxy_since"],
                          "proxy_ops_dropped_total": 0, "proxy_ops_dropped_since_last_dump": 0,
                          "proxy_pxn_skipped_process_total": 0,
                          "proxy_steps_enabled": 0}  # fmt: skip
            lines.append(_line({"header": header, "metadata": meta, "dump_stats": stats}))
        own = ver < (4, 3)
        for kind, recs in (("coll_perf", colls), ("p2p_perf", p2ps), ("proxy_trace", proxies)):
            for r in recs:
                rec = {kind: r.body}
                lines.append(_line({"header": header, "metadata": meta, **rec} if own else rec))
    return lines


def _line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


def write_job(out: str | Path, spec: JobSpec | None = None) -> Truth:
    """Write the job's Inspector JSON files (one per process) into `out`; return its truth."""
    spec = spec or JobSpec()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    comms, truth, recs = simulate(spec)
    for r, info in truth.ranks.items():
        times = _dump_times(spec, r)
        lines: list[tuple[int, int, str]] = []  # (dump time, comm order, line)
        for ci, c in enumerate(comms):
            if r not in c.members:
                continue
            records = recs[(c.comm_id, r)]
            dumps = _dumps(spec, records, times)
            kept = {id(x) for _, k, _ in dumps for x in k}
            lost = [x.body["coll_sn"] for x in records if x.kind == "coll" and id(x) not in kept]
            if dumps:
                truth.dropped.setdefault(c.comm_id, {})[r] = dumps[-1][2]["coll_total"]
            if lost:
                truth.dropped_sns.setdefault(c.comm_id, {})[r] = lost
            for x in records:
                if id(x) in kept:
                    n = {"coll": "n_coll_records", "p2p": "n_p2p_records"}.get(x.kind)
                    if n is None:
                        if _version(spec.version) >= (4, 3):
                            truth.n_proxy_records += 1
                    else:
                        setattr(truth, n, getattr(truth, n) + 1)
            per_dump: dict[int, list[str]] = {}
            for d in dumps:
                per_dump.setdefault(d[0], []).extend(_dumps_lines(spec, c, r, truth, [d]))
            for t, ls in per_dump.items():
                lines.extend((t, ci, line) for line in ls)
        lines.sort(key=lambda x: (x[0], x[1]))  # stable: a batch stays whole and in order
        name = f"{info['host']}-{info['pid']}.log"
        (out / name).write_text("".join(line + "\n" for _, _, line in lines))
        truth.files.append(name)
    return truth


def _bucket_label(size: int) -> str:
    """The plugin's message_size label (inspector_prom.cc inspectorPromFormatMessageSizeRange)."""
    if size == 0:
        return "0B"
    units = ["B", "KB", "MB", "GB", "TB"]
    i, v = 0, float(size)
    while v >= 1024.0 and i < 4:
        v /= 1024.0
        i += 1
    lower = max(1.0, math.floor(max(v, 1.0)))
    return f"{lower:.0f}-{lower + 1:.0f}{units[i]}"


def write_prom(out: str | Path, spec: JobSpec | None = None, stats: bool = False,
               slurm_job_id: str = "unknown") -> dict[str, dict]:  # fmt: skip
    """Write one Prometheus textfile per rank (the whole job aggregated, as one dump after the
    last operation would); return per file name the (metric line key -> value) written."""
    spec = spec or JobSpec()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    comms, truth, recs = simulate(spec)
    written: dict[str, dict] = {}
    for r, info in truth.ranks.items():
        buckets: dict[tuple, list] = {}
        p2p: dict[tuple, list] = {}
        n_coll = n_p2p = 0
        for c in comms:
            if r not in c.members:
                continue
            for x in recs[(c.comm_id, r)]:
                b = x.body
                if x.kind == "coll":
                    n_coll += 1
                    key = (len(c.members), c.nnodes, b["coll"], _bucket_label(c.size), c.name,
                           "RING_SIMPLE")  # fmt: skip
                    buckets.setdefault(key, []).append((b["coll_busbw_gbs"],
                                                        b["coll_exec_time_us"]))  # fmt: skip
                elif x.kind == "p2p":
                    n_p2p += 1
                    pkey = (len(c.members), c.nnodes, b["p2p"],
                            _bucket_label(b["p2p_msg_size_bytes"]), c.name)  # fmt: skip
                    p2p.setdefault(pkey, []).append((b["p2p_busbw_gbs"], b["p2p_exec_time_us"]))
        lines: list[str] = []
        values: dict[tuple, float] = {}
        base = (f'version="v7.1",slurm_job_id="{slurm_job_id}",node="{info["host"]}",'
                f'gpu="{info["gpu"]}"')  # fmt: skip
        for (nr, nn, op, size, name, ap), v in sorted(buckets.items()):
            labels = (f'{base},comm_name="{name}",n_nodes="{nn}",nranks="{nr}",'
                      f'collective="{op}",message_size="{size}",algo_proto="{ap}"')  # fmt: skip
            gm = math.exp(sum(math.log(bw) for bw, _ in v) / len(v))
            mean = sum(e for _, e in v) / len(v)
            lines += [f"nccl_bus_bandwidth_gbs{{{labels}}} {gm:.6g}",
                      f"nccl_collective_exec_time_microseconds{{{labels}}} {mean:.6g}"]  # fmt: skip
            values[("bus", name, op, size)] = float(f"{gm:.6g}")
            values[("exec", name, op, size)] = float(f"{mean:.6g}")
        for (nr, nn, op, size, name), v in sorted(p2p.items()):
            labels = (f'{base},comm_name="{name}",n_nodes="{nn}",nranks="{nr}",'
                      f'p2p_operation="{op}",message_size="{size}"')  # fmt: skip
            gm = math.exp(sum(math.log(bw) for bw, _ in v) / len(v))
            mean = sum(e for _, e in v) / len(v)
            lines += [f"nccl_p2p_bus_bandwidth_gbs{{{labels}}} {gm:.6g}",
                      f"nccl_p2p_exec_time_microseconds{{{labels}}} {mean:.6g}"]  # fmt: skip
            values[("p2p_bus", name, op, size)] = float(f"{gm:.6g}")
        if stats:
            lines += [
                f"nccl_collectives_total{{{base}}} {n_coll}",
                f"nccl_collectives_dropped_total{{{base}}} 0",
                f"nccl_p2p_total{{{base}}} {n_p2p}",
                f"nccl_p2p_dropped_total{{{base}}} 0",
            ]
            values[("collectives_total",)] = n_coll  # fmt: skip
        name = f"nccl_inspector_metrics_{info['uuid']}.prom"
        (out / name).write_text("".join(line + "\n" for line in lines))
        written[name] = values
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--minutes", type=int, default=60)
    p.add_argument("--colls-per-minute", type=int, default=6)
    p.add_argument("--version", default="v4.3", choices=["v4.0", "v4.1", "v4.2", "v4.3"])
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--proxy", action="store_true")
    p.add_argument("--ring-size", type=int, default=1024)
    p.add_argument("--stall-rank", type=int, default=None)
    p.add_argument("--prom", action="store_true", help="Prometheus textfiles instead of JSON")
    p.add_argument("--prom-stats", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    spec = JobSpec(hosts=a.hosts, gpus=a.gpus, minutes=a.minutes,
                   colls_per_minute=a.colls_per_minute, version=a.version, verbose=a.verbose,
                   proxy=a.proxy, ring_size=a.ring_size, stall_rank=a.stall_rank,
                   seed=a.seed)  # fmt: skip
    if a.prom:
        write_prom(a.out, spec, a.prom_stats)
        return 0
    truth = write_job(a.out, spec)
    doc = asdict(truth)
    (Path(a.out) / "ground_truth.json").write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
