"""The maintenance checklist, evaluated against a run's report.

`evaluate(report)` is a pure function of the report dict: every item is marked `attention`,
`ok`, `not_observable` (not observable from these files) or `not_applicable` (cannot apply
to the run: NCCL items on a gloo run), with the evidence in words, the
dashboard page that shows it, and what to check or upload next. Sections a run lacks (no NCCL
log, no straggler analysis) make the items that need them `not_observable`, never an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from commwall.analysis.collectives.stragglers import late_not_compute
from commwall.analysis.hangs.stopped import HUNG_FIGURES, figures_hold_the_hang, stragglers_caveat
from commwall.analysis.model.step import mostly_waiting
from commwall.analysis.policy import INTERMITTENT_COST_SHARE, INTERMITTENT_SHARE
from commwall.analysis.report.checklist_base import (
    ATTENTION,
    HANG_ACTION,
    NOT_APPLICABLE,
    NOT_OBSERVABLE,
    OK,
    Item,
    _item,
    _nccl,
)
from commwall.analysis.report.checklist_network import (
    busbw,
    fabric_baseline,
    gdr,
    mtu,
    nccl_tests,
    nccl_versions,
    nccl_warnings,
    socket_transport,
)
from commwall.analysis.steps.verdict import EXPOSED_SHARE_LIMIT, not_the_network, wait_fraction

#: Items about NCCL or GPUs, and items about the network between hosts.
NCCL_GPU_ITEMS = ("nic_firmware", "hbm_errors", "socket_transport", "gdr", "nccl_versions",
                  "nccl_tests", "fabric_baseline", "nccl_warnings")  # fmt: skip
NETWORK_ITEMS = ("mtu", "fat_tree")


def nic_firmware(report: Mapping[str, Any]) -> Item:
    """NIC firmware / NCCL compatibility: firmware is never in traces or NCCL logs."""
    n = _nccl(report) or {}
    seen = []
    if n.get("versions"):
        seen.append(f"NCCL {', '.join(n['versions'])}")
    if n.get("nics"):
        seen.append(f"NICs {', '.join(sorted({str(x.get('device')) for x in n['nics']}))}")
    return _item(
        "nic_firmware",
        "Audit NIC firmware / NCCL compatibility",
        "nccl",
        NOT_OBSERVABLE,
        ("; ".join(seen) + " in the logs; " if seen else "")
        + "NIC firmware versions are not recorded in traces or NCCL logs.",
        "Compare `ibv_devinfo` / `mlxfwmanager --query` firmware with the NCCL and driver "
        "release notes on every node.",
    )


def stragglers(report: Mapping[str, Any]) -> Item:
    """Straggler nodes (often thermal throttling): attention only for a *compute* straggler (a
    slow device does more operator time for the same work); a rank late without extra work is
    not a slow device, and a CPU run gets no GPU advice."""
    title, page = "Straggler nodes (thermal throttling)", "stragglers"
    s = report.get("stragglers")
    if not isinstance(s, dict) or not s.get("ranks"):
        return _item(
            "stragglers",
            title,
            page,
            NOT_OBSERVABLE,
            "No straggler analysis: it needs collectives matched across at least two ranks.",
            "Upload one trace per rank (Kineto traces, or Nsight exports of every rank).",
        )
    ranks = {r.get("rank"): r for r in s["ranks"] if isinstance(r, dict)}
    flagged = [ranks[r] for r in s.get("flagged") or [] if r in ranks]
    if figures_hold_the_hang(report) and not any(r.get("kind") == "compute" for r in flagged):
        return _item(
            "stragglers",
            title,
            page,
            NOT_OBSERVABLE,
            f"{stragglers_caveat(report)} {s.get('verdict') or 'No rank was flagged.'}",
            _stopped_action(report),
        )

    def who(r: dict) -> str:
        return f"rank {r['rank']}" + (f" ({r['host']})" if r.get("host") else "")

    if not flagged:
        top = max(ranks.values(), key=lambda r: r.get("share_of_wait") or 0)
        if (top.get("share_of_wait") or 0) >= INTERMITTENT_SHARE and (
            top.get("cost_share") or 0
        ) >= INTERMITTENT_COST_SHARE:
            more = (top.get("compute_ratio") or 0) >= 1.1
            return _item(
                "stragglers",
                title,
                page,
                ATTENTION,
                f"No rank is late in every step, but {who(top)} causes "
                f"{100 * top['share_of_wait']:.0f}% of all the waiting "
                f"({100 * top['cost_share']:.0f}% of the ranks' time): an intermittent "
                "straggler"
                + (f", with {top['compute_ratio']:.2f}x the median operator work" if more else "")
                + f". {s.get('verdict') or ''}".rstrip(),
                "Look at the steps it is late in (Stragglers page): slow in some steps only is "
                "what throttling, a noisy neighbour or periodic work (checkpoints, logging, "
                "garbage collection) look like; on GPUs check clocks and temperature over time "
                "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE).",
            )
        return _item("stragglers", title, page, OK, s.get("verdict") or "No rank was flagged.")

    compute = [r for r in flagged if r.get("kind") == "compute"]
    unknown = [r for r in flagged if r.get("compute_ratio") is None]
    if not compute and unknown:
        return _item(
            "stragglers",
            title,
            page,
            NOT_OBSERVABLE,
            f"Straggler(s) {', '.join(who(r) for r in unknown)}: no operator time to compare "
            "with the other ranks', so a slow device cannot be told from a late one.",
            "Profile with steps marked (ProfilerStep) and operator or kernel activity recorded.",
        )
    if not compute:
        names = "; ".join(
            f"{who(r)} is "
            + late_not_compute(r.get("compute_ratio"), r.get("compute_ms"), r.get("delay_ms"))
            for r in flagged
        )
        return _item(
            "stragglers",
            title,
            page,
            ATTENTION,
            f"{'Stragglers' if len(flagged) > 1 else 'Straggler'} {names}: not mainly a slow "
            "device, so not thermal throttling, but late all the same.",
            "Look at that rank's host: its input pipeline, launch delays, other load, and "
            "work outside the profiled operators (the diagnosis says where its time goes).",
        )
    names = ", ".join(f"{who(r)} ({(r.get('compute_ratio') or 0):.2f}x)" for r in compute)
    gpu = (report.get("run_info") or {}).get("device_kind") == "gpu"
    hint = (
        "On those hosts check GPU clocks and temperature (nvidia-smi -q -d "
        "PERFORMANCE,TEMPERATURE: thermal or power slowdown) and compare with a healthy node."
        if gpu
        else "This is a CPU run: check the CPU frequency governor and other load on those hosts "
        "(top, turbostat), and whether the rank gets more data than the others."
    )
    return _item(
        "stragglers",
        title,
        page,
        ATTENTION,
        f"Compute straggler: {names} the median rank's operator time. "
        f"{s.get('verdict') or ''}".strip(),
        hint,
    )


def fat_tree(report: Mapping[str, Any]) -> Item:
    """Non-blocking fat-tree: needs pairwise bandwidth tests, not a training trace."""
    return _item(
        "fat_tree",
        "Non-blocking fat-tree verified by pairwise bandwidth tests (nccl-tests)",
        "collectives",
        NOT_OBSERVABLE,
        "A training run exercises only its own communication pattern; it cannot prove the "
        "fabric is non-blocking.",
        "Run nccl-tests (`all_reduce_perf -b 8 -e 8G -f 2`) between every pair of nodes and "
        "compare busbw with the link peak.",
    )


def log_rotation(report: Mapping[str, Any]) -> Item:
    """Log rotation during profiling: not in the files."""
    return _item(
        "log_rotation",
        "Rotate logs during profiling",
        "upload",
        NOT_OBSERVABLE,
        "Disk usage and log rotation are not recorded in traces or NCCL logs.",
        "Send profiler and NCCL_DEBUG output to rotated files with enough free disk.",
    )


def hbm_errors(report: Mapping[str, Any]) -> Item:
    """HBM error rates: ECC counters are not in traces."""
    return _item(
        "hbm_errors",
        "HBM error rates",
        "ranks",
        NOT_OBSERVABLE,
        "ECC / row-remapping counters are not recorded in traces or NCCL logs.",
        "Check `nvidia-smi -q -d ECC,ROW_REMAPPER` or DCGM health on every node.",
    )


def exposed_comm(report: Mapping[str, Any]) -> Item:
    """Exposed communication above a threshold share of the step."""
    title, page = "Exposed communication above the target", "overview"
    share = (report.get("summary") or {}).get("exposed_comm_share")
    if share is None:
        return _item(
            "exposed_comm",
            title,
            page,
            NOT_OBSERVABLE,
            "No communication activity on the ranks' timelines.",
            "Upload GPU traces with NCCL kernels (Kineto or Nsight).",
        )
    words = (
        f"Exposed communication is {100 * share:.1f}% of step time "
        f"(target {100 * EXPOSED_SHARE_LIMIT:.0f}%)."
    )
    if figures_hold_the_hang(report):
        return _item(
            "exposed_comm",
            title,
            page,
            NOT_OBSERVABLE,
            f"{words[:-1]}, but the job stopped: {HUNG_FIGURES}.",
            _stopped_action(report),
        )
    if share <= EXPOSED_SHARE_LIMIT:
        return _item("exposed_comm", title, page, OK, words)
    wait = wait_fraction(report.get("summary") or {})
    beyond = not_the_network(report)
    if mostly_waiting(wait):
        idle = beyond is not None and beyond["key"] != "straggler_fixed"
        return _item(
            "exposed_comm",
            title,
            page,
            ATTENTION,
            f"{words[:-1]}, {100 * wait:.0f}% of it waiting for late ranks"
            + (
                f"; the replay shows idle time sets the step: removing the idle gaps saves "
                f"{beyond['saving_ms']:.1f} ms per step, hiding all exposed communication "
                f"{beyond['comm_hidden_saving_ms']:.1f} ms."
                if idle and beyond
                else "."
            ),
            (
                "See the diagnosis: the ranks' timelines sit idle (host, input pipeline or "
                "launches), which makes them late"
                if idle
                else "See the Stragglers page and the diagnosis for who is late and why"
            )
            + ": more overlap, bandwidth or fewer bytes would not remove the waiting.",
        )
    if beyond is not None:
        late = beyond["key"] == "straggler_fixed"
        return _item(
            "exposed_comm",
            title,
            page,
            ATTENTION,
            f"{words[:-1]}, but the replay shows "
            + ("a late rank's pace" if late else "idle time")
            + f" sets the step: fixing it saves {beyond['saving_ms']:.1f} ms per step, hiding "
            f"all exposed communication {beyond['comm_hidden_saving_ms']:.1f} ms.",
            ("See the Stragglers page and the diagnosis" if late else "See the diagnosis")
            + ": more overlap, bandwidth or fewer bytes would save less than that.",
        )
    return _item(
        "exposed_comm",
        title,
        page,
        ATTENTION,
        words,
        "See the Model page: more overlap, gradient accumulation or fewer bytes.",
    )


def _stopped_action(report: Mapping[str, Any]) -> str:
    """What to read when the job stopped: the Hang page with Flight Recorder dumps, else the
    NCCL page's timeouts and how to find the rank that never arrived."""
    if (report.get("hang") or {}).get("present"):
        return HANG_ACTION
    return (
        "Read the timeouts on the NCCL page; Flight Recorder dumps of every rank "
        "(TORCH_FR_BUFFER_SIZE=2000) name the rank that never entered the collective."
    )


def hang(report: Mapping[str, Any]) -> Item:
    """A watchdog timeout or hang, as the run's Flight Recorder dumps explain it."""
    title, page = "Watchdog timeout or hang (Flight Recorder)", "hang"
    h = report.get("hang")
    if not isinstance(h, dict) or not h.get("present"):
        action = "Run with TORCH_FR_BUFFER_SIZE=2000 and ingest the dumps (one per rank)."
        return _item("hang", title, page, NOT_OBSERVABLE, "No Flight Recorder dumps.", action)
    groups = h.get("groups") or []
    if h.get("findings") or any(g.get("missing_dumps") for g in groups):
        return _item("hang", title, page, ATTENTION, h["verdict"], HANG_ACTION)
    return _item("hang", title, page, OK, h["verdict"])


#: The checklist in display order: a hang, the maintenance items, then those the data decides.
ITEMS: list[Callable[..., Item]] = [
    hang,  # a job that hung: the first thing to fix, before any figure of its steps
    nic_firmware,
    stragglers,
    mtu,
    fat_tree,
    log_rotation,
    hbm_errors,
    socket_transport,
    gdr,
    nccl_versions,
    busbw,
    nccl_tests,
    fabric_baseline,
    exposed_comm,
    nccl_warnings,
]


def evaluate(report: Mapping[str, Any], link_peak_gbps: float | None = None) -> list[Item]:
    """Every checklist item for `report`; `link_peak_gbps` enables the bus-bandwidth check.
    Items that cannot apply to the run (`not_applicable`) say why instead."""
    items = [busbw(report, link_peak_gbps) if f is busbw else f(report) for f in ITEMS]
    na = not_applicable(report)
    for it in items:
        if it["key"] in na and it["status"] != ATTENTION:
            it.update(status=NOT_APPLICABLE, evidence=na[it["key"]], action="")
    return ordered(items)


def not_applicable(report: Mapping[str, Any]) -> dict[str, str]:
    """The items that cannot apply to the run, each with why: NCCL and GPU items on a run whose
    traces are CPU traces over another backend (gloo) and that has no NCCL log; network items
    when the traces put every rank on one host and no NCCL log says otherwise."""
    info = report.get("run_info") or {}
    if _nccl(report) is not None or not info.get("n_ranks"):
        return {}
    out: dict[str, str] = {}
    backends = [str(b).lower() for b in info.get("backends") or []]
    if info.get("device_kind") == "cpu" and backends and not any("nccl" in b for b in backends):
        why = f"A CPU run over {', '.join(backends)}: no NCCL and no GPU to check."
        out |= dict.fromkeys(NCCL_GPU_ITEMS, why)
    hosts = info.get("hosts") or []
    if len(hosts) == 1 and info.get("n_ranks", 0) > 1:
        out |= dict.fromkeys(
            NETWORK_ITEMS, f"Every rank is on one host ({hosts[0]}): no network between them."
        )
    return out


#: How items are shown: those needing attention first, then ok, then the unobservable, then
#: those that cannot apply.
STATUS_ORDER = (ATTENTION, OK, NOT_OBSERVABLE, NOT_APPLICABLE)


def ordered(items: list[Item]) -> list[Item]:
    """`items` by STATUS_ORDER, keeping ITEMS' order within one status."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(items, key=lambda i: rank.get(i["status"], len(rank)))
