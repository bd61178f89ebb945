"""nccl-tests result tables in a log (`all_reduce_perf` and its siblings print them to the same
stdout as NCCL_DEBUG): one row per message size, with the time and the algorithm and bus
bandwidths of the out-of-place and in-place runs.

Logs in the wild interleave the table with NCCL's own lines, because nccl-tests prints a row in
pieces (size, count, type, redop, root; then the out-of-place figures; then the in-place ones)
and NCCL's lines come in between: a piece may start a line of its own, or start a line that an
NCCL line is glued to (`      -1mew0:65704:65704 [1] NCCL INFO ...`). So a row is read as a
stream of pieces at the starts of lines, inside a table (from its header line to its `Out of
bounds` / `Avg bus bandwidth` lines). Which lines may hold a piece is decided on the whole
chunk at once (`CANDIDATE`); only those become Python strings.
"""

from __future__ import annotations

import re
from typing import Any

#: Lines worth a look, all told from their first characters (an anchored expression costs a
#: tenth of one that searches every line): comment lines of nccl-tests (headers, devices,
#: summary; some builds print them behind the source line, `run(), common.cu:1174, # Out of
#: bounds values : 0 OK`), a command line starting with the test (`./build/all_gather_perf -b 8`;
#: one that starts with its launcher, `mpirun ... all_gather_perf`, is not looked at: the banner
#: `# Collective test starting: all_gather_perf` names the test too), and lines starting with a
#: number after blanks (pieces of rows).
CANDIDATE = (
    r"^(?:\[rank[0-9]+\]: ?|[ \t]*[0-9]+: |\[[0-9]+,[0-9]+\]<std(?:out|err)>: ?)?"
    r"(?:[ \t]*#|[ \t]+-?[0-9]|[A-Za-z_]+\(\), [A-Za-z_.]+:[0-9]+, #|[ \t>$]*[^ \t]*_perf\b)"
)
#: A launcher's tag in front of every line (srun `--label` `0: `, OpenMPI `--tag-output`
#: `[1,0]<stdout>:`, PyTorch `[rank0]:`), taken off before the line is read.
_TAG = re.compile(r"^(?:\[rank\d+\]: ?|[ \t]*\d+: |\[\d+,\d+\]<std(?:out|err)>: ?)")
_HEADER = re.compile(
    r"^#\s+size\s+count\s+type\s+(?P<redop>redop\s+)?(?P<root>root\s+)?time\s+algbw\s+busbw\s+"
    r"(?P<check>#wrong|error)"
)
#: Lines that start a test's header (the device list follows; some builds omit `Using devices`).
_USING = re.compile(r"^#\s+(?:Using devices|nThread\s)")
_OOB = re.compile(r"# Out of bounds values\s*:\s*(?P<n>\d+)")
_AVG = re.compile(r"# Avg bus bandwidth\s*:\s*(?P<bw>[0-9.]+(?:[eE][+-]?\d+)?)")
_REDOPS = "premulsum|mulsum|sum|prod|max|min|avg|none"
_INT = r"\d{1,19}"
#: A number nccl-tests prints in the figures: a time (µs), a bandwidth (GB/s), a #wrong count
#: or an error (`2e-07`), or `N/A` when the data was not checked.
_FIGURE = re.compile(r"\s+(?P<v>N/A|[0-9]+(?:\.[0-9]+)?(?:e[+-][0-9]+)?)")
FIGURES = 8  # time, algbw, busbw, #wrong: out-of-place, then in-place
#: Distinct hosts counted per table: a crafted file listing more device lines on more hosts
#: stops growing the set here (a table's `n_nodes` saturates at this count).
MAX_HOSTS = 65536


class TestTables:
    """Feed it the candidate lines in file order (`line`); `rows` are the rows read."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.test: str | None = None
        self.ranks = 0
        self.gpu: str | None = None
        self.hosts: set[str] = set()  # hosts after `on` in the device lines before the table
        self.table = 0  # tables seen so far; the current one's number while `head` is set
        self.check: str | None = None
        self.head: re.Pattern[str] | None = None
        self.row: dict[str, Any] | None = None
        self.figures: list[float | None] = []

    def line(self, line_no: int, text: str) -> None:
        """Read one candidate line."""
        if (tag := _TAG.match(text)) is not None:
            text = text[tag.end() :]
        if self.head is not None and self._piece(line_no, text):
            return
        comment = text[text.find("#") :] if "#" in text else ""
        if m := _OOB.match(comment):
            self._close(wrong_values=int(m["n"]))
        elif m := _AVG.match(comment):
            self._close(avg_busbw=float(m["bw"]))
        elif m := _HEADER.match(comment):
            self._end_row()
            self.table += 1
            self.check = m["check"].lstrip("#")
            # columns a header names that some tests leave blank (old alltoall_perf: `redop`)
            redop = rf"(?:\s+(?P<redop>{_REDOPS}))?" if m["redop"] else ""
            root = r"\s+(?P<root>-?\d{1,9})" if m["root"] else ""
            self.head = re.compile(
                rf"^\s*(?P<size>{_INT})\s+(?P<count>{_INT})\s+(?P<type>[a-z][a-z0-9_]*){redop}{root}"
            )
        elif _USING.match(comment):
            self.ranks, self.gpu, self.hosts = 0, None, set()
        elif (gpu := _device_gpu(comment)) is not None:
            self.ranks += 1
            self.gpu = self.gpu or gpu or None
            host = _device_host(comment)
            if host and len(self.hosts) < MAX_HOSTS:
                self.hosts.add(host)
        elif self.head is None and "concluded" not in text and (name := _test_name(text)):
            self.test = name

    def _piece(self, line_no: int, text: str) -> bool:
        """A row's head or figures at the start of `text`; False when the line has neither."""
        assert self.head is not None
        m = self.head.match(text)
        at = 0
        if m:
            self._end_row()
            self.row = {
                "table_no": self.table, "line_no": line_no, "test": self.test,
                "n_ranks": self.ranks or None, "n_nodes": len(self.hosts) or None,
                "gpu": self.gpu, "size_bytes": int(m["size"]),
                "count": int(m["count"]), "dtype": m["type"], "redop": m.groupdict().get("redop"),
                "root": int(m["root"]) if m.groupdict().get("root") else None,
                "check_kind": self.check,
            }  # fmt: skip
            self.figures = []
            at = m.end()
        found = False
        while self.row is not None and len(self.figures) < FIGURES:
            f = _FIGURE.match(text, at)
            if f is None:
                break
            self.figures.append(None if f["v"] == "N/A" else float(f["v"]))
            at, found = f.end(), True
        if self.row is not None and len(self.figures) == FIGURES:
            self._end_row()
        return bool(m) or found

    def _end_row(self) -> None:
        """Store the row being read (figures it never got are null)."""
        if self.row is None:
            return
        f = self.figures + [None] * (FIGURES - len(self.figures))
        names = ("time_us", "algbw_gbs", "busbw_gbs", "wrong")
        self.row.update({f"oop_{k}": v for k, v in zip(names, f[:4], strict=True)})
        self.row.update({f"ip_{k}": v for k, v in zip(names, f[4:], strict=True)})
        self.rows.append(self.row)
        self.row, self.figures = None, []

    def finish(self) -> None:
        """The log has ended: store a row still being read."""
        self._end_row()

    def _close(self, **summary: Any) -> None:
        """A table's summary line: its rows get it; the table ends at the last one."""
        self._end_row()
        for r in self.rows:
            if r["table_no"] == self.table:
                r.update(summary)
        if "avg_busbw" in summary:
            self.head, self.test, self.ranks, self.gpu = None, None, 0, None
            self.hosts = set()


# Device lines and test names are read with string operations: a regular expression with two
# open-ended parts (`.+?\s*$`) backtracks quadratically on a crafted 4 KB line.


def _device_gpu(comment: str) -> str | None:
    """The GPU of a `#  Rank  3 Group  0 Pid  64904 on  mew0 device  1 [0000:65:00] NVIDIA A100
    80GB PCIe` line (text after the bracket following `device`; "" when none), or None when the
    line is no device line."""
    words = comment.split(maxsplit=3)
    if len(words) < 3 or words[0] != "#" or words[1] != "Rank" or not words[2].isdigit():
        return None
    at = comment.find(" device ")
    close = comment.find("]", at) if at >= 0 else -1
    return None if close < 0 else comment[close + 1 :].strip()


def _device_host(comment: str) -> str | None:
    """The host of a device line: the word after ` on ` (`mew0` in `... Pid  64904 on  mew0
    device  1 ...`), or None when the line names none."""
    at = comment.find(" on ")
    if at < 0:
        return None
    words = comment[at + 4 : at + 4 + 300].split(maxsplit=1)
    return words[0] if words and words[0] != "device" else None


def _test_name(text: str) -> str | None:
    """`all_reduce` of the first `all_reduce_perf` in `text` (a word of lowercase letters and
    underscores ending in `_perf`), or None."""
    at = text.find("_perf")
    while at >= 0:
        end = at + len("_perf")
        if end == len(text) or not (text[end].isalnum() or text[end] == "_"):
            start = at
            while start > 0 and (text[start - 1] in _NAME_CHARS):
                start -= 1
            name = text[start:at]
            if name[:1].isalpha() and (start == 0 or not text[start - 1].isalnum()):
                return name
            return None  # one candidate per line: a later one would walk the same run again
        at = text.find("_perf", end)
    return None


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_")
