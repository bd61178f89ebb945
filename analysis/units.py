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
