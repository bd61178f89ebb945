"""Each nccl-tests table beside the model (docs/model.md, "Fabrics"): the measured curve, the
curve calibrated without the size it predicts, the calibration of another op (or GPU count) on
the same fabric, NCCL's uncalibrated model and the single α-β line, with their errors, and the
plateau against the link's peak and its usual figure."""

from __future__ import annotations

from typing import Any

from commwall.analysis import units
from commwall.analysis.fabric.cross import cross_count_time, cross_op_time
from commwall.analysis.fabric.curve import (
    Curve,
    ape,
    fit_curve,
    leave_one_size_out,
    median_p90,
    two_point_line,
)
from commwall.analysis.fabric.nccl_prior import fabric_topo, nccl_time_us, table_topo
from commwall.analysis.fabric.tables import Table
from commwall.analysis.model.busbw import busbw_factor
from commwall.analysis.model.hardware import LinkSpec, intra_node_link

#: The op each table's cross-op prediction is calibrated on: all-reduce; for the all-reduce
#: itself, the first ring op of these its fabric has.
REFERENCES = ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")


def fabric_key(t: Table) -> tuple[str, int | None, int | None]:
    """Tables of one store with the same GPU, ranks and nodes are taken as one fabric."""
    return (t.gpu or "", t.n_ranks, t.n_nodes)


def _curve(t: Table) -> Curve | None:
    try:
        return fit_curve(t.sizes, [x * 1e-6 for x in t.times_us])
    except ValueError:
        return None


def _reference(t: Table, tables: list[Table]) -> Table | None:
    """The table of the same fabric whose calibration predicts `t` (see REFERENCES)."""
    same = [u for u in tables if u is not t and fabric_key(u) == fabric_key(t) and u.op != t.op]
    for op in REFERENCES:
        hit = next((u for u in same if u.op == op), None)
        if hit is not None:
            return hit
    return None


def _count_reference(t: Table, tables: list[Table]) -> Table | None:
    """A table of the same op and GPU on as many nodes with the nearest other rank count."""
    if t.n_nodes is None or t.n_ranks is None:
        return None
    same = [
        u
        for u in tables
        if u.op == t.op
        and (u.gpu or "") == (t.gpu or "")
        and u.n_nodes == t.n_nodes
        and u.n_ranks
        and u.n_ranks != t.n_ranks
    ]
    return min(same, key=lambda u: abs((u.n_ranks or 0) - (t.n_ranks or 0)), default=None)


def _link(t: Table, link_peak: LinkSpec | None) -> LinkSpec | None:
    """The link whose peak the plateau is set against: `link_peak` when given, else the GPUs'
    NVLink (or PCIe) within one node; unknown across nodes."""
    if link_peak is not None:
        return link_peak
    return intra_node_link(t.gpu) if t.n_nodes == 1 else None


def compare_table(
    t: Table, tables: list[Table], link_peak: LinkSpec | None = None
) -> dict[str, Any]:
    """One table's JSON: its fabric, `rows` (per size: measured, predicted without that size,
    from another op, from another GPU count, by NCCL's model, by the single line) and each
    predictor's median and p90 absolute percentage error (fractions)."""
    n = t.n_ranks
    try:
        factor = busbw_factor(t.op or "", n or 0)
    except ValueError:
        factor = None
    times_s = [x * 1e-6 for x in t.times_us]
    loso = leave_one_size_out(t.sizes, times_s)
    ref = _reference(t, tables)
    ref_curve = _curve(ref) if ref is not None else None
    count_ref = _count_reference(t, tables)
    count_curve = _curve(count_ref) if count_ref is not None else None
    line = two_point_line(t.sizes, times_s, factor) if factor else None
    topo = table_topo(t, link_peak)
    here = fabric_topo(t, link_peak)
    there = fabric_topo(count_ref, link_peak) if count_ref is not None else None
    rows: list[dict[str, Any]] = []
    errs: dict[str, list[float | None]] = {
        k: [] for k in ("held", "cross", "count", "nccl", "line")
    }
    for size, us, bw in zip(t.sizes, t.times_us, t.busbw_GBps, strict=True):
        held = loso.get(float(size))
        cross = count = None
        if ref_curve is not None and ref is not None and n and t.op:
            cross = cross_op_time(ref_curve, ref.op or "", t.op, size, n, t.n_nodes, here)
        if count_curve is not None and count_ref is not None and n and t.op:
            count = cross_count_time(
                count_curve, t.op, size, count_ref.n_ranks or 0, n, t.n_nodes, there, here
            )
        nccl = nccl_time_us(t.op or "", size, topo) if not isinstance(topo, str) else None
        lined = line.time_s(size) if line is not None else None
        row: dict[str, Any] = {
            "size_bytes": size,
            "measured_us": us,
            "busbw_GBps": bw,
            "predicted_us": _us(held),
            "cross_op_predicted_us": _us(cross),
            "cross_count_predicted_us": _us(count),
            "nccl_model_us": nccl[0] if nccl else None,
            "nccl_choice": nccl[1] if nccl else None,
            "line_us": _us(lined),
        }
        rows.append(row)
        for k, p in (
            ("held", row["predicted_us"]),
            ("cross", row["cross_op_predicted_us"]),
            ("count", row["cross_count_predicted_us"]),
            ("nccl", row["nccl_model_us"]),
            ("line", row["line_us"]),
        ):
            errs[k].append(ape(p, us))
    out: dict[str, Any] = {
        "file": t.file,
        "table_no": t.table_no,
        "line": t.line_no,
        "op": t.op,
        "op_basis": t.op_basis,
        "n_ranks": n,
        "ranks_basis": t.ranks_basis,
        "n_nodes": t.n_nodes,
        "gpus_per_node": t.gpus_per_node,
        "gpu": t.gpu,
        "sizes": len({s for s in t.sizes}),
        "rows": rows,
        "cross_op_reference": ref.op if ref_curve is not None and ref is not None else None,
        "cross_count_reference_ranks": count_ref.n_ranks if count_curve and count_ref else None,
        "nccl_model_status": topo if isinstance(topo, str) else "NCCL's tuning model, uncalibrated",
    }
    for key, k in (
        ("heldout", "held"),
        ("cross_op", "cross"),
        ("cross_count", "count"),
        ("nccl_model", "nccl"),
        ("line", "line"),
    ):
        out[f"{key}_median_ape"], out[f"{key}_p90_ape"] = median_p90(errs[k])
    out |= plateau(t, link_peak)
    out["sentence"] = sentence(out)
    return out


def _us(s: float | None) -> float | None:
    return None if s is None else s * 1e6


def plateau(t: Table, link_peak: LinkSpec | None) -> dict[str, Any]:
    """The table's highest bus bandwidth (GB/s) and its size, against the link's per-direction
    peak and the ring bus bandwidth usually measured on it."""
    pts = [(bw, s) for s, bw in zip(t.sizes, t.busbw_GBps, strict=True) if bw is not None]
    best = max(pts, key=lambda p: (p[0], -p[1]), default=None)
    link = _link(t, link_peak)
    peak = link.line_Bps / 1e9 if link else None
    typical = link.achievable_Bps / 1e9 if link and link.achievable_Bps else None
    bw = best[0] if best else None
    return {
        "plateau_busbw_GBps": bw,
        "plateau_bytes": best[1] if best else None,
        "link": link.name if link else None,
        "link_peak_GBps": peak,
        "typical_busbw_GBps": typical,
        "plateau_vs_peak": bw / peak if bw is not None and peak else None,
        "plateau_vs_typical": bw / typical if bw is not None and typical else None,
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f} %"


def sentence(r: dict[str, Any]) -> str:
    """What a table says of its fabric and how well each predictor does, in words."""
    who = f"{r['n_ranks'] or '?'} ranks"
    if r["n_nodes"]:
        who += f" on {r['n_nodes']} node{'s' if r['n_nodes'] > 1 else ''}"
    if r["gpu"]:
        who += f", {r['gpu']}"
    text = f"{r['op'] or 'unknown op'} ({who})"
    if r["plateau_busbw_GBps"] is not None:
        text += (
            f": bus bandwidth plateaus at {r['plateau_busbw_GBps']:.4g} GB/s"
            f" ({units.size_text(r['plateau_bytes'])})"
        )
        if r["link_peak_GBps"]:
            peak = f"{r['link_peak_GBps']:.4g} GB/s"
            text += f", {_pct(r['plateau_vs_peak'])} of {r['link']}'s {peak} peak"
        if r["typical_busbw_GBps"]:
            usual = f"{r['typical_busbw_GBps']:.4g} GB/s"
            text += f" ({_pct(r['plateau_vs_typical'])} of the usual {usual})"
    text += (
        f"; model without the size it predicts: median error {_pct(r['heldout_median_ape'])}"
        f" (p90 {_pct(r['heldout_p90_ape'])})"
    )
    if r["cross_op_reference"]:
        text += f", from {r['cross_op_reference']}: {_pct(r['cross_op_median_ape'])}"
    if r["cross_count_reference_ranks"]:
        text += (
            f", from {r['cross_count_reference_ranks']} ranks: {_pct(r['cross_count_median_ape'])}"
        )
    text += (
        f"; NCCL's model: {_pct(r['nccl_model_median_ape'])}"
        if r["nccl_model_median_ape"] is not None
        else f"; NCCL's model {r['nccl_model_status']}"
    )
    return text + f"; single α-β line: {_pct(r['line_median_ape'])}"


def compare_tables(tables: list[Table], link_peak: LinkSpec | None = None) -> list[dict[str, Any]]:
    """`compare_table` of every table with an op."""
    return [compare_table(t, tables, link_peak) for t in tables if t.op]
