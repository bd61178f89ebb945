"""The NCCL log families that describe a process: versions, CUDA driver, environment, network.

Each `_f_<family>` method stores the line its grammar regex (grammar.<FAMILY>) matched: the
version lines fill the process's row; the bootstrap/socket interfaces, InfiniBand devices,
plugins, OFI provider, IB MTU and GPUDirect RDMA lines become nccl_network rows; `NCCL_*`
settings become nccl_env rows.
"""

from __future__ import annotations

import re
from typing import Any

from commwall.ingest.formats.nccl_log import grammar as g
from commwall.ingest.formats.nccl_log.state import ParserState, opt_int
from commwall.ingest.formats.nccl_log.tables import SCHEMAS


class NetworkLines(ParserState):
    """Message families of a process's versions, environment and network."""

    def _f_version(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        row = self.proc_rows[proc]
        row["nccl_version"], row["version_suffix"] = m.group("ver"), m.group("suffix") or None
        row["cuda_version"] = m.group("cuda")
        self.versions.add(m.group("ver"))

    def _f_rccl_version(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        row = self.proc_rows[proc]
        row["nccl_version"], row["version_suffix"] = m.group("ver"), m.group("suffix") or None
        self.versions.add(m.group("ver"))

    def _f_git_version(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self.proc_rows[proc]["git_version"] = f"{m.group('branch')} {m.group('sha')}"
        self._need((2, 29, 0))

    def _f_cuda_driver(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self.proc_rows[proc]["cuda_driver"] = int(m.group("v"))
        self._need((2, 13, 4))

    def _net(self, proc: int, kind: str, **cols: Any) -> None:
        names = SCHEMAS["nccl_network"].names
        cols.update(proc=proc, line_no=self.n, kind=kind)
        self.spools["nccl_network"].add(tuple(cols.get(c) for c in names))

    def _f_bootstrap(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        if not m.group("space"):
            self._need((2, 24, 0))
        for it in g.IFACE_ITEM.finditer(m.group("items")):
            self._net(
                proc, "bootstrap", idx=opt_int(it.group("idx")), device=it.group("dev"),
                address=it.group("addr"), port=int(it.group("port")),
            )  # fmt: skip

    def _f_ib_using(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        ro = "relaxed ordering" if m.group("ro") else None
        if ro:
            self._need((2, 12, 7))
        for it in g.IB_ITEM.finditer(m.group("devs")):
            self._net(
                proc, "ib", idx=int(it.group("idx")), device=it.group("dev"),
                port=int(it.group("port")), link=it.group("link"), detail=ro,
                address=f"{m.group('oobif')}:{m.group('oobip')}",
            )  # fmt: skip

    def _f_no_ib(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "no_ib", detail=m.group(0))

    def _f_socket_using(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        for it in g.IFACE_ITEM.finditer(m.group("items")):
            self._net(
                proc, "socket", idx=opt_int(it.group("idx")), device=it.group("dev"),
                address=it.group("addr"), port=int(it.group("port")),
            )  # fmt: skip

    def _f_socket_threads(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "socket_threads", idx=int(m.group("threads")), detail=m.group(0))

    def _f_network(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "network", device=m.group("net"))

    def _f_assigned_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 27, 0))
        self._net(proc, "plugin", device=m.group("name"), detail=m.group(0))

    def _f_net_plugin_named(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "network", device=m.group("name"), detail=m.group(0))

    def _f_net_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "plugin", detail=m.group(0))

    def _f_other_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "plugin", device=m.group("kind").lower(), detail=m.group(0))

    def _f_loaded_plugin(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "plugin", device=m.group("kind").lower(), detail=m.group(0))

    def _f_ofi(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        nics = g.OFI_NICS.search(m.group("rest"))
        provider = g.OFI_PROVIDER.search(m.group("rest"))
        self._net(
            proc, "ofi", idx=int(nics.group("n")) if nics else None,
            device=provider.group("p") if provider else None, detail=m.group(0),
        )  # fmt: skip

    def _f_ib_mtu(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        mtu = int(m.group("mtu"))
        if (proc, mtu) not in self.mtus:  # one row per process and MTU, not one per QP
            self.mtus.add((proc, mtu))
            self._net(
                proc, "ib_mtu", idx=mtu, device=f"IbDev {m.group('ibdev')}",
                port=int(m.group("port")), detail=m.group(0),
            )  # fmt: skip

    def _f_gdr(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._net(proc, "gdr", enabled=m.group("s").lower() == "enabled", detail=m.group(0))

    def _f_env(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self.spools["nccl_env"].add((proc, self.n, m.group("name"), m.group("value")))
