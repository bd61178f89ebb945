"""Quantities with explicit units → SI floats (bytes, bytes/s, seconds, counts).

Decimal prefixes are powers of 10 (GB = 1e9 B), binary prefixes powers of 2 (GiB = 2^30 B); a
capital `B` is a byte, a lower-case `b` or `bit` a bit (400 Gb/s = 50 GB/s). Ambiguous text
(`25M`, `400G`) is rejected rather than guessed.
"""

from __future__ import annotations

import re

MiB, GiB = 2.0**20, 2.0**30

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"K": 2.0**10, "k": 2.0**10, "M": 2.0**20, "G": 2.0**30, "T": 2.0**40, "P": 2.0**50}
_QUANTITY = re.compile(
    r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*"
    r"(?P<prefix>[kKMGTP]?)(?P<bin>i?)"
    r"(?P<unit>bytes|byte|bits|bit|B|b)?"
    r"\s*(?P<rate>/\s*s|/\s*sec|ps)?\s*$"
)
_COUNT = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<suffix>[kKMBGT]?)\s*$")
_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_DURATION = re.compile(
    r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>ns|us|µs|μs|ms|s)\s*$"
)
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}

#: Bytes per element of the dtypes gradients and parameters travel in.
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8,
    "float64": 8,
    "double": 8,
    "fp32": 4,
    "float32": 4,
    "float": 4,
    "tf32": 4,  # stored in 32 bits
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "float8": 1,
    "e4m3": 1,
    "e5m2": 1,
    "int8": 1,
    "uint8": 1,
}


def _quantity(text: str, *, rate: bool) -> float:
    """Parse `text` as bytes (rate False) or bytes per second (rate True)."""
    m = _QUANTITY.match(text)
    if m is None:
        raise ValueError(f"cannot read {text!r} as a {'bandwidth' if rate else 'size'}")
    if bool(m["rate"]) != rate:
        want = "a rate such as '400Gb/s' or '50GB/s'" if rate else "a size such as '25MiB'"
        raise ValueError(f"{text!r}: expected {want}")
    unit, prefix = m["unit"], m["prefix"]
    if unit is None and (prefix or m["bin"] or rate):
        raise ValueError(f"{text!r}: say B (bytes) or b (bits), e.g. '{m['num']}{prefix}B'")
    if m["bin"] and not prefix:
        raise ValueError(f"{text!r}: binary marker 'i' needs a prefix (KiB, MiB, GiB)")
    scale = _BINARY[prefix] if m["bin"] else _PREFIX[prefix]
    bits = unit in ("b", "bit", "bits")
    return float(m["num"]) * scale / (8.0 if bits else 1.0)


def parse_bytes(value: str | float) -> float:
    """A size in bytes: `25MiB`, `14GB`, `1.5 TB`, `4096` (a bare number is bytes)."""
    return float(value) if isinstance(value, int | float) else _quantity(value, rate=False)


def parse_bandwidth(value: str | float) -> float:
    """A bandwidth in bytes/s: `400Gbps`, `400 Gb/s`, `50GB/s`, `900 GB/s`, `46.6GiB/s`.
    A number (not text) is taken as bytes/s."""
    return float(value) if isinstance(value, int | float) else _quantity(value, rate=True)


def parse_count(value: str | float) -> float:
    """A count such as a number of parameters: `7e9`, `7B`, `70M`, `1.5T` (B = billion)."""
    if isinstance(value, int | float):
        return float(value)
    m = _COUNT.match(value)
    if m is None:
        raise ValueError(f"cannot read {value!r} as a count (e.g. 7e9, 7B, 70M)")
    return float(m["num"]) * _COUNT_SUFFIX[m["suffix"]]


def parse_duration(value: str | float) -> float:
    """A duration in seconds: `20us`, `20µs`, `3.5ms`, `1s`, `500ns`. A number is seconds."""
    if isinstance(value, int | float):
        return float(value)
    m = _DURATION.match(value)
    if m is None:
        raise ValueError(f"cannot read {value!r} as a duration (e.g. 20us, 3.5ms)")
    return float(m["num"]) * _SECONDS[m["unit"]]


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of `dtype` (fp32 4, bf16/fp16 2, fp8 1, ...)."""
    try:
        return DTYPE_BYTES[dtype.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}") from None
