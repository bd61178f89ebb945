"""Checklist items read from the NCCL logs and the collectives: MTU, TCP sockets where RDMA
was expected, GPU Direct RDMA, NCCL versions, bus bandwidth against the link or nccl-tests,
nccl-tests results, NCCL warnings and errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commwall.analysis import units
from commwall.analysis.fabric.baseline import fabric_check
from commwall.analysis.nccl.section import gdr_off_matters
from commwall.analysis.nccl.tests_tables import test_name
from commwall.analysis.report.checklist_base import (
    ATTENTION,
    BUSBW_FRACTION_LIMIT,
    IB_MTU_BYTES,
    NCCL_LOG_HINT,
    NOT_OBSERVABLE,
    OK,
    Item,
    _item,
    _nccl,
    _where,
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


def fabric_baseline(report: Mapping[str, Any]) -> Item:
    """The run's collectives against nccl-tests on the same fabric at the same sizes (the
    report's `fabric` section, analysis/fabric/baseline.py)."""
    title, page = "Collectives as fast as nccl-tests on the same fabric", "model"
    check = fabric_check(dict(report))
    if check is None:
        section = report.get("fabric")
        reason = section.get("reason") if isinstance(section, dict) else None
        return _item(
            "fabric_baseline",
            title,
            page,
            NOT_OBSERVABLE,
            f"Nothing to compare the run's collectives with: {reason or 'no fabric section'}.",
            "Run nccl-tests (`all_reduce_perf -b 8 -e 8G -f 2`, and the ops the job uses) on "
            "the same nodes and ingest its output into the run with the traces.",
        )
    action = (
        "The fabric is not the limit: look at what shares the GPUs with the transfer (compute "
        "kernels overlapping it, NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS, process placement "
        "across NUMA nodes and NICs) on the NCCL and Timeline pages."
    )
    if check["status"] == OK:
        return _item("fabric_baseline", title, page, OK, check["evidence"])
    return _item("fabric_baseline", title, page, ATTENTION, check["evidence"], action)


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
