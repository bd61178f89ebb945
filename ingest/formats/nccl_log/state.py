"""What the NCCL log parser knows of the file so far, shared by its line families.

`ParserState` holds every per-file table being built (the spools), the processes (numbered in
the order their first line appears, with the fixes for prefixes glued to other output), the
communicators, and the attribution of topology rows: rings, trees, connections and channel
counts name no communicator, so they wait on their (process, device) for the one being
initialised there (`_attach`, `_resolve`). The mixins of the message families (init_lines,
net_lines, tuning, problems, unprefixed) build on it; parser.py drives them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from commwall.ingest.formats.nccl_log.prefix import Outer, outer
from commwall.ingest.formats.nccl_log.tables import SCHEMAS, Spool
from commwall.ingest.schema import TEXT_CUT

#: Topology rows a (process, device) may hold while waiting for its communicator to be named;
#: beyond, they are stored without one. A real init holds hundreds (rings of a 4,096-rank job:
#: one line per channel); a log of one repeated ring line and no init held them all in memory.
MAX_PENDING = 1 << 16
#: Characters of an unknown line kept.
MAX_TEXT = TEXT_CUT

TESTS = "nccl_test_results"
_COMM_COLS = list(SCHEMAS["nccl_communicators"].names)
_PROC_COLS = list(SCHEMAS["nccl_processes"].names)
Key = tuple[int, "int | None"]


def opt_int(v: str | None) -> int | None:
    """A regex group as an int; None when the group did not match."""
    return None if v is None else int(v)


class ParserState:
    """The parser's per-file state, and the processes, communicators and topology rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.spools = {
            name: Spool(schema)
            for name, schema in SCHEMAS.items()
            if name not in ("nccl_files", "nccl_processes", "nccl_communicators", TESTS)
        }
        self.n = 0
        self.count = dict(nccl=0, recognised=0, unknown=0, damaged=0, torch=0)
        # (host, pid) of NCCL's prefix; both None on a line whose prefix was cut off
        self.procs: dict[tuple[str | None, int | None], int] = {}
        self.hosts_of_pid: dict[int | None, list[tuple[str | None, int]]] = {}
        self.proc_rows: list[dict[str, Any]] = []
        self.comms: list[dict[str, Any]] = []
        self.comm_at: dict[tuple[int, str], int] = {}
        self.open: dict[Key, str] = {}
        self.last: dict[Key, str] = {}
        self.started: set[Key] = set()
        self.pending: dict[Key, list[tuple[str, Any]]] = {}
        self.tuning: dict[Key, dict[str, list]] = {}
        self.after_unwind: dict[tuple[int, int], bool] = {}
        #: threads whose last line was NCCL's `socketProgressOpt: abort called`, and the threads
        #: whose current error-return chain unwinds that abort
        self.aborting: set[tuple[int, int]] = set()
        self.mtus: set[tuple[int, int]] = set()  # (proc, IB MTU enum) stored
        self.abort_chain: set[tuple[int, int]] = set()
        #: per thread, the rows of its error-return chain not yet stored, and whether a WARN of
        #: the thread came right before the chain (kind decided when the chain ends: `_settle`)
        self.chain_rows: dict[tuple[int, int], tuple[bool, list[tuple]]] = {}
        #: per process, whether its last NCCL line was a chain's (an error goes on unwinding in
        #: the thread that called the one that failed), and the line of its last WARN; per
        #: thread, the line of its last NCCL line
        self.proc_last: dict[int, str] = {}
        self.proc_warn_n: dict[int, int] = {}
        self.thread_n: dict[tuple[int, int], int] = {}
        #: True while COLL lines the fast path rejected are read, after the lines that follow
        #: them (`_land`): they settle no chain and move no thread's state
        self.late = False
        self.chains = 0
        self.versions: set[str] = set()
        #: the `[rankN]:` headers of the PyTorch lines under each launcher tag's number
        self.tag_headers: dict[int, set[int]] = {}
        self.bare: list[tuple[Outer, re.Match[str]]] = []
        self.floor = (0, 0, 0)

    def _unknown(self, proc: int | None, kind: str, line: str) -> None:
        self.count["unknown"] += 1
        self.spools["nccl_unknown"].add((proc, self.n, kind, line[:MAX_TEXT]))

    def _need(self, version: tuple[int, int, int]) -> None:
        if version > self.floor:
            self.floor = version

    def _problem(self, *row: Any) -> None:
        self.spools["nccl_warnings"].add((row[0], self.n, *row[1:]))

    # ---- processes and communicators -------------------------------------------------------

    def _proc(self, m: re.Match[str], outer_text: str, count: bool = True) -> int:
        key = (m.group("host"), opt_int(m.group("pid")))
        p = self.procs.get(key)
        if p is None:
            p = self._glued(key)
        if p is None:
            p = self._unglued(key)
        if p is None:
            p = self.procs[key] = len(self.proc_rows)
            self.hosts_of_pid.setdefault(key[1], []).append((key[0], p))
            row = dict.fromkeys(_PROC_COLS)
            row.update(proc=p, host=key[0], pid=key[1], devices=[], first_line=self.n, n_lines=0)
            self.proc_rows.append(row)
        row = self.proc_rows[p]
        if count:
            row["n_lines"] += 1
        dev = m.group("dev")
        if dev is not None and int(dev) not in row["devices"]:
            row["devices"].append(int(dev))
        if row["launcher_tag"] is None and outer_text.strip():
            o = outer(outer_text)
            row["launcher_tag"], row["tag_rank"] = o.tag, o.tag_rank
        return p

    def _glued(self, key: tuple[str | None, int | None]) -> int | None:
        """The known process a line glued to other output names: same pid, and its host ends
        with the known host (`-1mew0` after `... 1/-1/-1` printed without a newline)."""
        host, pid = key
        if host is None:
            return None
        for known, p in self.hosts_of_pid.get(pid, ()):
            if known is not None and host.endswith(known) and host != known:
                self.procs[key] = p
                return p
        return None

    def _unglued(self, key: tuple[str | None, int | None]) -> int | None:
        """The known process whose first line was glued to other output (`sumoneflow-27`: an
        nccl-tests table row's `sum` before `oneflow-27:433602`), now seen with its own host
        name: same pid, and the known host ends with this one. It takes this host's name."""
        host, pid = key
        if host is None:
            return None
        known = self.hosts_of_pid.get(pid, [])
        for i, (glued, p) in enumerate(known):
            if glued is not None and glued.endswith(host) and glued != host:
                self.procs[key] = p
                self.proc_rows[p]["host"] = host
                known[i] = (host, p)
                return p
        return None

    def _comm(self, proc: int, comm: str, fresh: bool = False) -> dict[str, Any]:
        at = self.comm_at.get((proc, comm))
        if at is not None:
            row = self.comms[at]
            if not (fresh and row["status"] in ("Destroy COMPLETE", "Abort COMPLETE")):
                return row
        row = dict.fromkeys(_COMM_COLS)
        row.update(proc=proc, comm=comm, line_no=self.n, connected=[])
        self.comm_at[(proc, comm)] = len(self.comms)
        self.comms.append(row)
        return row

    def _attach(self, key: Key, table: str, row: list[Any] | dict[str, Any]) -> None:
        """Store a topology row (a list, comm at index 1) or apply a communicator update (a
        dict, table `@comm`)."""
        comm = self.open.get(key) or (self.last.get(key) if key in self.started else None)
        if comm is None:
            waiting = self.pending.setdefault(key, [])
            waiting.append((table, row))
            if len(waiting) >= MAX_PENDING:  # no communicator is coming: store them without
                self._resolve(key, None)
        else:
            self._place(key[0], comm, table, row)

    def _place(self, proc: int, comm: str | None, table: str, row: Any) -> None:
        if table != "@comm":
            row[1] = comm
            self.spools[table].add(tuple(row))
        elif comm is not None:
            c = self._comm(proc, comm)
            for k, v in row.items():
                if k == "connected":
                    c[k].append(v)
                else:
                    c[k] = v

    def _resolve(self, key: Key, comm: str | None) -> None:
        for table, row in self.pending.pop(key, []):
            self._place(key[0], comm, table, row)
