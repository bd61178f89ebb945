"""Lines without NCCL's prefix: PyTorch's, bare version lines, wrapped and damaged lines.

A PyTorch ProcessGroupNCCL line (torch_lines.classify) becomes an nccl_timeouts row or an
ERROR in nccl_warnings; a watchdog timeout a terminal cut in two is read from both lines; a
bare `NCCL version` line is kept until the end, when it is given to its only process; a line
with an NCCL level token but no readable prefix is counted damaged.
"""

from __future__ import annotations

from commwall.ingest.formats.nccl_log import grammar as g
from commwall.ingest.formats.nccl_log.chunk import LAST_ERROR
from commwall.ingest.formats.nccl_log.prefix import LEVEL_TOKEN, NO_OUTER, clean, outer
from commwall.ingest.formats.nccl_log.state import MAX_TEXT, ParserState, opt_int
from commwall.ingest.formats.nccl_log.tables import SCHEMAS
from commwall.ingest.formats.nccl_log.torch_lines import (
    OOM_MARK,
    TIMEOUT,
    TorchLine,
    classify,
    crash_of_error,
    last_error,
)


class UnprefixedLines(ParserState):
    """Lines of no NCCL prefix, and the PyTorch rows they make."""

    def _unprefixed(self, line: str, after: bytes) -> bool:
        t = classify(line)
        if t is not None and t.fields.get("rank_source") == "header":
            self._tag_header(line, t.fields["rank"])
        if t is None and LAST_ERROR in line:
            quoted = last_error(line, clean(after))
            if quoted is not None:  # not counted: neither an NCCL line nor a c10d one
                self._torch(quoted)
                return True
        v = g.BARE_VERSION.search(line) if t is None else None
        if v:
            self.bare.append((outer(line[: v.start()]), v))
            self.versions.add(v.group("ver"))
            self.count["nccl"] += 1
            self.count["recognised"] += 1
            return False
        joined = _unwrapped(line, after) if t is None or t.kind == "other" else None
        if joined is not None:  # two physical lines, one timeout
            self.count["nccl"] += 2
            self.count["torch"] += 2
            self.count["recognised"] += 2
            self._torch(joined)
            return True
        if t is not None and t.kind == "interrupt":  # the launcher's: neither NCCL's nor torch's
            self._torch(t)
            return False
        if t is not None and "NCCL" not in line:
            # a rank's fatal Python exception or out-of-memory: PyTorch's, not NCCL's (another
            # line read only for saying `out of memory` is none of this parser's business)
            if t.kind in ("crash", "oom") or OOM_MARK not in line:
                self.count["torch"] += 1
                self._torch(t)
            return False
        if t is not None:
            self.count["torch"] += 1
            self.count["nccl"] += 1
            if t.kind == "other":
                self._unknown(None, "torch", line)
                return False
            self._torch(t)
            crash = crash_of_error(line, t)
            if crash is not None:  # the rank died of it: a crash row as well as the error
                self._torch(crash)
            self.count["recognised"] += 1
        elif LEVEL_TOKEN.search(line):
            self.count["nccl"] += 1
            self.count["damaged"] += 1
            self._unknown(None, "damaged", line)
        return False

    def _tag_header(self, line: str, rank: int) -> None:
        """Note that the launcher tag in front of `line`'s `[rankN]:` header (`7: [rank7]:
        ...`), if any, carried PyTorch's rank `rank`."""
        at = line.find("[rank")
        o = outer(line[:at]) if at > 0 else NO_OUTER
        if o.tag_rank is not None and not (o.tag or "").startswith("[rank"):
            self.tag_headers.setdefault(o.tag_rank, set()).add(rank)

    def _torch(self, t: TorchLine) -> None:
        f = t.fields
        if t.kind == "error":
            where = f.get("where") or ""
            file, _, line = where.rpartition(":")
            kind = "test_failure" if "Test NCCL failure" in t.message else "torch_nccl_error"
            self._problem(
                None, None, "ERROR", kind, file or where, opt_int(line) if line.isdigit() else None,
                None, None, None, None, t.message,
            )  # fmt: skip
            if f.get("version"):
                self.versions.add(f["version"])
            return
        names = SCHEMAS["nccl_timeouts"].names
        f.update(line_no=self.n, kind=t.kind, message=t.message[:MAX_TEXT])
        self.spools["nccl_timeouts"].add(tuple(f.get(c) for c in names))


def _unwrapped(line: str, after: bytes) -> TorchLine | None:
    """A watchdog timeout cut in two by a terminal or a web page (`... operation time` +
    `out: WorkNCCL(SeqNum=92, ...`): the timeout read from `line` and the next line, or None.
    Tried for lines that are no PyTorch line, or one of no known kind (`[Rank 3] Watch`)."""
    if not after:
        return None
    rest = clean(after)
    for glue in ("", " "):
        joined = line + glue + rest
        m = TIMEOUT.search(joined)
        if m and m.start() < len(line) < m.end():  # the timeout spans the two lines
            return classify(joined)
    return None
