"""Facts read straight from Kineto trace files with plain `json`, for tests to compare with.

Nothing here imports the code under test: these are independent derivations by a different
method (Python loops over the raw events instead of the parser, the DuckDB schema and the SQL),
following the rules the docs state: a kernel whose name contains `nccl` is communication, every
other kernel compute, memcpy/memset memory; a GPU event belongs to the step whose host
`ProfilerStep#N` annotation contains its launching runtime call (its own start when the trace
has no runtime call with its correlation id); collective instances are
matched across ranks by their order.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

from nsys_synth import length, overlap, union

STEP = re.compile(r"^ProfilerStep#(\d+)$")
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}


def events(path: Path) -> list[dict]:
    """The trace's events."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def ns(us: float) -> int:
    """Kineto microseconds to integer nanoseconds."""
    return round(us * 1000)


def job_steps_ms(run: Path) -> dict[int, float]:
    """Per ProfilerStep#N of a run's rank files (`rank*.json.gz` in `run`), the slowest rank's
    host step (ms)."""
    out: dict[int, float] = {}
    for path in run.glob("rank*.json.gz"):
        for e in events(path):
            m = STEP.match(e.get("name", ""))
            if m and e.get("ph") == "X":
                out[int(m[1])] = max(out.get(int(m[1]), 0.0), e["dur"] / 1000)
    return out


def kind(e: dict) -> str | None:
    """comm, compute or memory for a device event; None for anything else."""
    if e.get("cat") == "kernel":
        return "comm" if "nccl" in e["name"].lower() else "compute"
    return "memory" if e.get("cat") in DEVICE else None


def gpu_steps(path: Path) -> dict[int, dict[str, float]]:
    """Per step of a GPU trace: window length (ns) and η. The window starts at the first device
    event launched inside the host step and ends at the next step's start (the last step: at
    the later of its host end and its last device event's end); activity is clipped to it."""
    ev = events(path)
    host = {
        int(m.group(1)): (ns(e["ts"]), ns(e["ts"] + e["dur"]))
        for e in ev
        if e.get("cat") == "user_annotation" and (m := STEP.match(e.get("name", "")))
    }
    launch = {
        e["args"]["correlation"]: ns(e["ts"])
        for e in ev
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    dev = [
        (ns(e["ts"]), ns(e["ts"] + e["dur"]), kind(e), e["args"].get("correlation"))
        for e in ev
        if e.get("cat") in DEVICE
    ]
    starts, natural_end = {}, {}
    for n, (hs, he) in host.items():
        mine = [(s, e) for s, e, _, c in dev if hs <= launch.get(c, s) < he]
        starts[n] = min((s for s, _ in mine), default=hs)
        natural_end[n] = max([he, *(e for _, e in mine)])
    order = sorted(host)
    out = {}
    for i, n in enumerate(order):
        lo = starts[n]
        hi = starts[order[i + 1]] if i + 1 < len(order) else natural_end[n]
        clipped = {
            k: union(
                [(max(s, lo), min(e, hi)) for s, e, kk, _ in dev if kk == k and s < hi and e > lo]
            )
            for k in ("compute", "comm")
        }
        comp, comm = length(clipped["compute"]), length(clipped["comm"])
        both = overlap(clipped["compute"], clipped["comm"])
        out[n] = {
            "step_ns": hi - lo,
            "eta": both / min(comp, comm) if min(comp, comm) else None,
            "compute_ns": comp,
            "comm_ns": comm,
            "both_ns": both,
        }
    return out


def arrivals(starts: dict[int, list[int]]) -> dict[int, dict[str, float]]:
    """Per rank, from each rank's collective start times (ns, one clock) matched by order:
    n_last (instances it arrived last at), wait_ns (sum of last arrival − own arrival) and
    excess_ns (median own arrival − instance median, minus the median of that over ranks)."""
    ranks = sorted(starts)
    n = min(len(v) for v in starts.values())
    out = {r: {"n_last": 0, "wait_ns": 0, "late": []} for r in ranks}
    for i in range(n):
        ts = {r: starts[r][i] for r in ranks}
        last = max(ts.values())
        mid = statistics.median(ts.values())
        out[max(r for r in ranks if ts[r] == last)]["n_last"] += 1
        for r in ranks:
            out[r]["wait_ns"] += last - ts[r]
            out[r]["late"].append(ts[r] - mid)
    lateness = {r: statistics.median(out[r].pop("late") or [0]) for r in ranks}
    mid = statistics.median(lateness.values())
    for r in ranks:
        out[r]["excess_ns"] = lateness[r] - mid
    return out


def collective_starts(path: Path, pattern: str, cat: str | None = None) -> list[int]:
    """Start times (ns) of the events (of category `cat` if given) whose name matches `pattern`
    (e.g. `^gloo:` for host collectives, `nccl` with cat `kernel` for NCCL kernels), in order."""
    rx = re.compile(pattern, re.IGNORECASE)
    return sorted(
        ns(e["ts"])
        for e in events(path)
        if e.get("ph") == "X" and cat in (None, e.get("cat")) and rx.search(e.get("name", ""))
    )


def idle_gaps(path: Path) -> dict[str, float]:
    """The gaps between a GPU trace's device events inside its step windows (from the first
    window's start to the last one's end, as `gpu_steps` makes them), and their part during
    which the event ending the gap had been launched already: gaps_ns, queued_ns, and lead_ns,
    the median of (start − launch) over device events launched before they start."""
    ev = events(path)
    host = sorted(
        (ns(e["ts"]), ns(e["ts"] + e["dur"]))
        for e in ev
        if e.get("cat") == "user_annotation" and STEP.match(e.get("name", ""))
    )
    launch = {
        e["args"]["correlation"]: ns(e["ts"])
        for e in ev
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    dev = [
        (ns(e["ts"]), ns(e["ts"] + e["dur"]), launch.get(e["args"].get("correlation")))
        for e in ev
        if e.get("cat") in DEVICE
    ]
    first = [s for s, _, t in dev if t is not None and host[0][0] <= t < host[0][1]]
    lo = min(first) if first else host[0][0]
    last = [e for _, e, t in dev if t is not None and host[-1][0] <= t < host[-1][1]]
    hi = max([host[-1][1], *last])
    gaps = queued = 0
    end = None
    for s, e, launched in sorted(dev, key=lambda d: (d[0], d[2] if d[2] is not None else d[0])):
        if end is not None and end < s:
            a, b = max(end, lo), min(s, hi)
            gaps += max(b - a, 0)
            queued += max(b - max(a, launched if launched is not None else s), 0)
        end = e if end is None else max(end, e)
    leads = [s - t for s, _, t in dev if t is not None and t < s]
    return {"gaps_ns": gaps, "queued_ns": queued, "lead_ns": statistics.median(leads)}
