"""The maintenance checklist, evaluated against a run's report.

`evaluate(report)` is a pure function of the report dict: every item is marked `attention`,
`ok`, `not_observable` (not observable from these files) or `not_applicable` (cannot apply
to the run: NCCL items on a gloo run), with the evidence in words, the
dashboard page that shows it, and what to check or upload next. Sections a run lacks (no NCCL
log, no straggler analysis) make the items that need them `not_observable`, never an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from commwall.analysis import units
from commwall.analysis.collectives.stragglers import late_not_compute
from commwall.analysis.hangs.stopped import HUNG_FIGURES, figures_hold_the_hang, stragglers_caveat
from commwall.analysis.model.step import mostly_waiting
from commwall.analysis.nccl.section import gdr_off_matters, test_name
from commwall.analysis.policy import INTERMITTENT_COST_SHARE, INTERMITTENT_SHARE
from commwall.analysis.steps.verdict import EXPOSED_SHARE_LIMIT, not_the_network, wait_fraction

ATTENTION, OK, NOT_OBSERVABLE = "attention", "ok", "not_observable"
#: An item that cannot apply to the run at all (NCCL and GPU items on a CPU run over gloo,
#: network items when every rank is on one host), shown apart from the unobservable.
NOT_APPLICABLE = "not_applicable"
#: Items about NCCL or GPUs, and items about the network between hosts.
NCCL_GPU_ITEMS = ("nic_firmware", "hbm_errors", "socket_transport", "gdr", "nccl_versions",
                  "nccl_tests", "nccl_warnings")  # fmt: skip
NETWORK_ITEMS = ("mtu", "fat_tree")
#: Measured bus bandwidth below this fraction of the link's peak deserves attention.
BUSBW_FRACTION_LIMIT = 0.5
#: The largest IB/RoCE path MTU (verbs IBV_MTU_4096).
IB_MTU_BYTES = 4096
NCCL_LOG_HINT = "Upload the run's NCCL_DEBUG=INFO logs (one per process) with the traces."
HANG_ACTION = "Read the Hang page: the culprit rank's own logs and stack come next."

Item = dict[str, Any]


def _item(key: str, title: str, page: str, status: str, evidence: str, action: str = "") -> Item:
    return {
        "key": key,
        "title": title,
        "status": status,
        "evidence": evidence,
        "page": page,
        "action": action,
    }


def _nccl(report: Mapping[str, Any]) -> dict | None:
    """The nccl section when the run has NCCL logs, else None."""
    n = report.get("nccl")
    return n if isinstance(n, dict) and n.get("present") else None


def _where(ev: dict | None) -> str:
    """' (file:line: text)' for an evidence dict of the nccl section."""
    if not ev or not ev.get("text"):
        return ""
    place = f"{Path(ev['file']).name}:{ev.get('line')}: " if ev.get("file") else ""
    return f" ({place}{ev['text']})"


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


def mtu(report: Mapping[str, Any]) -> Item:
    """MTU: the IB/RoCE queue pairs' path MTU when the NCCL logs print it (NET subsystem,
    2.2x+); an Ethernet interface's MTU is in neither traces nor NCCL logs."""
    title, page = "MTU 9000 jumbo frames on the fabric", "nccl"
    action = (
        "Check `ip link show` (mtu 9000) on every host and switch port; for InfiniBand/RoCE "
        "`ibv_devinfo` active_mtu 4096."
    )
    mtus = (_nccl(report) or {}).get("ib_mtu") or []
    if not mtus:
        return _item(
            "mtu",
            title,
            page,
            NOT_OBSERVABLE,
            "Neither traces nor NCCL logs record the interface MTU (NCCL 2.2x prints its IB/"
            "RoCE queue pairs' MTU with NCCL_DEBUG_SUBSYS=NET).",
            action,
        )
    low = mtus[0]
    where = _where({k: low.get(k) for k in ("file", "line", "text")})
    if low["mtu_bytes"] < IB_MTU_BYTES:
        return _item(
            "mtu",
            title,
            page,
            ATTENTION,
            f"IB/RoCE queue pairs run at a path MTU of {low['mtu_bytes']} bytes on "
            f"{low['n_processes']} process(es){where}: every message is cut into "
            f"{IB_MTU_BYTES // low['mtu_bytes']}x as many packets as at {IB_MTU_BYTES}.",
            "Raise the RoCE interfaces' MTU (`ip link set dev ... mtu 9000` on hosts and "
            f"switches) so that `ibv_devinfo` shows active_mtu {IB_MTU_BYTES}.",
        )
    return _item(
        "mtu",
        title,
        page,
        OK,
        f"IB/RoCE queue pairs run at the full path MTU of {IB_MTU_BYTES} bytes{where}.",
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


def socket_transport(report: Mapping[str, Any]) -> Item:
    """TCP sockets where RDMA was expected: NCCL's TCP fallback analysis."""
    title, page = "TCP socket where RDMA was expected", "nccl"
    n = _nccl(report)
    if n is None:
        return _item(
            "socket_transport", title, page, NOT_OBSERVABLE, "No NCCL logs.", NCCL_LOG_HINT
        )
    tcp = n.get("tcp_fallback") or {}
    inter = n.get("inter_node") or {}
    nets = ", ".join(sorted({str(x.get("network")) for x in n.get("networks") or []}))
    nets = nets or inter.get("network") or ""  # from the NET connection lines
    if tcp.get("detected"):
        return _item(
            "socket_transport",
            title,
            page,
            ATTENTION,
            f"{tcp.get('explanation') or 'TCP sockets carried inter-node traffic'}"
            f"{_where(tcp.get('evidence'))}.",
            "Check that the IB/RoCE devices are visible (`ibv_devices`, also inside the "
            "container), NCCL_IB_DISABLE and NCCL_NET are unset, and NCCL_IB_HCA names the NICs.",
        )
    if not nets:
        if inter.get("value") is False:
            return _item(
                "socket_transport",
                title,
                page,
                OK,
                "NCCL chose no inter-node network (a single-node job).",
            )
        crosses = (
            f"The job crosses nodes (by {inter.get('basis')})"
            if inter.get("value")
            else "Whether the job crosses nodes is not in the logs"
        )
        return _item(
            "socket_transport",
            title,
            page,
            NOT_OBSERVABLE,
            f"{crosses}, but no NCCL line names the network it used (no `Using network` line, "
            "no NET connection line), so TCP sockets cannot be ruled out.",
            "Log with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET: NCCL then names the "
            "network it uses and every connection's transport.",
        )
    return _item("socket_transport", title, page, OK, f"Network NCCL used: {nets}.")


def gdr(report: Mapping[str, Any]) -> Item:
    """GPUDirect RDMA off: from the NCCL log's GDR evidence."""
    title, page = "GPUDirect RDMA (GDR) off", "nccl"
    n = _nccl(report)
    if n is None:
        return _item("gdr", title, page, NOT_OBSERVABLE, "No NCCL logs.", NCCL_LOG_HINT)
    if n.get("gdr") is None:
        return _item(
            "gdr",
            title,
            page,
            NOT_OBSERVABLE,
            "The NCCL logs say nothing about GPU Direct RDMA (no RDMA network connections).",
            "Log with NCCL_DEBUG_SUBSYS=INIT,NET to see the /GDRDMA connection flags.",
        )
    where = _where(n.get("gdr_evidence"))
    if not n["gdr"] and not gdr_off_matters(n):
        return _item(
            "gdr",
            title,
            page,
            OK,
            f"GPU Direct RDMA is disabled{where}, but nothing in this job goes over the network "
            "(one host, no NET connections), so it costs nothing here.",
        )
    if not n["gdr"]:
        efa = any("Libfabric" in (x.get("network") or "") for x in n.get("networks") or [])
        return _item(
            "gdr",
            title,
            page,
            ATTENTION,
            f"GPU Direct RDMA is off: network traffic is staged through host memory{where}.",
            # EFA (AWS's libfabric plugin): no kernel module turns it on where the instance
            # type has none
            "On EFA, GPU Direct RDMA needs an instance type that has it (p4d and later; not "
            "p3dn or g4dn) and aws-ofi-nccl with it enabled (FI_EFA_USE_DEVICE_RDMA=1 on older "
            "libfabric): check the instance type before anything else."
            if efa
            else "Load nvidia-peermem (or use dma-buf), check NCCL_NET_GDR_LEVEL and the PCIe "
            "topology (`nvidia-smi topo -m`).",
        )
    return _item("gdr", title, page, OK, f"GPU Direct RDMA is in use{where}.")


def nccl_versions(report: Mapping[str, Any]) -> Item:
    """NCCL version mismatch across processes."""
    title, page = "NCCL version mismatch", "nccl"
    n = _nccl(report) or {}
    versions = n.get("versions") or []
    if not versions:
        return _item(
            "nccl_versions", title, page, NOT_OBSERVABLE, "No NCCL version lines.", NCCL_LOG_HINT
        )
    if n.get("version_mismatch") or len(versions) > 1:
        return _item(
            "nccl_versions",
            title,
            page,
            ATTENTION,
            f"Different NCCL versions in one job: {', '.join(versions)}.",
            "Use one container image / NCCL build on every node.",
        )
    procs = (n.get("ranks") or {}).get("processes") or 0
    credited = sum(d.get("n_processes") or 0 for d in n.get("versions_detail") or [])
    if credited < procs:
        return _item(
            "nccl_versions",
            title,
            page,
            NOT_OBSERVABLE,
            f"Only {credited} of the {procs} processes in the logs can be credited with an NCCL "
            f"version line (the logs print {versions[0]}), so a mismatch among the others "
            "cannot be ruled out.",
            "Keep every process's log: with NCCL_DEBUG=INFO each prints `NCCL version` at init.",
        )
    return _item("nccl_versions", title, page, OK, f"Every process logged NCCL {versions[0]}.")


def busbw(report: Mapping[str, Any], link_peak_gbps: float | None = None) -> Item:
    """Bus bandwidth far below the link's peak: from the collectives section."""
    title, page = "Bus bandwidth far below the link peak", "collectives"
    section = report.get("collectives")
    ops = section.get("ops") if isinstance(section, dict) else None
    measured = [
        (o["op"], o["busbw_GBps_median"])
        for o in ops or []
        if isinstance(o, dict) and o.get("busbw_GBps_median")
    ]
    if not measured:
        return _item(
            "busbw",
            title,
            page,
            NOT_OBSERVABLE,
            "No bus bandwidth measured (needs collectives matched across ranks, with sizes).",
            "Upload one trace per rank of the same steps.",
        )
    op, best = max(measured, key=lambda m: m[1])
    seen = f"best median busbw {best:.3g} GB/s ({op})"  # as the diagnosis quotes it
    tested = _tested_peak(report, op)
    if not link_peak_gbps and tested is None:
        return _item(
            "busbw",
            title,
            page,
            NOT_OBSERVABLE,
            f"Measured {seen}, but the link's peak is not known.",
            "Set the link's peak bandwidth on the Collectives page, or upload nccl-tests output "
            "from the same nodes.",
        )
    if link_peak_gbps:
        frac = best / link_peak_gbps
        evidence = f"Measured {seen} = {100 * frac:.0f}% of the {link_peak_gbps:g} GB/s peak."
    else:
        assert tested is not None
        frac = best / tested["peak_busbw_gbs"]
        evidence = (
            f"Measured {seen} = {100 * frac:.0f}% of the {tested['peak_busbw_gbs']:.3g} GB/s "
            f"that {_test_name(tested)} reached on "
            f"{units.size_text(tested['peak_bytes'])} messages{_where(_test_evidence(tested))}."
        )
    if frac >= BUSBW_FRACTION_LIMIT:
        return _item("busbw", title, page, OK, evidence)
    return _item(
        "busbw",
        title,
        page,
        ATTENTION,
        evidence,
        "Small messages never reach the peak: check the sizes; otherwise run nccl-tests on the "
        "same nodes and compare transports and GDR on the NCCL page.",
    )


def _tested_peak(report: Mapping[str, Any], op: str) -> dict | None:
    """The nccl-tests table of `op` (else of all-reduce) with the highest bus bandwidth."""
    tables = [t for t in (_nccl(report) or {}).get("tests") or [] if t.get("peak_busbw_gbs")]
    for wanted in (op, "allreduce"):
        same = [t for t in tables if t.get("op") == wanted]
        if same:
            return max(same, key=lambda t: t["peak_busbw_gbs"])
    return None


def _test_name(t: Mapping[str, Any]) -> str:
    """nccl.test_name, with the collective when the table does not name its program."""
    return test_name(t) + ("" if t.get("test") else f" ({t.get('op') or 'op unknown'})")


def _test_evidence(t: Mapping[str, Any]) -> dict:
    """The table's place as an evidence dict (for `_where`)."""
    return (t.get("where") or {}) | {"text": f"table {t['table_no']}"}


def nccl_tests(report: Mapping[str, Any]) -> Item:
    """nccl-tests results in the logs: a wrong value is a hardware fault, whatever the speed."""
    title, page = "nccl-tests results are correct", "nccl"
    tables = (_nccl(report) or {}).get("tests") or []
    if not tables:
        return _item(
            "nccl_tests",
            title,
            page,
            NOT_OBSERVABLE,
            "No nccl-tests output in the uploaded logs.",
            "Run nccl-tests (e.g. `all_reduce_perf -b 8 -e 8G -f 2`) on the same nodes and "
            "upload its output: its bus bandwidth is what the fabric delivers, and its check "
            "catches faulty GPUs and links.",
        )
    bad = [t for t in tables if t.get("wrong_values") or t.get("wrong_rows")]
    if bad:
        first = bad[0]
        return _item(
            "nccl_tests",
            title,
            page,
            ATTENTION,
            f"{len(bad)} of {len(tables)} nccl-tests table(s) report wrong values; first: "
            f"{_test_name(first)}, {first.get('wrong_values') or 0} value(s) out of bounds"
            f"{_where(_test_evidence(first))}.",
            "Take the GPUs of that job out of service and rerun nccl-tests node by node to find "
            "the faulty GPU, NVLink or NIC.",
        )
    checked = [t for t in tables if t.get("wrong_values") is not None]
    if not checked:
        return _item(
            "nccl_tests",
            title,
            page,
            NOT_OBSERVABLE,
            f"{len(tables)} nccl-tests table(s), none with its `Out of bounds values` line (the "
            "output was cut).",
            "Upload the whole nccl-tests output.",
        )
    return _item(
        "nccl_tests",
        title,
        page,
        OK,
        f"{len(checked)} nccl-tests table(s) checked their results: no value out of bounds.",
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


def nccl_warnings(report: Mapping[str, Any]) -> Item:
    """NCCL warnings, errors or timeouts in the logs."""
    title, page = "NCCL warnings or timeouts", "nccl"
    n = _nccl(report)
    if n is None:
        return _item("nccl_warnings", title, page, NOT_OBSERVABLE, "No NCCL logs.", NCCL_LOG_HINT)
    counts = {k: (n.get(k) or {}).get("count", 0) for k in ("warnings", "errors", "timeouts")}
    if not any(counts.values()):
        return _item("nccl_warnings", title, page, OK, "No NCCL warnings, errors or timeouts.")
    first = next((n[k]["first"] for k in ("timeouts", "errors", "warnings") if counts[k]), None)
    return _item(
        "nccl_warnings",
        title,
        page,
        ATTENTION,
        f"{counts['warnings']} warning(s), {counts['errors']} error(s) and "
        f"{counts['timeouts']} timeout(s) in the NCCL logs{_where(first)}.",
        "Read them on the NCCL page; timeouts usually point at a hung or dead rank.",
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
