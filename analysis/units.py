"""Time units, in one place. The store holds int64 nanoseconds; the report and the pages show
milliseconds (durations) and microseconds (latencies); the model works in seconds. Convert with
these constants and helpers, never with a bare `1e6` or `1e9`."""

from __future__ import annotations

NS_PER_US = 1e3
NS_PER_MS = 1e6
NS_PER_S = 1e9


def ns_to_ms(ns: float | None) -> float | None:
    """Nanoseconds to milliseconds; None stays None."""
    return None if ns is None else ns / NS_PER_MS


def ns_to_s(ns: float | None) -> float | None:
    """Nanoseconds to seconds; None stays None."""
    return None if ns is None else ns / NS_PER_S


def size_text(b: float | None) -> str:
    """A message size with binary prefixes, as nccl-tests sizes are chosen (8 B, 64 MiB, 1 GiB);
    three significant digits when not a whole number of the unit."""
    if b is None:
        return "size unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(b) < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if b == int(b) else f"{b:.3g} {unit}"
        b /= 1024
    return f"{b:.3g} GiB"  # unreachable: the loop returns at GiB


def ms_text(v: float | None) -> str:
    """A duration in milliseconds to 3 significant figures: '77.7 ms', '5.86 ms', '0.203 ms',
    '19.0 ms', '3,058 ms'; 'n/a' when unknown."""
    if v is None:
        return "n/a"
    return f"{v:#.3g}".rstrip(".") + " ms" if abs(v) < 1000 else f"{v:,.0f} ms"
