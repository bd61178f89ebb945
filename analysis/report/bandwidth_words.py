"""What the transfer delivered, in the diagnosis's words: the measured bus bandwidth of the
run's busiest ops beside the link's peak and the fitted β, and on CPU traces the caveat that
the ranks' own threads run the collectives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def bandwidth_sentence(report: Mapping[str, Any]) -> str:
    """The bandwidth measured, against the link's peak and the fitted β, in a sentence."""
    ops = (report.get("collectives") or {}).get("ops") or []
    model = report.get("model") or {}
    measured = model.get("measured") or {}
    parts: list[str] = []
    for o in ops[:3]:
        if o.get("busbw_GBps_median") is not None:
            n = o.get("n_bandwidth", o["count"])
            calls = f"{n} calls" if n == o["count"] else f"{n} of {o['count']} calls"
            parts.append(
                f"{o['op']} {o['busbw_GBps_median']:.3g} GB/s median bus bandwidth "
                f"({calls}, median {_fmt_bytes(o.get('bytes_median'))})"
            )
    peak = measured.get("peak_busbw_GBps")
    link = measured.get("link")
    txt = "Measured: " + "; ".join(parts) if parts else "No bus bandwidth could be measured"
    if peak and measured.get("busbw_GBps"):
        txt += f"; {100 * measured['busbw_GBps'] / peak:.0f}% of the {link} peak ({peak:.0f} GB/s)"
    fit = model.get("fit") or {}
    if fit.get("beta_GBps") and str(fit.get("status", "")).startswith("calibrated"):
        txt += f"; fitted β = {fit['beta_GBps']:.3g} GB/s"
    return txt + "." + _cpu_transfer_caveat(report.get("run_info") or {})


def _cpu_transfer_caveat(info: Mapping[str, Any]) -> str:
    """On CPU traces the collectives are run by CPU threads of the ranks themselves: a slow
    transfer can be ranks competing for cores rather than the network."""
    if info.get("device_kind") != "cpu":
        return ""
    hosts, n = info.get("hosts") or [], info.get("n_ranks") or 0
    where = f" ({n} ranks on {len(hosts)} host{'s' if len(hosts) > 1 else ''})" if hosts else ""
    return (
        f" These are CPU traces{where}: their collectives run on CPU threads beside the "
        "ranks' compute, so a slow transfer can be ranks competing for cores as much as the "
        "network; give each rank cores of its own before paying for bandwidth."
    )


def _fmt_bytes(b: Any) -> str:
    if b is None:
        return "size unknown"
    b = float(b)
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1000 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1000
    return f"{b:.1f} GB"
