"""Text taken from a file, made safe to show: the one sanitiser of every text output (the CLI's
text and CSV, the post-mortem, the Perfetto export, the dashboard).

A trace, log or dump may hold any characters, including those a terminal acts on: `ESC ]52;…`
writes the clipboard, `ESC ]0;…` sets the window title, `ESC [2J` clears the screen, `ESC [6n`
makes the terminal answer on its input, `ESC c` resets it, and the 8-bit C1 controls (`\\x9b`,
CSI) do the same in one byte. `visible` replaces every C0 and C1 control (newline and tab
excepted), DEL, and the invisible or direction-changing format characters with a visible escape
(`\\x1b`, `\\u202e`), so that the sequence that follows its introducer is plain text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: Characters that a terminal may act on (C0 and C1 controls but newline and tab, DEL, and the
#: invisible or direction-changing format characters).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
#: Longest line printed by default; longer lines (a 1 MB GPU name from a trace) are shortened.
MAX_LINE = 2000


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: str) -> str:
    """`text` with every control character shown as a visible escape (`\\x1b`); newlines and
    tabs kept."""
    return CONTROL.sub(_escape, text)


def shorten(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note of how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def printable(text: str, max_line: int | None = MAX_LINE) -> str:
    """`text` safe to print on a terminal: controls made visible (`visible`), lines over
    `max_line` characters shortened (None: kept whole)."""
    text = visible(text)
    if max_line is None or len(text) <= max_line:
        return text
    return "\n".join(shorten(line, max_line) for line in text.split("\n"))


def visible_column(values: pd.Series) -> pd.Series:
    """`visible` over a column (None, numbers and lists kept as they are); each distinct text
    is looked at once."""
    texts = {v for v in values if isinstance(v, str)}
    bad = {v: visible(v) for v in texts if CONTROL.search(v) is not None}
    if not bad:
        return values
    return values.map(lambda v: bad.get(v, v) if isinstance(v, str) else v)
