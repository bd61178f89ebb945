"""Synthetic NCCL_DEBUG logs with known ground truth, in the grammar of each NCCL version
family (2.4–2.7, 2.8–2.17, 2.18–2.21, 2.22–2.25, 2.26+; nccl_logs.md), for tests and the
benchmark. No real log is bundled: every line here is generated from the grammar with
neutral values (hosts nodeNN, pids 41xx, addresses from 192.0.2.0/24).

`make_log(Job(...))` returns a `Log`: its physical lines, and `truth`, the rows the parser
must produce and the line counts it must report.
"""

from __future__ import annotations

import gzip
import random
from dataclasses import dataclass, field
from pathlib import Path

BUS_IDS = ("1b000", "1c000", "3d000", "3e000", "9d000", "9e000", "bd000", "be000")
DTYPES = {0: ("int8", 1), 6: ("float16", 2), 7: ("float32", 4), 9: ("bfloat16", 2)}
OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Send", "Recv")
NORM = {
    "AllReduce": "allreduce", "AllGather": "allgather", "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast", "Send": "send", "Recv": "recv",
}  # fmt: skip
FOREIGN = (
    "epoch 1 step 10 loss 2.3456",
    "Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.02it/s]",
    "WARNING: the NCCL_DEBUG=INFO output below is long",
    "",
)
UNKNOWN_MSG = "Future NCCL message nobody parses yet 42"
ALGO_NAMES = {
    "Tree": "TREE", "Ring": "RING", "CollNet": "COLLNET", "CollNetDirect": "COLLNET_DIRECT",
    "CollNetChain": "COLLNET_CHAIN", "NVLS": "NVLS", "NVLSTree": "NVLS_TREE", "PAT": "PAT",
}  # fmt: skip


def v(text: str) -> tuple[int, int, int]:
    """'2.18.3' → (2, 18, 3)."""
    a, b, c = (int(x) for x in text.split("."))
    return a, b, c


@dataclass
class Job:
    """What to generate. `network`: nvlink (one node) | ib | roce | socket | ofi | ib_socket
    (IB devices listed, yet sockets chosen, as with NCCL_NET=Socket).
    `intra`: p2p | shm. `launcher`: None | rank ([rankN]:) | srun (N: ) | mpi ([1,N]<stdout>:)
    | torchrun ([defaultN]:). `hosts` (one per node) and `pid_base` override the names;
    `coll_plan` ((op, datatype, count, root), ...) replaces the `colls` random calls."""

    version: str = "2.18.3"
    nodes: int = 2
    gpus: int = 4
    network: str = "ib"
    gdr: bool = True
    intra: str = "p2p"
    nvls: bool = False
    channels: int = 2
    tuning: bool = False
    colls: int = 0
    warn_rank: int | None = None
    timeout_culprit: int | None = None
    launcher: str | None = None
    noise: bool = True
    env: dict[str, str] = field(default_factory=dict)
    info_timestamps: bool = False
    hosts: tuple[str, ...] = ()
    pid_base: int = 4100
    coll_plan: tuple[tuple[str, int, int, int], ...] = ()
    seed: int = 0


@dataclass
class Truth:
    """What the parser must find. Processes are keyed by (host, pid)."""

    lines: dict[str, int] = field(
        default_factory=lambda: dict(total=0, nccl=0, recognised=0, unknown=0, damaged=0, torch=0)
    )
    versions: set[str] = field(default_factory=set)
    shape_version: str | None = None
    processes: dict[tuple[str, int], dict] = field(default_factory=dict)
    communicators: list[dict] = field(default_factory=list)
    rings: list[dict] = field(default_factory=list)
    trees: list[dict] = field(default_factory=list)
    connections: list[dict] = field(default_factory=list)
    network: list[dict] = field(default_factory=list)
    tuning: list[dict] = field(default_factory=list)
    env: list[dict] = field(default_factory=list)
    colls: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    timeouts: list[dict] = field(default_factory=list)
    culprits: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)


@dataclass
class Log:
    lines: list[str]
    truth: Truth

    def write(self, path: Path, gz: bool = False, crlf: bool = False) -> Path:
        """Write the lines (gzip or plain, optionally with Windows line ends)."""
        data = ("\r\n" if crlf else "\n").join(self.lines) + "\n"
        if gz:
            with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
                f.write(data)
        else:
            path.write_text(data, encoding="utf-8", newline="")
        return path


class _Rank:
    """One process of the job and the lines it writes, each tagged with its category."""

    def __init__(self, job: Job, rank: int) -> None:
        self.job, self.rank = job, rank
        self.node, self.local = divmod(rank, job.gpus)
        self.host = job.hosts[self.node] if job.hosts else f"node{self.node + 1:02d}"
        self.pid = job.pid_base + rank
        self.lines: list[tuple[str, str]] = []

    def prefix(self, tid: int | None = None, src: str | None = None, level: str = "INFO") -> str:
        p = f"{self.host}:{self.pid}:{tid or self.pid} [{self.local}] "
        if src:
            p += f"{src} "
        return p + f"NCCL {level} "

    def info(self, msg: str, cat: str = "recognised") -> None:
        self.lines.append((self.prefix() + msg, cat))

    def raw(self, text: str, cat: str) -> None:
        self.lines.append((text, cat))


def _ring(job: Job, channel: int) -> list[int]:
    """Ring order of a channel: node by node; odd channels walk each node backwards."""
    out = []
    for node in range(job.nodes):
        local = list(range(job.gpus))
        out += [node * job.gpus + g for g in (local[::-1] if channel % 2 else local)]
    return out


def _tree(job: Job, rank: int, channel: int) -> tuple[int, list[int]]:
    """(parent, children) of a rank: a chain inside each node from its local rank 0, and the
    node heads in a chain across nodes (channel 1 in the opposite node order)."""
    node, local = divmod(rank, job.gpus)
    nodes = list(range(job.nodes)) if channel % 2 == 0 else list(range(job.nodes))[::-1]
    pos = nodes.index(node)
    down = [rank + 1] if local + 1 < job.gpus else []
    if local > 0:
        return rank - 1, down
    up = nodes[pos - 1] * job.gpus if pos > 0 else -1
    if pos + 1 < len(nodes):
        down.append(nodes[pos + 1] * job.gpus)
    return up, down


def make_log(job: Job) -> Log:
    """Generate the log of `job` with its ground truth."""
    ver = v(job.version)
    rng = random.Random(job.seed)
    truth = Truth(versions={job.version})
    nranks = job.nodes * job.gpus
    ranks = [_Rank(job, r) for r in range(nranks)]
    comm_id = "0x5f3c2a1b9d8e7f60"
    for rk in ranks:
        truth.processes[(rk.host, rk.pid)] = {
            "rank": rk.rank, "devices": [rk.local], "cuda_version": None, "nccl_version": None,
        }  # fmt: skip
        _init_lines(job, ver, rk, truth, comm_id, nranks)
    if job.colls or job.coll_plan:
        _coll_lines(job, ver, ranks, truth, rng)
    if job.warn_rank is not None:
        _warn_lines(job, ver, ranks[job.warn_rank], truth)
    if job.timeout_culprit is not None:
        _timeout_lines(job, ranks, truth)
    if job.noise:
        for rk in ranks:
            _noise(rk, rng)
    _finish_truth(job, ver, ranks, truth)
    lines = _interleave(job, ranks, rng, truth)
    return Log(lines, truth)


def _comm_line(job: Job, ver: tuple, rk: _Rank, comm: str, cid: str, n: int, event: str) -> str:
    nv = f" nvmlDev {rk.local}" if ver >= (2, 18, 0) or (2, 4, 2) <= ver < (2, 5, 0) else ""
    bus = f" busId {BUS_IDS[rk.local]}" if ver >= (2, 5, 0) else ""
    commid = f" commId {cid}" if ver >= (2, 16, 0) else ""
    api = "ncclCommInitRank " if ver >= (2, 21, 0) else ""
    lead = f"[Rank {rk.rank}] " if ver >= (2, 29, 0) and event == "Init START" else ""
    return f"{lead}{api}comm {comm} rank {rk.rank} nranks {n} cudaDev {rk.local}{nv}{bus}{commid} - {event}"


def _init_lines(job: Job, ver: tuple, rk: _Rank, t: Truth, cid: str, n: int) -> None:
    comm = f"0x55aa{rk.rank:04x}0000"
    proc = t.processes[(rk.host, rk.pid)]
    if ver >= (2, 22, 0):
        rk.info(f"NCCL version {job.version}+cuda12.4")
        proc.update(nccl_version=job.version, cuda_version="12.4")
    elif rk.rank == 0:
        rk.raw(f"NCCL version {job.version}+cuda12.4", "recognised")
        proc["bare_version"] = job.version
    if ver >= (2, 29, 0):
        rk.info("NCCL git version master 0123abc")
        proc["git_version"] = "master 0123abc"
    if ver >= (2, 13, 4):
        rk.info("cudaDriverVersion 12040")
        proc["cuda_driver"] = 12040
    ip = f"192.0.2.{11 + rk.node}"
    if ver < (2, 8, 0):
        rk.info(f"Bootstrap : Using [0]eth0:{ip}<0>")
    elif ver < (2, 24, 0):
        rk.info(f"Bootstrap : Using eth0:{ip}<0>")
    else:
        rk.info(f"Bootstrap: Using eth0:{ip}<0>")
    t.network.append(_net(rk, "bootstrap", device="eth0", address=ip))
    for name, value in job.env.items():
        rk.info(f"{name} set by environment to {value}")
        t.env.append({"host": rk.host, "pid": rk.pid, "name": name, "value": value})
    _net_lines(job, ver, rk, t, ip)
    if ver >= (2, 18, 0):
        rk.info(_comm_line(job, ver, rk, comm, cid, n, "Init START"))
    if job.nvls and ver >= (2, 17, 1):
        rk.info(f"NVLS multicast support is available on dev {rk.local}")
    if rk.rank == 0:
        for c in range(job.channels):
            _ring_line(job, ver, rk, t, comm, c)
    _tree_line(job, ver, rk, t, comm)
    if job.tuning and rk.rank == 0:
        _tuning_table(ver, rk, t, comm)
    _connection_lines(job, ver, rk, t, comm)
    comm_row = {
        "host": rk.host, "pid": rk.pid, "comm": comm, "rank": rk.rank, "nranks": n,
        "cuda_dev": rk.local, "comm_id": cid if ver >= (2, 16, 0) else None,
        "bus_id": BUS_IDS[rk.local] if ver >= (2, 5, 0) else None,
        "nvml_dev": rk.local if ver >= (2, 18, 0) or (2, 4, 2) <= ver < (2, 5, 0) else None,
        "api": "ncclCommInitRank" if ver >= (2, 21, 0) else None,
        "status": "Init COMPLETE", "connected": [], "n_nodes": None, "init_seconds": None,
        "nvls_heads": None, "nvls_support": True if job.nvls and ver >= (2, 17, 1) else None,
        "ring_pxn": None, "ring_gdr": None,
    }  # fmt: skip
    if ver >= (2, 8, 3):
        if ver >= (2, 24, 0):
            gdr = int(job.gdr and job.network in ("ib", "roce", "ofi") and job.nodes > 1)
            rk.info(f"Connected all rings, use ring PXN 0 GDR {gdr}")
            comm_row.update(ring_pxn=0, ring_gdr=gdr)
        else:
            rk.info("Connected all rings")
        rk.info("Connected all trees")
        comm_row["connected"] = ["rings", "trees"]
    if job.nvls and ver >= (2, 18, 1):
        rk.info(
            f"NVLS comm {comm} headRank {rk.local} nHeads {job.gpus} buffSize 1048576 "
            f"memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736"
        )
        comm_row["nvls_heads"] = job.gpus
    if ver >= (2, 18, 0):
        nv = f"{job.channels} nvls channels, " if job.nvls else ""
        rk.info(
            f"{job.channels} coll channels, {nv}{job.channels} p2p channels, 2 p2p channels per peer"
        )
        comm_row.update(coll_channels=job.channels, p2p_channels=job.channels)
        comm_row["nvls_channels"] = job.channels if job.nvls else None
    if ver >= (2, 20, 3):
        rk.info(
            f"comm {comm} rank {rk.rank} nRanks {n} nNodes {job.nodes} localRanks {job.gpus} "
            f"localRank {rk.local} MNNVL 0"
        )
        comm_row.update(n_nodes=job.nodes, local_ranks=job.gpus, local_rank=rk.local)
    if ver >= (2, 22, 0):
        total = 0.5 + rk.rank / 100
        func = " - ncclCommInitRank" if ver >= (2, 23, 0) else ""
        rk.info(
            f"Init timings{func}: rank {rk.rank} nranks {n} total {total:.2f} "
            f"(kernels 0.10, alloc 0.01, bootstrap 0.20, allgathers 0.01, topo 0.10, graphs 0.01, "
            f"connections 0.05, rest 0.02)"
        )
        comm_row["init_seconds"] = round(total, 2)
    rk.info(_comm_line(job, ver, rk, comm, cid, n, "Init COMPLETE"))
    t.communicators.append(comm_row)


def _net(rk: _Rank, kind: str, **cols: object) -> dict:
    return {"host": rk.host, "pid": rk.pid, "kind": kind, **cols}


def _net_lines(job: Job, ver: tuple, rk: _Rank, t: Truth, ip: str) -> None:
    net = job.network
    if net in ("ib", "roce", "ib_socket"):
        link = "RoCE" if net == "roce" else "IB"
        ro = " [RO]" if ver >= (2, 12, 7) else ""
        devs = " ".join(f"[{i}]mlx5_{i}:1/{link}" for i in range(2))
        rk.info(f"NET/IB : Using {devs}{ro}; OOB eth0:{ip}<0>")
        for i in range(2):
            t.network.append(_net(rk, "ib", device=f"mlx5_{i}", link=link, idx=i, port=1))
        name = "IB"
        if net == "ib_socket":
            rk.info(f"NET/Socket : Using [0]eth0:{ip}<0>")
            t.network.append(_net(rk, "socket", device="eth0", address=ip, idx=0))
            name = "Socket"
    elif net == "ofi":
        rk.info("NET/Plugin: Loaded net plugin AWS Libfabric (v7)")
        rk.info("NET/OFI Using aws-ofi-nccl 1.7.4-aws")
        rk.info("NET/OFI Selected Provider is efa (found 4 nics)")
        t.network.append(_net(rk, "plugin"))
        t.network.append(_net(rk, "ofi"))
        t.network.append(_net(rk, "ofi", device="efa", idx=4))
        name = "AWS Libfabric"
    else:
        rk.info("NET/IB : No device found.")
        rk.info(f"NET/Socket : Using [0]eth0:{ip}<0>")
        t.network.append(_net(rk, "no_ib"))
        t.network.append(_net(rk, "socket", device="eth0", address=ip, idx=0))
        name = "Socket"
    if ver >= (2, 27, 0) and net != "nvlink":
        rk.info(f"Assigned NET plugin {name} to comm")
        t.network.append(_net(rk, "plugin", device=name))
    rk.info(f"Using network {name}")
    t.network.append(_net(rk, "network", device=name))
    if job.gdr and net in ("ib", "roce", "ofi"):
        rk.info(
            f"GPU Direct RDMA Enabled for GPU {BUS_IDS[rk.local]} / HCA 0 (distance 4 <= 4), read 0"
        )
        t.network.append(_net(rk, "gdr", enabled=True))


def _ring_line(job: Job, ver: tuple, rk: _Rank, t: Truth, comm: str, c: int) -> None:
    ring = _ring(job, c)
    n = len(ring)
    if ver < (2, 5, 0):
        text, shown, trunc = f"Channel {c:02d} :" + "".join(f"{r:4d}" for r in ring), ring, False
    elif ver < (2, 23, 0):
        shown, trunc = ring[:20], False
        text = f"Channel {c:02d}/{job.channels:02d} :" + "".join(f"{r:4d}" for r in shown)
    else:
        w = len(str(n - 1))
        text, shown = f"Channel {c:02d}/{job.channels:02d} :", []
        for r in ring:
            if len(text) + w + 1 > 124:
                break
            text += f" {r:{w}d}"
            shown.append(r)
        trunc = len(shown) < n
        text += "..." if trunc else ""
    rk.info(text)
    t.rings.append(
        {"host": rk.host, "pid": rk.pid, "comm": comm, "channel": c, "ranks": shown,
         "truncated": trunc, "n_channels": job.channels if ver >= (2, 5, 0) else None}
    )  # fmt: skip


def _tree_line(job: Job, ver: tuple, rk: _Rank, t: Truth, comm: str) -> None:
    parts = []
    for c in range(job.channels):
        up, down = _tree(job, rk.rank, c)
        d = (down + [-1, -1, -1])[:3]
        if ver < (2, 5, 0):
            parts.append(f"[{c}] {up}->{rk.rank}->{d[0]}/{d[1]}/{d[2]}")
        elif ver < (2, 8, 0):
            parts.append(
                f"[{c}] {d[0]}/{d[1]}/{d[2]}->{rk.rank}->{up}|{up}->{rk.rank}->{d[0]}/{d[1]}/{d[2]}"
            )
        else:
            parts.append(f"[{c}] {d[0]}/{d[1]}/{d[2]}->{rk.rank}->{up}")
        t.trees.append(
            {"host": rk.host, "pid": rk.pid, "comm": comm, "channel": c, "me": rk.rank,
             "up": up, "down": down}
        )  # fmt: skip
    rk.info("Trees " + " ".join(parts))


def _bracket(ver: tuple, rank: int, gpus: int, net: bool) -> str:
    local = rank % gpus
    if ver < (2, 5, 0):
        return "" if net else f"[{local}]"
    if ver < (2, 18, 3):
        return f"[{BUS_IDS[local]}]"
    return f"[{local}]"


def _connection_lines(job: Job, ver: tuple, rk: _Rank, t: Truth, comm: str) -> None:
    for c in range(job.channels):
        ring = _ring(job, c)
        i = ring.index(rk.rank)
        nxt, prv = ring[(i + 1) % len(ring)], ring[i - 1]
        for src, dst, direction in ((rk.rank, nxt, "send"), (prv, rk.rank, "receive")):
            inter = src // job.gpus != dst // job.gpus
            if not inter and direction == "receive":
                continue  # P2P/SHM connections are printed once, by the sender
            if len(ring) == 1:
                continue
            _connection(job, ver, rk, t, comm, c, src, dst, direction if inter else None)


def _via(job: Job, ver: tuple, inter: bool) -> tuple[str, str, dict]:
    if inter:
        name = {"ib": "IB", "roce": "IB", "socket": "Socket", "ofi": "AWS Libfabric",
                "ib_socket": "Socket"}[job.network]  # fmt: skip
        gdr = job.gdr and name != "Socket"
        via = f"NET/{name}/0" + ("/GDRDMA" if gdr else "")
        return via, f"NET/{name}", {"net": name, "net_dev": 0, "gdr": gdr}
    if job.intra == "shm":
        via = "SHM/direct/direct" if ver >= (2, 13, 4) else "direct shared memory"
        return via, "SHM", {"gdr": None}
    if ver >= (2, 18, 1):
        return "P2P/CUMEM/read", "P2P/CUMEM", {"gdr": None}
    return ("P2P/IPC/read" if ver >= (2, 12, 0) else "P2P/IPC"), "P2P/IPC", {"gdr": None}


def _connection(job, ver, rk, t, comm, c, src, dst, direction) -> None:
    inter = direction is not None
    via, transport, extra = _via(job, ver, inter)
    kw = "Ring" if ver < (2, 7, 0) else "Channel"
    conn = "/0" if ver >= (2, 12, 0) and not (job.intra == "shm" and not inter) else ""
    sb = _bracket(ver, src, job.gpus, inter)
    db = _bracket(ver, dst, job.gpus, inter)
    d = f"[{direction}] " if direction else ""
    rk.info(f"{kw} {c:02d}{conn} : {src}{sb} -> {dst}{db} {d}via {via}")
    t.connections.append(
        {"host": rk.host, "pid": rk.pid, "comm": comm, "channel": c,
         "conn": 0 if conn else None, "src": src, "dst": dst, "direction": direction,
         "peer": src if direction == "receive" else dst, "transport": transport, "via": via,
         "inter": inter, **extra}
    )  # fmt: skip


_TABLE_FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")


def _tuning_table(ver: tuple, rk: _Rank, t: Truth, comm: str) -> None:
    """The TUNING table of rank 0: old single block (< 2.18.1) or 3-algorithm blocks."""
    protos = ("LL", "LL128", "Simple")

    def cell(fi: int, ai: int, pi: int) -> tuple[float, float]:
        return round(4.0 + fi + ai * 0.5 + pi * 0.1, 1), round(10.0 + fi * 2 + ai + pi, 1)

    def rows(algos: list[tuple[int, str]]) -> None:
        for fi, func in enumerate(_TABLE_FUNCS):
            cells = ""
            for ai, algo in algos:
                for pi, proto in enumerate(protos):
                    lat, bw = cell(fi, ai, pi)
                    cells += f"{lat:8.1f}/{bw:6.1f} |"
                    t.tuning.append(
                        {"kind": "table", "func": func, "algo": ALGO_NAMES[algo],
                         "proto": proto.upper(),
                         "latency_us": lat, "bw_gbps": bw, "max_threads": 512}
                    )  # fmt: skip
            rk.info(f"{func:>13} |{cells}")

    if ver < (2, 18, 1):
        algos = list(enumerate(("Tree", "Ring", "CollNet")))
        rk.info("Latency/AlgBw |" + "".join(f" {a:>7}/{p:>6} |" for _, a in algos for p in protos))
        rk.info(" Max NThreads |" + "".join(f" {512:14d} |" for _ in range(9)))
        rows(algos)
        return
    names = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
    for block in range(0, len(names), 3):
        algos = list(enumerate(names))[block : block + 3]
        rk.info("  Algorithm   |" + "".join(f" {'':>14}   {a:>14}   {'':>14} |" for _, a in algos))
        rk.info("  Protocol    |" + "".join(f" {p:>14} |" for _ in range(3) for p in protos))
        rk.info(" Max NThreads |" + "".join(f" {512:14d} |" for _ in algos for _ in protos))
        rows(algos)


def _coll_lines(job: Job, ver: tuple, ranks: list[_Rank], t: Truth, rng: random.Random) -> None:
    nranks = len(ranks)
    plan = list(job.coll_plan)
    for i in range(0 if plan else job.colls):
        op = OPS[i % len(OPS)] if nranks > 1 else "AllReduce"
        dtype = (9, 7, 6)[i % 3]
        plan.append((op, dtype, rng.randrange(1, 1 << 22), rng.randrange(nranks)))
    for rk in ranks:
        comm = f"0x55aa{rk.rank:04x}0000"
        for i, (op, dtype, count, root) in enumerate(plan):
            if job.tuning and rk.rank == 0 and ver >= (2, 20, 0) and op == "AllReduce":
                _tuning_choice(ver, rk, t, op, count * DTYPES[dtype][1])
            peer = root if op not in ("Send", "Recv") else (rk.rank + 1) % nranks
            root_v = peer if op in ("Send", "Recv", "Broadcast") else 0
            rk.info(
                f"{op}: opCount {i:x} sendbuff 0x7f2a00000000 recvbuff 0x7f2a04000000 count {count} "
                f"datatype {dtype} op 0 root {root_v} comm {comm} [nranks={nranks}] stream 0x55aa00002000"
            )
            t.colls.append(
                {"host": rk.host, "pid": rk.pid, "comm": comm, "op_count": i, "op": NORM[op],
                 "nccl_op": op, "count": count, "datatype": dtype, "dtype": DTYPES[dtype][0],
                 "bytes": count * DTYPES[dtype][1], "root": root_v, "nranks": nranks,
                 "stream": "0x55aa00002000"}
            )  # fmt: skip


def _tuning_choice(ver: tuple, rk: _Rank, t: Truth, op: str, nbytes: int) -> None:
    if ver >= (2, 24, 3):
        rk.info(f"{op}: {nbytes} Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..1}}")
        row = {"func": op, "time_us": None, "channel_lo": 0, "channel_hi": 1}
    elif ver >= (2, 23, 0):
        rk.info(f"{op}: {nbytes} Bytes -> Algo 1 proto 2 time 41.250000")
        row = {"func": op, "time_us": 41.25, "channel_lo": None, "channel_hi": None}
    else:
        rk.info(f"{nbytes} Bytes -> Algo 1 proto 2 time 41.250000")
        row = {"func": None, "time_us": 41.25, "channel_lo": None, "channel_hi": None}
    t.tuning.append({"kind": "choice", "bytes": nbytes, "algo": "RING", "proto": "SIMPLE", **row})


def _warn_lines(job: Job, ver: tuple, rk: _Rank, t: Truth) -> None:
    """An IB completion error on the proxy thread and its unwind chain."""
    tid = rk.pid + 90
    rk.raw("", "foreign")
    stamp = "[2025-01-01 12:00:00] " if ver >= (2, 26, 2) else ""
    msg = (
        "NET/IB : Got completion from peer 192.0.2.12<43210> with status=12 opcode=0 len=0 "
        "vendor err 244 (Recv) localGid ::ffff:192.0.2.12 remoteGids ::ffff:192.0.2.11"
    )
    rk.raw(stamp + rk.prefix(tid, "transport/net_ib.cc:1300", "WARN") + msg, "recognised")
    ts = 1735732800 * 10**9 if stamp else None
    t.warnings.append(
        {"host": rk.host, "pid": rk.pid, "level": "WARN", "kind": "ib_completion",
         "src_file": "transport/net_ib.cc", "src_line": 1300, "ts": ts, "code": None}
    )  # fmt: skip
    for src, line in (("transport/net.cc", 1100), ("proxy.cc", 900)):
        rk.raw(rk.prefix(tid) + f"{src}:{line} -> 6 [Proxy Thread]", "recognised")
        t.warnings.append(
            {"host": rk.host, "pid": rk.pid, "level": "ERROR", "kind": "unwind",
             "src_file": src, "src_line": line, "ts": None, "code": 6}
        )  # fmt: skip


def _timeout_lines(job: Job, ranks: list[_Rank], t: Truth) -> None:
    """Rank `timeout_culprit` never enqueued SeqNum 1201; every other rank times out on it."""
    seq, culprit = 1201, job.timeout_culprit
    for rk in ranks:
        r = rk.rank
        head = f"[rank{r}]:[E1104 10:15:42.123456789 ProcessGroupNCCL.cpp:%d] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
        if r == culprit:
            rk.raw(
                head
                % 1399
                + "Received a dump signal due to a collective timeout from rank 0 and we "
                f"will try our best to dump the debug info. Last enqueued NCCL work: {seq - 1}, "
                f"last completed NCCL work: {seq - 1}.",
                "torch",
            )
            t.timeouts.append(
                {
                    "kind": "progress",
                    "rank": r,
                    "last_enqueued": seq - 1,
                    "last_completed": seq - 1,
                    "seq": None,
                }
            )
            continue
        rk.raw(
            head % 616 + f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            "OpType=ALLREDUCE, NumelIn=26214400, NumelOut=26214400, Timeout(ms)=600000) ran for "
            "600045 milliseconds before timing out.",
            "torch",
        )
        rk.raw(
            head
            % 1632
            + f"Exception (either an error or timeout) detected by watchdog at work: {seq}, "
            f"last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
            "torch",
        )
        rk.raw("terminate called after throwing an instance of 'c10::DistBackendError'", "foreign")
        rk.raw(
            f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {r}] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=26214400, "
            "NumelOut=26214400, Timeout(ms)=600000) ran for 600045 milliseconds before timing out.",
            "torch",
        )
        t.timeouts += [
            {"kind": "timeout", "rank": r, "seq": seq, "op_type": "ALLREDUCE", "numel_in": 26214400,
             "timeout_ms": 600000, "ran_ms": 600045, "last_enqueued": None},
            {"kind": "progress", "rank": r, "seq": seq, "last_enqueued": seq, "last_completed": seq - 1},
            {"kind": "crash", "rank": r, "seq": seq, "last_enqueued": None},
        ]  # fmt: skip
    t.culprits = [culprit]
    t.waiting = [r.rank for r in ranks if r.rank != culprit]


def _noise(rk: _Rank, rng: random.Random) -> None:
    """Foreign lines, one NCCL line of an unknown family, one damaged line."""
    at = rng.randrange(len(rk.lines) + 1)
    rk.lines.insert(at, (rk.prefix() + UNKNOWN_MSG, "unknown"))
    rk.lines.insert(
        rng.randrange(len(rk.lines) + 1),
        ("garbage NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "damaged"),
    )
    for text in FOREIGN:
        rk.lines.insert(rng.randrange(len(rk.lines) + 1), (text, "foreign"))


def _finish_truth(job: Job, ver: tuple, ranks: list[_Rank], t: Truth) -> None:
    """Which processes the parser can credit with the bare version line and a tag rank."""
    for rk in ranks:
        p = t.processes[(rk.host, rk.pid)]
        if p.pop("bare_version", None) and (job.launcher or len(ranks) == 1):
            p.update(nccl_version=job.version, cuda_version="12.4")
        p["tag_rank"] = rk.rank if job.launcher in ("rank", "srun", "mpi") else None


_TAGS = {
    "rank": "[rank{r}]:",
    "srun": "{r}: ",
    "mpi": "[1,{r}]<stdout>:",
    "torchrun": "[default{r}]:",
}


def _interleave(job: Job, ranks: list[_Rank], rng: random.Random, t: Truth) -> list[str]:
    """Merge the per-process streams at random (each keeps its order), add launcher tags,
    colours and timestamps, and count the lines by category."""
    queues = [list(r.lines) for r in ranks]
    out: list[str] = []
    while any(queues):
        q = rng.choice([q for q in queues if q])
        idx = queues.index(q)
        text, cat = q.pop(0)
        rk = ranks[idx]
        if job.info_timestamps and " NCCL INFO " in text and text.startswith(rk.host):
            text = f"[2025-01-01 12:00:{len(out) % 60:02d}.{len(out):06d}] " + text
        if job.launcher and text:
            tag = _TAGS[job.launcher].format(r=rk.rank)
            if not text.startswith(f"[rank{rk.rank}]:") or job.launcher != "rank":
                text = tag + text
        if cat != "foreign" and rng.random() < 0.05:
            text = f"\x1b[32m{text}\x1b[0m"
        out.append(text)
        t.lines["total"] += 1
        if cat == "foreign":
            continue
        t.lines["nccl"] += 1
        if cat in ("recognised", "torch"):
            t.lines["recognised"] += 1
        else:
            t.lines["unknown"] += 1
        t.lines["damaged"] += cat == "damaged"
        t.lines["torch"] += cat == "torch"
    return out
