"""WARN lines and NCCL's error-return chains (`file.cc:123 -> 2`).

A thread's run of `-> code` lines is one chain; its kind is decided when the thread logs
something else (`_moved` → `_settle`): `handled_unwind` when the next line is an ordinary INFO
of the thread and no WARN or other chain of the process came right before, `abort_unwind` when
it unwinds NCCL's own `abort called`, else `unwind`. WARN lines are classified by
grammar.WARN_KINDS. Both go to nccl_warnings.
"""

from __future__ import annotations

import re

from commwall.ingest.formats.nccl_log import grammar as g
from commwall.ingest.formats.nccl_log.prefix import NO_OUTER, outer
from commwall.ingest.formats.nccl_log.state import ParserState, opt_int

#: NCCL's note that a proxy thread's sockets are being torn down (its communicator is aborted:
#: at exit without destroy_process_group, or after a failure elsewhere); the error returns the
#: thread logs next unwind that abort (kind abort_unwind).
ABORT_CALLED = "socketProgressOpt: abort called"


class ProblemLines(ParserState):
    """WARN lines, error-return chains, and what each thread logged last."""

    def _moved(
        self, key: tuple[int, int], level: str, family: str | None, handled: bool, msg: str = ""
    ) -> None:
        """The thread `key` logged a line of `level` and `family` (None: not one this parser
        stores): end its error-return chain unless the line goes on with it (`_settle`;
        `handled`: the line is an INFO the thread logged on its own, understood or benign), and
        note what the thread and its process did last."""
        if self.late:
            return
        proc = key[0]
        if family != "unwind":
            self.aborting.discard(key)
            if msg.startswith(ABORT_CALLED):
                self.aborting.add(key)
            self._settle(key, handled=handled)
        if level == "WARN":
            self.proc_warn_n[proc] = self.n
        self.proc_last[proc] = family or "other"
        self.thread_n[key] = self.n
        self.after_unwind[key] = family == "unwind"

    def _f_unwind(self, m: re.Match[str], proc: int, dev: int | None, tid: int) -> None:
        key = (proc, tid)
        if not self.after_unwind.get(key):
            self.chains += 1
            # a chain that starts right after the thread's `abort called` unwinds the abort
            if key in self.aborting:
                self.abort_chain.add(key)
            else:
                self.abort_chain.discard(key)
        row = (
            proc, None, "ERROR", "unwind", m.group("file"), int(m.group("line")),
            int(m.group("code")), m.group("thread"), self.chains, tid, m.group(0),
        )  # fmt: skip
        if key in self.abort_chain:
            self._problem(*row[:3], "abort_unwind", *row[4:])
            return
        if key not in self.chain_rows:
            # warned: a WARN of the process on or since the thread's own previous line (that
            # line itself, or another thread's: the error goes on unwinding in the calling
            # thread), or another chain of the process right before this one (lines count from 1)
            warned = (
                self.proc_warn_n.get(proc, -1) >= self.thread_n.get(key, 0)
                or self.proc_last.get(proc) == "unwind"
            )
            self.chain_rows[key] = (warned, [])
        self.chain_rows[key][1].append((self.n, row))

    def _settle(self, key: tuple[int, int], handled: bool) -> None:
        """Store the thread's pending error-return chain (if any) now that it ended: kind
        `handled_unwind` when `handled` (the thread's next line is an INFO of its own) and
        neither a WARN nor another chain of the process came right before the chain, else
        `unwind`. NCCL reports a failure with a WARN and unwinds it up to the API call that
        fails; a lone `file:line -> code` between two ordinary INFO lines is a return its caller
        checked and went on from (RCCL's probe of the BIOS version after finding amdkfd's
        memory_peers: `net_ib.cc:708 -> 2`, then `Using network IB`)."""
        chain = self.chain_rows.pop(key, None)
        if chain is None:
            return
        warned, rows = chain
        kind = "handled_unwind" if handled and not warned else "unwind"
        keep = self.n
        for n, row in rows:
            self.n = n
            self._problem(*row[:3], kind, *row[4:])
        self.n = keep

    def _warn(self, m: re.Match[str], proc: int, outer_text: str) -> None:
        o = outer(outer_text) if outer_text.strip() else NO_OUTER
        if o.ts is not None:
            self._need((2, 26, 2))
        msg = m.group("msg") or ""
        kind = next((k for k, rx in g.WARN_KINDS if rx.search(msg)), "other")
        self._problem(
            proc, o.ts, "WARN", kind, m.group("src"), opt_int(m.group("srcline")), None, None,
            None, opt_int(m.group("tid")), msg,
        )  # fmt: skip
