"""Units: every quantity parses to SI with the unit it says, and ambiguity is an error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commwall.analysis.model.units import (
    dtype_bytes,
    parse_bandwidth,
    parse_bytes,
    parse_count,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("400Gbps", 50e9),
        ("400 Gb/s", 50e9),
        ("400Gbit/s", 50e9),
        ("50GB/s", 50e9),
        ("900 GB/s", 900e9),
        ("50GBps", 50e9),
        ("1GiB/s", 2**30),
        ("100 MB/s", 1e8),
        ("200Gb/sec", 25e9),
    ],
)
def test_bandwidths(text, bytes_per_s):
    assert parse_bandwidth(text) == pytest.approx(bytes_per_s, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "n_bytes"),
    [
        ("25MiB", 25 * 1024 * 1024),
        ("14GB", 14e9),
        ("13.04GiB", 13.04 * 2**30),
        ("1.5 TB", 1.5e12),
        ("4096", 4096),
        ("4096B", 4096),
        ("8Kib", 1024),  # kibibits: 8 × 1024 bits = 1024 bytes
        ("400Gb", 50e9),  # bits, said so
        ("1 byte", 1),
    ],
)
def test_sizes(text, n_bytes):
    assert parse_bytes(text) == pytest.approx(n_bytes, rel=1e-12)


def test_gb_and_gib_are_not_mixed():
    # the online calculator's mistake: 14 GB is 13.04 GiB, not 13.04 GB
    assert parse_bytes("14GB") / parse_bytes("1GiB") == pytest.approx(13.0385, abs=1e-4)
    assert parse_bytes("14GB") != parse_bytes("14GiB")


@pytest.mark.parametrize("text", ["25M", "400G", "fast", "1 iB", "50GB/s"])
def test_ambiguous_or_wrong_sizes_are_rejected(text):
    with pytest.raises(ValueError):
        parse_bytes(text)


@pytest.mark.parametrize("text", ["400G", "50GB", "400", "400Gb/h"])
def test_bandwidth_needs_a_rate(text):
    with pytest.raises(ValueError):
        parse_bandwidth(text)


def test_numbers_pass_through_as_si():
    assert parse_bandwidth(50e9) == 50e9
    assert parse_bytes(1024) == 1024.0
    assert parse_duration(0.5) == 0.5


@pytest.mark.parametrize(
    ("text", "n"), [("7e9", 7e9), ("7B", 7e9), ("70M", 7e7), ("1.5T", 1.5e12), ("8", 8)]
)
def test_counts(text, n):
    assert parse_count(text) == n


@pytest.mark.parametrize(
    ("text", "s"), [("20us", 20e-6), ("20µs", 20e-6), ("3.5ms", 3.5e-3), ("1s", 1), ("500ns", 5e-7)]
)
def test_durations(text, s):
    assert parse_duration(text) == pytest.approx(s)


def test_duration_needs_a_unit():
    with pytest.raises(ValueError):
        parse_duration("20")


@pytest.mark.parametrize(
    ("dtype", "n"), [("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("BF16", 2), ("e4m3", 1)]
)
def test_dtypes(dtype, n):
    assert dtype_bytes(dtype) == n


def test_unknown_dtype():
    with pytest.raises(ValueError, match="unknown dtype"):
        dtype_bytes("fp12")


@given(st.floats(min_value=1e-3, max_value=1e6), st.sampled_from(["k", "M", "G", "T"]))
def test_prefixes_scale_exactly(x, prefix):
    dec = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[prefix]
    binary = {"k": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[prefix]
    text = repr(x)
    assert parse_bytes(f"{text}{prefix}B") == pytest.approx(x * dec, rel=1e-12)
    assert parse_bytes(f"{text}{prefix}iB") == pytest.approx(x * binary, rel=1e-12)
    assert parse_bandwidth(f"{text}{prefix}b/s") == pytest.approx(x * dec / 8, rel=1e-12)
