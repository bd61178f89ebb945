"""`commwall model --params 7e9 --dtype bf16 --gpus 8 --link 400Gbps ...`: the predicted
gradient sync time per algorithm, the step model and the verdict (presentation only)."""

from __future__ import annotations

import argparse

import pandas as pd

from commwall.analysis.model.collectives import ALGORITHMS
from commwall.analysis.model.hardware import DEFAULT_NET_ALPHA_S, DEFAULT_NVLINK_ALPHA_S
from commwall.analysis.model.nccl_tuning import ARCHS
from commwall.analysis.model.scenario import calculator, predict
from commwall.analysis.model.summary import prediction_dict
from commwall.analysis.model.units import parse_duration
from commwall.analysis.model.whatif import KNOBS
from commwall.cli.commands._output import (
    add_format,
    add_wait,
    emit_json,
    emit_text,
    error,
    fmt_table,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "model",
        help="predict gradient-sync time, step time and the verdict (what-if calculator)",
        description="α-β all-reduce time per algorithm (ring, tree, halving-doubling, "
        "hierarchical, NVLS, SHARP) and NCCL's own model for a data-parallel gradient sync, "
        "then T_step = τ_comp + τ_comm − min(τ_comp, τ_comm)·η and the verdict. Units are "
        "explicit: GB = 1e9 B, GiB = 2^30 B, 400Gbps = 50GB/s.",
    )
    p.add_argument("--db", help="store file: what-ifs on the stored run --run")
    p.add_argument("--run", help="run name (with --db)")
    add_wait(p)
    p.add_argument("--nodes", type=int, help="with --db: nodes (ranks in the ring)")
    p.add_argument(
        "--link-peak", help="with --db: the link to compare busbw with (NDR, NVLink3, 50GB/s)"
    )
    p.add_argument("--params", help="parameters, e.g. 7e9 or 7B")
    p.add_argument("--dtype", default="bf16", help="gradient dtype (default: %(default)s)")
    p.add_argument("--gpus", type=int, help="data-parallel GPUs")
    p.add_argument(
        "--gpus-per-node", type=int, default=1, help="default 1: every hop crosses --link"
    )
    p.add_argument(
        "--link", help="NIC speed per GPU, per direction (400Gbps); with --db the what-if link"
    )
    p.add_argument("--nvlink", help="NVLink, bidirectional as quoted (default 900GB/s)")
    p.add_argument("--nics-per-node", type=int, help="default: one NIC per GPU")
    p.add_argument("--compute-ms", type=float, help="compute time per micro-batch, ms")
    p.add_argument("--overlap", type=float, help="overlap efficiency η in [0, 1] (default 0)")
    p.add_argument("--grad-accum", type=int, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--compression", type=float, help="bytes on the wire ÷ this (default 1)")
    p.add_argument("--bucket", default="25MiB", help="DDP bucket size; 0: one collective")
    p.add_argument("--alpha", default=f"{DEFAULT_NET_ALPHA_S * 1e6:g}us", help="NIC hop latency")
    p.add_argument(
        "--alpha-nvlink", default=f"{DEFAULT_NVLINK_ALPHA_S * 1e6:g}us", help="NVLink hop latency"
    )
    p.add_argument(
        "--algorithm",
        choices=("best", *ALGORITHMS, "nccl"),
        default="best",
        help="algorithm of the step model (best: fastest α-β one)",
    )
    p.add_argument("--in-network", action="store_true", help="let best pick NVLS / SHARP")
    p.add_argument("--target-overhead", type=float, default=0.1, help="for the minimum link")
    p.add_argument("--arch", choices=ARCHS, default="hopper", help="GPU arch for NCCL's model")
    add_format(p, ("text", "json"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the prediction."""
    if args.db:
        return run_stored(args)
    missing = [f"--{k}" for k in ("params", "gpus", "link") if getattr(args, k) is None]
    if missing:
        return error(f"give {', '.join(missing)} (or --db and --run for a stored run)")
    try:
        scenario = calculator(
            args.params,
            args.dtype,
            args.gpus,
            args.link,
            gpus_per_node=args.gpus_per_node,
            nvlink=args.nvlink,
            nics_per_node=args.nics_per_node,
            alpha_net_s=parse_duration(args.alpha),
            alpha_nvlink_s=parse_duration(args.alpha_nvlink),
            bucket=args.bucket,
            compute_s=None if args.compute_ms is None else args.compute_ms / 1e3,
            eta=args.overlap or 0.0,
            grad_accum=args.grad_accum or 1,
            compression=args.compression or 1.0,
            algorithm=args.algorithm,
            in_network=args.in_network,
            target_overhead=args.target_overhead,
            arch=args.arch,
        )
        result = prediction_dict(predict(scenario))
    except ValueError as e:
        return error(str(e))
    if args.format == "json":
        emit_json(result)
    else:
        emit_text(render(result))
    return 0


def render(r: dict) -> str:
    """The prediction as text."""
    i = r["inputs"]
    lines = [
        f"gradient {r['gradient_GB']:.2f} GB ({r['gradient_GiB']:.2f} GiB) per step, "
        f"{r['wire_bytes'] / 1e9:.2f} GB on the wire, {r['collectives_per_step']} all-reduce(s)",
        f"{i['gpus']} GPUs, {i['gpus_per_node']} per node ({i['nodes']} nodes); NIC "
        f"{i['link_GBps']:.2f} GB/s, α {i['link_alpha_us']:g} µs"
        + (
            f"; NVLink {i['nvlink_GBps']:.0f} GB/s per direction, α {i['nvlink_alpha_us']:g} µs"
            if i["nvlink_GBps"]
            else ""
        ),
        "",
    ]
    lines.append(
        fmt_table(pd.DataFrame([{"algorithm": a, **v} for a, v in r["algorithms"].items()]))
    )
    if r["nccl"]:
        n = r["nccl"]
        picks = ", ".join(f"{c['algorithm']}/{c['protocol']} ×{c['count']}" for c in n["choices"])
        lines.append(f"NCCL {n['version']} model: {n['allreduce_ms']:.3f} ms ({picks})")
    lines += ["", f"step model uses: {r['algorithm']}"]
    st = r["step"]
    if st is None:
        lines.append("no step model: give --compute-ms")
    else:
        lines += [
            f"T_step {st['step_ms']:.3f} ms = τ_comp {st['tau_comp_ms']:.3f} + τ_comm "
            f"{st['tau_comm_ms']:.3f} − overlap {st['overlap_ms']:.3f} ms; γ {st['gamma']:.3g}",
            f"communication overhead {100 * st['comm_overhead']:.2f}%, "
            f"GPU efficiency {100 * st['gpu_efficiency']:.2f}%",
            f"verdict: {st['verdict']} — {st['reason']}",
            "minimum NIC bandwidth for "
            f"{100 * i['target_overhead']:.0f}% overhead: "
            + (
                f"{r['min_link_GBps']:.1f} GB/s ({8 * r['min_link_GBps']:.0f} Gb/s)"
                if r["min_link_GBps"] is not None
                else "none (latency alone exceeds it)"
            ),
        ]
    lines += ["", "assumptions:", *(f"  - {a}" for a in r["assumptions"])]
    return "\n".join(lines)


def run_stored(args: argparse.Namespace) -> int:
    """What-ifs on a stored run: the dashboard's knobs, given as options."""
    from commwall.analysis import db
    from commwall.analysis.model.hardware import link_for_peak
    from commwall.analysis.model.units import parse_bandwidth
    from commwall.cli.commands._store import open_store

    if not args.run:
        return error("--db needs --run")
    knobs: dict[str, float] = {}
    try:
        if args.link:
            knobs["link_Bps"] = parse_bandwidth(args.link) / 1e9
        for key, value in (
            ("grad_accum", args.grad_accum),
            ("compression", args.compression),
            ("eta", args.overlap),
            ("n_nodes", args.nodes),
        ):
            if value is not None:
                knobs[key] = float(value)
        peak = link_for_peak(args.link_peak) if args.link_peak else None
        with open_store(args) as store:
            result = store.run(args.run).model_whatif(knobs, peak)
    except (ValueError, FileNotFoundError, db.RunNotFound) as e:
        return error(str(e))
    if args.format == "json":
        emit_json(result)
    else:
        emit_text(render_stored(result))
    return 0


def render_stored(r: dict) -> str:
    """A stored run's what-if as text."""
    lines = [f"model status: {r['status']}"]
    lines += [f"  fit {op}: {st}" for op, st in r["fit_status"].items()]
    if r["model"] is None:
        return "\n".join(lines)
    rows = []
    for label, d in (("measured", r["measured"]), ("model", r["model"]), ("what-if", r["what_if"])):
        rows.append(
            {
                "": label,
                **{
                    k: d.get(k)
                    for k in (
                        "step_ms",
                        "tau_comm_ms",
                        "exposed_comm_ms",
                        "comm_overhead",
                        "verdict",
                    )
                },
            }
        )
    lines.append(fmt_table(pd.DataFrame(rows)))
    for k, v in r["knobs"].items():
        label = KNOBS[k][0] if k in KNOBS else k  # display units: link bandwidth in GB/s
        lines.append(f"{label}: {v['run']:g} in the run → {v['what_if']:g}")
    return "\n".join(lines)
