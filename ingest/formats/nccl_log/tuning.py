"""The NCCL log families of the tuning model: algorithm/protocol choices and tuning tables.

A choice line (`AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 12.5`, 2.20+) is one nccl_tuning
row; a tuning table is printed as header lines (algorithms, protocols, max threads: their
layout changed with 2.18) and then one line per function, each cell `latency/bandwidth`: the
headers are remembered per (process, device) and each cell of a row becomes one row.
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

from commwall.ingest.formats.nccl_log import grammar as g
from commwall.ingest.formats.nccl_log.state import ParserState, opt_int
from commwall.ingest.formats.nccl_log.tables import SCHEMAS

#: Cells of a tuning-table row read (2.29 prints 7 algorithms x 3 protocols = 21).
MAX_TUNING_CELLS = 64


class TuningLines(ParserState):
    """Message families of NCCL's tuning choices and tables."""

    def _tuning_row(self, proc: int, dev: int | None, **cols: Any) -> None:
        names = SCHEMAS["nccl_tuning"].names
        cols.update(proc=proc, line_no=self.n)
        self._attach((proc, dev), "nccl_tuning", [cols.get(c) for c in names])

    def _f_tuning_choice(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        algo, proto = m.group("algo"), m.group("proto")
        if m.group("lo") is not None:
            self._need((2, 24, 3))
        else:
            self._need((2, 23, 0) if m.group("func") else (2, 20, 0))
        self._tuning_row(
            proc, dev, kind="choice", func=m.group("func"), bytes=int(m.group("bytes")),
            algo=g.ALGOS[int(algo)] if algo.isdigit() and int(algo) < len(g.ALGOS) else algo,
            proto=g.PROTOS[int(proto)] if proto.isdigit() and int(proto) < 3 else proto,
            time_us=float(m.group("time")) if m.group("time") else None,
            channel_lo=opt_int(m.group("lo")), channel_hi=opt_int(m.group("hi")),
        )  # fmt: skip

    def _f_tuning_old_header(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        cols = [c.split("/") for c in m.group("cells").split("|") if "/" in c]
        self.tuning[(proc, dev)] = {"cols": [(a.strip(), p.strip()) for a, p in cols]}

    def _f_tuning_algos(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        algos = [c.strip() for c in m.group("cells").split("|") if c.strip()]
        self.tuning[(proc, dev)] = {"algos": algos, "cols": []}
        self._need((2, 18, 1))

    def _f_tuning_protos(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        state = self.tuning.setdefault((proc, dev), {"algos": []})
        protos = [c.strip() for c in m.group("cells").split("|") if c.strip()]
        algos = state.get("algos", [])
        state["cols"] = [(algos[i // 3], p) for i, p in enumerate(protos) if i // 3 < len(algos)]

    def _f_tuning_threads(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        state = self.tuning.setdefault((proc, dev), {"cols": []})
        state["threads"] = [int(c) for c in re.findall(r"-?\d+", m.group("cells"))]

    def _f_tuning_row(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        state = self.tuning.get((proc, dev), {})
        cols, threads = state.get("cols", []), state.get("threads", [])
        cells = g.TUNING_CELL.finditer(m.group("cells"))
        for i, (lat, bw) in enumerate(c.groups() for c in islice(cells, MAX_TUNING_CELLS)):
            algo, proto = cols[i] if i < len(cols) else (None, None)
            self._tuning_row(
                proc, dev, kind="table", func=m.group("func"),
                algo=g.ALGO_SPELLINGS.get(algo, algo.upper()) if algo else None,
                proto=proto.upper() if proto else None,
                latency_us=float(lat), bw_gbps=float(bw),
                max_threads=threads[i] if i < len(threads) else None,
            )  # fmt: skip

    def _f_tuning_matrix(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        self._need((2, 24, 0))
