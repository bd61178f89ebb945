"""The NCCL log families of communicator init and topology.

`Init START`/`Init COMPLETE`/`Destroy`/`Abort` lines create and update communicators; the
ring orders, trees, connections (with the transport their `via` text names), CollNet, NVLS and
channel-count lines of an init become nccl_channels / nccl_connections rows or communicator
fields, attributed through `ParserState._attach` to the communicator being initialised on the
same (process, device).
"""

from __future__ import annotations

import re
from typing import Any

from commwall.ingest.formats.nccl_log import grammar as g
from commwall.ingest.formats.nccl_log.state import ParserState, opt_int


class InitLines(ParserState):
    """Message families of communicator init and topology."""

    def _f_comm(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        event = m.group("event")
        c = self._comm(proc, m.group("comm"), fresh=event in ("Init START", "Init COMPLETE"))
        for col, grp in (
            ("rank", "rank"), ("nranks", "nranks"), ("cuda_dev", "cudaDev"),
            ("nvml_dev", "nvmlDev"),
        ):  # fmt: skip
            c[col] = int(m.group(grp)) if m.group(grp) is not None else c[col]
        for col, grp in (("bus_id", "busId"), ("comm_id", "commId"), ("api", "func")):
            c[col] = m.group(grp) or c[col]
        c["parent"] = m.group("parent") or c["parent"]
        c["status"] = event or c["status"]
        self._comm_versions(m)
        key = (proc, dev)
        if event == "Init START":
            self._resolve(key, self.open.get(key))
            self.open[key] = self.last[key] = c["comm"]
            self.started.add(key)
        elif event == "Init COMPLETE":
            self._resolve(key, c["comm"])
            self.open.pop(key, None)
            self.last[key] = c["comm"]

    def _comm_versions(self, m: re.Match[str]) -> None:
        for grp, version in (
            ("grank", (2, 29, 0)), ("func", (2, 21, 0)), ("commId", (2, 16, 0)),
            ("parent", (2, 21, 0)),
        ):  # fmt: skip
            if m.group(grp):
                self._need(version)
        if m.group("event") == "Init START":
            self._need((2, 18, 0))
        elif m.group("event") in ("Destroy COMPLETE", "Abort COMPLETE"):
            self._need((2, 12, 0))

    def _f_comm_nodes(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        c = self._comm(proc, m.group("comm"))
        c["rank"] = c["rank"] if c["rank"] is not None else int(m.group("rank"))
        c["nranks"] = c["nranks"] if c["nranks"] is not None else int(m.group("nranks"))
        c["n_nodes"], c["local_ranks"] = int(m.group("nnodes")), int(m.group("lranks"))
        c["local_rank"], c["mnnvl"] = int(m.group("lrank")), m.group("mnnvl") != "0"
        self._need((2, 20, 3))

    def _f_init_timings(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 23, 0) if m.group("func") else (2, 22, 0))
        rank, nranks = int(m.group("rank")), int(m.group("nranks"))
        for c in reversed(self.comms):
            if c["proc"] == proc and c["rank"] == rank and c["nranks"] == nranks:
                c["init_seconds"] = float(m.group("total"))
                return
        self._attach((proc, dev), "@comm", {"init_seconds": float(m.group("total"))})

    def _f_ring_order(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        ranks = [int(r) for r in m.group("ranks").split()]
        row: list[Any] = [proc, None, self.n, "ring", int(m.group("ch")), opt_int(m.group("nch"))]
        row.append(ranks)
        row += [bool(m.group("trunc")), None, None, None]
        self._attach((proc, dev), "nccl_channels", row)

    def _f_trees(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        for e in g.TREE_ENTRY.finditer(m.group("entries")):
            body = e.group("body")
            t = g.TREE_DOWN_FIRST.match(body)
            if t:
                self._need((2, 5, 0) if t.group(6) else (2, 8, 0))
                *down, me, up = (int(x) for x in t.groups()[:5])
            elif t := g.TREE_UP_FIRST.match(body):
                up, me, *down = (int(x) for x in t.groups())
            else:
                continue
            row: list[Any] = [proc, None, self.n, "tree", int(e.group("ch")), None, None, None]
            row += [me, up]
            row.append([d for d in down if d >= 0])
            self._attach((proc, dev), "nccl_channels", row)

    def _f_connection(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        if m.group("conn") is not None:
            self._need((2, 12, 0))
        elif m.group("kw") == "Channel":
            self._need((2, 7, 0))
        src, dst, direction = int(m.group("src")), int(m.group("dst")), m.group("dir")
        via = m.group("via")
        transport, net, net_dev, proxy, gdr, shared = _transport(via)
        if transport == "P2P/CUMEM":
            self._need((2, 18, 1))
        row: list[Any] = [proc, None, self.n, int(m.group("ch")), opt_int(m.group("conn")), src]
        row += [
            dst,
            m.group("srcid"),
            m.group("dstid"),
            direction,
            src if direction == "receive" else dst,
        ]
        row += [via, transport, net, net_dev, proxy, gdr, shared]
        self._attach((proc, dev), "nccl_connections", row)

    def _f_collnet(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        via = m.group(0).split(" via ", 1)[1]
        row: list[Any] = [proc, None, self.n, int(m.group("ch")), opt_int(m.group("conn"))]
        row += [int(m.group("rank")), None, None, None, m.group("dir"), None, via]
        row += [f"COLLNET/{m.group('name')}", m.group("name"), int(m.group("dev")), None]
        row.append(bool(m.group("gdr")))
        row.append(bool(m.group("shared")))
        self._attach((proc, dev), "nccl_connections", row)

    def _f_nvls_support(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 17, 1))
        self._attach((proc, dev), "@comm", {"nvls_support": not m.group("no")})

    def _f_nvls_comm(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 18, 1))
        self._comm(proc, m.group("comm"))["nvls_heads"] = int(m.group("nheads"))

    def _f_connected(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 8, 3))
        what = m.group("what") or m.group("nvls") or m.group("collnet")
        update: dict[str, Any] = {"connected": what}
        if m.group("pxn") is not None:
            self._need((2, 24, 0))
            update.update(ring_pxn=int(m.group("pxn")), ring_gdr=int(m.group("gdr")))
        self._attach((proc, dev), "@comm", update)

    def _f_channel_counts(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        update = {f"{k}_channels": opt_int(m.group(k)) for k in ("coll", "collnet", "nvls", "p2p")}
        self._attach((proc, dev), "@comm", update)


def _transport(via: str) -> tuple[str, str | None, int | None, int | None, bool | None, bool]:
    """(transport, net, net_dev, proxy_rank, gdr, shared) of a connection's `via` text."""
    m = g.VIA_NET.match(via)
    if m:
        net = m.group("net")
        return (
            f"NET/{net}", net, int(m.group("dev")), opt_int(m.group("proxy")),
            bool(m.group("gdr")), bool(m.group("shared")),
        )  # fmt: skip
    m = g.VIA_P2P.match(via)
    if m:
        kind = "direct" if m.group("kind") == "direct pointer" else m.group("kind")
        return f"P2P/{kind}", None, None, None, None, "/Shared" in via
    if g.VIA_SHM.match(via):
        return "SHM", None, None, None, None, False
    return via.split("/", 1)[0], None, None, None, None, False
