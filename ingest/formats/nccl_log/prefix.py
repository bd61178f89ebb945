"""The prefixes of an NCCL log line: NCCL's own (host:pid:tid [dev] ... NCCL LEVEL) and the
outer one a launcher or log shipper put in front of it (nccl_logs.md §1–2)."""

from __future__ import annotations

import re
from calendar import timegm
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: NCCL's core prefix, matched where `core` finds it; what lies left of it is the outer prefix.
CORE = re.compile(
    r"(?P<host>[A-Za-z0-9_.<>-]+):(?P<pid>\d+):(?P<tid>\d+) (?:\[(?P<dev>\d+)\] )?"
    r"(?:(?P<tracets>\d+\.\d+) )?(?:(?P<src>[\w./+-]+):(?P<srcline>\d+) )?"
    r"(?:(?P<func>\w+), \d+ )?(?:NCCL )?(?P<level>INFO|WARN|TRACE|CALL)(?: (?P<msg>.*))?$"
)

#: Where a core prefix may start: right after `host` comes `:pid:tid `.
_ANCHOR = re.compile(r":\d+:\d+ ")
_HOST_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.<>-")
#: Longest host name read (a DNS name has at most 253 characters).
MAX_HOST = 255
#: Characters of the outer prefix looked at (launcher tags and timestamps sit next to the core).
MAX_OUTER = 512


def core(line: str) -> re.Match[str] | None:
    """The leftmost core prefix of `line` (what `CORE.search` would find, host names capped at
    MAX_HOST characters) in time linear in the line: each `:pid:tid ` anchor is tried once,
    with the host read backwards from it, instead of a search from every position."""
    for a in _ANCHOR.finditer(line):
        start = a.start()
        floor = max(0, start - MAX_HOST)
        while start > floor and line[start - 1] in _HOST_CHARS:
            start -= 1
        if start == a.start() or (start == floor and start and line[start - 1] in _HOST_CHARS):
            continue
        m = CORE.match(line, start)
        if m:
            return m
    return None


#: An NCCL line whose `host:pid:tid` was cut off by a log shipper or by hand (`[0] NCCL INFO
#: 4096 Bytes -> Algo ...`), at most a launcher tag in front: read as a line of an unnamed
#: process (the groups CORE has but this line lacks never match, so they read as None).
STRIPPED = re.compile(
    r"^(?:\[rank\d+\]: ?|\s*\d+: |\[\d+,\d+\]<std(?:out|err)>: ?)?"
    r"(?P<host>(?!x)x)?(?P<pid>(?!x)x)?(?P<tid>(?!x)x)?(?P<tracets>(?!x)x)?(?P<src>(?!x)x)?"
    r"(?P<srcline>(?!x)x)?(?P<func>(?!x)x)?"
    r"(?:\[(?P<dev>\d+)\] )?NCCL (?P<level>INFO|WARN|TRACE)(?: (?P<msg>.*))?$"
)

#: A level token with no parseable prefix in front of it: a damaged NCCL line.
LEVEL_TOKEN = re.compile(r"NCCL (?:INFO|WARN|TRACE|CALL)\b")

#: NCCL >= 2.26 `NCCL_DEBUG_TIMESTAMP_FORMAT` default `[%F %T] ` (optionally sub-seconds).
TIMESTAMP = re.compile(r"\[(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?\]\s*$")

#: Launcher tags that name a global rank: PyTorch `[rank3]:`, srun `--label` `3: `,
#: OpenMPI `--tag-output` `[1,3]<stdout>:`, plain `[3] `.
_RANK_TAGS = (
    re.compile(r"\[rank(\d+)\]:\s*$"),
    re.compile(r"(?:^|\s)(\d+):\s*$"),
    re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:\s*$"),
    re.compile(r"(?:^|\s)\[(\d+)\]\s*$"),
)
#: Any other bracketed, parenthesised or colon-ended tag (torchrun `[default0]:` is a
#: *local* rank; Ray prints `(RayTrainWorker pid=4100, ip=192.0.2.11)`).
_OTHER_TAG = re.compile(r"(\[[^\]]*\]:?|\([^)]*\)|\S+:)\s*$")


@dataclass(frozen=True)
class Outer:
    """What the outer prefix says: the launcher tag, the rank it names, a timestamp (epoch ns,
    the host's wall clock read as UTC) and its text."""

    tag: str | None
    tag_rank: int | None
    ts: int | None
    time_text: str | None


NO_OUTER = Outer(None, None, None, None)


def clean(raw: bytes) -> str:
    """A physical line as text: UTF-8 (bad bytes replaced), colours and trailing blanks
    (including a Windows `\\r`) removed."""
    line = raw.decode("utf-8", "replace").rstrip()
    return ANSI.sub("", line) if "\x1b" in line else line


def outer(text: str) -> Outer:
    """Parse the text left of NCCL's core prefix."""
    if not text.strip():
        return NO_OUTER
    text = text[-MAX_OUTER:]
    ts = time_text = None
    m = TIMESTAMP.search(text)
    if m:
        time_text = m.group(0).strip()
        ts = _epoch_ns(m)
        text = text[: m.start()]
        if not text.strip():
            return Outer(None, None, ts, time_text)
    for rx in _RANK_TAGS:
        r = rx.search(text)
        if r:
            return Outer(r.group(0).strip(), int(r.group(1)), ts, time_text)
    o = _OTHER_TAG.search(text)
    return Outer(o.group(1) if o else None, None, ts, time_text)


def _epoch_ns(m: re.Match[str]) -> int | None:
    """The timestamp in epoch ns; None (the time unknown, the line kept) where a field is out
    of range or the time falls outside the store's 1970-2200 (year 0 is legal text)."""
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    ok_date = 1970 <= y < 2200 and 1 <= mo <= 12 and 1 <= d <= 31
    if not (ok_date and h < 24 and mi < 60 and s < 61):
        return None
    frac = (m.group(7) or "").ljust(9, "0")
    return timegm((y, mo, d, h, mi, s)) * 1_000_000_000 + int(frac)
