"""Generate real Kineto traces of a pipeline-parallel MLP on gloo (CPU): GPipe or 1F1B written over
blocking point-to-point `send`/`recv`, optionally with one stage slower than the others, and
optionally replicated data-parallel (a pp x dp mesh).

What it makes
-------------
``--stages`` CPU processes (one stage each, rank = stage; ``--dp`` below) train an MLP split into
consecutive stages: stage s holds ``--layers`` blocks ``Linear(H, H) -> ReLU`` (``H = --hidden``),
the slow stage (``--slow-stage``, -1 for none) ``--slow-factor`` times as many. Every step splits a
batch into ``--micro-batches`` micro-batches of ``--micro-batch-size`` rows and runs them through
the stages with blocking ``dist.send`` / ``dist.recv`` of the activations (forward, stage s to s +
1) and of their gradients (backward, s + 1 to s), on the default process group
(``torch.distributed.pipelining``'s batched point-to-point deadlocks on gloo), or with ``--dp``
above 1 on the replica's own group (below):

* ``--schedule gpipe``: all forwards, then all backwards (in micro-batch order);
* ``--schedule 1f1b``: stage s runs ``min(p - s - 1, m)`` warm-up forwards, then alternates one
  forward and one backward, then the remaining backwards (PipeDream-Flush / Megatron-LM's
  non-interleaved schedule).

The last stage's loss is the mean square of its output. After the backwards every stage takes an
SGD step.

``--dp D`` (default 1) replicates the pipeline D times, a pp x dp mesh of ``stages x D`` ranks:
stage s of replica d is rank ``d * stages + s``. Every rank builds, in this order, one group per
replica (``new_group`` of its ``stages`` ranks, ``group_desc`` ``pp_replica{d}``: the replica's
sends and receives go over it, their peer given as the rank in that group, ``group_dst`` /
``group_src``) and one group per stage (``new_group`` of the D ranks holding stage s,
``group_desc`` ``dp_stage{s}``). Each replica sees its own micro-batches (seeded by replica),
every stage starts from the same weights in every replica (seeded by stage). After its
backwards each rank all-reduces its stage's gradients over its stage's group, one blocking
``dist.all_reduce`` per parameter in reverse registration order, then takes its SGD step. With
D = 1 nothing of this happens (no extra group, the default group's sends and receives).

Every rank profiles ``--steps`` steps (``schedule(wait=1, warmup=1, active=STEPS)``,
CPU activities, ``record_shapes``) and writes ``rank{r}.pt.trace.json.gz``; rank 0 writes
``ground_truth.json``:

* ``world_size`` (``stages x dp``), ``stages``, ``dp``, ``schedule``, ``micro_batches``,
  ``micro_batch_size``, ``hidden``, ``layers_per_stage`` (blocks per stage, the slow one's
  included), ``slow_stage`` (-1: none), ``slow_factor``, ``steps`` (the recorded ProfilerStep
  numbers), ``p2p_per_step`` (per rank: its sends and receives of one step in program order, each
  ``[op, peer, elements]``, the peer a global rank), ``stage_of_rank``, ``replica_of_rank``; with
  ``--dp`` above 1 also ``groups`` (every group the program built: ``name`` as its ``group_desc``,
  ``role`` PP or DP, ``ranks``) and ``dp_allreduces_per_step`` (per stage: its parameters, one
  all-reduce each), ``bubble_fraction_formula`` ((p - 1) / (m + p - 1)), ``torch_version``,
  ``generator_args``.

What the trace says (how long each stage computes, how long each receive waits) is read from the
traces themselves by the tests: timings differ on every run. On gloo the events are
``c10d::send`` / ``c10d::recv_`` on the calling thread (their ``Concrete Inputs`` hold the peer's
rank in the group), each with its transfer ``gloo:send`` / ``gloo:recv`` (a blocking receive
lasts until the data has arrived).

Only this script imports torch. Run it with a Python that has torch (tested with 2.13.0+cpu)::

    python sample_traces/generate_pipeline.py --out pp_2stage_slow --stages 2 --slow-stage 1
    python sample_traces/generate_pipeline.py --out pp2_dp2_slow --stages 2 --dp 2 --slow-stage 1
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate_gloo import profile_steps  # noqa: E402 (the same profiling and gzip writer)

WAIT_STEPS, WARMUP_STEPS = 1, 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (must not exist)")
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--dp", type=int, default=1, help="data-parallel replicas of the pipeline")
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), default="gpipe")
    p.add_argument("--micro-batches", type=int, default=8)
    p.add_argument("--micro-batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=2, help="blocks per stage")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--slow-stage", type=int, default=-1, help="stage with more layers; -1 none")
    p.add_argument("--slow-factor", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def layers_of(stage: int, args: argparse.Namespace) -> int:
    """Blocks held by `stage`."""
    return args.layers * (args.slow_factor if stage == args.slow_stage else 1)


Action = tuple[str, int, int, str]  # (what, micro-batch, peer or -1, "act" | "grad" | "")


def program(stage: int, args: argparse.Namespace) -> list[Action]:
    """The stage's actions of one step in program order: ("F" | "B", i, -1, "") computes the
    forward or backward of micro-batch i; ("send" | "recv", i, peer, "act" | "grad") moves its
    activation or gradient. 1F1B's steady state sends and receives with the same neighbour back
    to back: an even stage sends first, an odd one receives first, so that two blocking sends
    never wait for each other (gloo's send waits for the matching receive)."""
    m, p, last = args.micro_batches, args.stages, args.stages - 1

    def recv_f(i: int) -> list[Action]:
        return [("recv", i, stage - 1, "act")] if stage > 0 else []

    def send_f(i: int) -> list[Action]:
        return [("send", i, stage + 1, "act")] if stage < last else []

    def recv_b(i: int) -> list[Action]:
        return [("recv", i, stage + 1, "grad")] if stage < last else []

    def send_b(i: int) -> list[Action]:
        return [("send", i, stage - 1, "grad")] if stage > 0 else []

    def both(send: list[Action], recv: list[Action]) -> list[Action]:
        return send + recv if stage % 2 == 0 else recv + send

    if args.schedule == "gpipe":
        fwd = [a for i in range(m) for a in [*recv_f(i), ("F", i, -1, ""), *send_f(i)]]
        bwd = [a for i in range(m) for a in [*recv_b(i), ("B", i, -1, ""), *send_b(i)]]
        return fwd + bwd
    warm = min(p - stage - 1, m)
    out = [a for i in range(warm) for a in [*recv_f(i), ("F", i, -1, ""), *send_f(i)]]
    if warm < m:
        out += recv_f(warm)
    for j in range(m - warm):
        f = warm + j
        out += [("F", f, -1, ""), *both(send_f(f), recv_b(j)), ("B", j, -1, "")]
        out += send_b(j) if f == m - 1 else both(send_b(j), recv_f(f + 1))
    for b in range(m - warm, m):
        out += [*recv_b(b), ("B", b, -1, ""), *send_b(b)]
    return out


def p2p_plan(stage: int, args: argparse.Namespace) -> list[list[Any]]:
    """The stage's sends and receives of one step in program order: [op, peer, elements]."""
    n = args.micro_batch_size * args.hidden
    return [[what, peer, n] for what, _, peer, _ in program(stage, args) if peer >= 0]


def mesh_groups(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The groups of a pp x dp mesh in creation order: one per replica (its stages' ranks, PP),
    then one per stage (the ranks holding it, DP). Stage s of replica d is rank d * stages + s."""
    p, d = args.stages, args.dp
    pp = [{"name": f"pp_replica{r}", "role": "PP", "ranks": [r * p + s for s in range(p)]}
          for r in range(d)]  # fmt: skip
    dp = [{"name": f"dp_stage{s}", "role": "DP", "ranks": [r * p + s for r in range(d)]}
          for s in range(p)]  # fmt: skip
    return pp + dp


def worker(rank: int, args: argparse.Namespace, port: int) -> None:
    """One stage of one replica: its part of the pipeline's training loop under the profiler."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.stages * args.dp)
    stage, replica = rank % args.stages, rank // args.stages
    pp_group = dp_group = None  # the default group: a plain pipeline
    if args.dp > 1:  # every rank builds every group, in the same order
        for g in mesh_groups(args):
            made = dist.new_group(g["ranks"], group_desc=g["name"])
            if rank in g["ranks"]:
                pp_group, dp_group = (made, dp_group) if g["role"] == "PP" else (pp_group, made)
    torch.manual_seed(args.seed + stage)
    h, last = args.hidden, args.stages - 1
    nn = torch.nn
    blocks: list[Any] = []
    for _ in range(layers_of(stage, args)):
        blocks += [nn.Linear(h, h), nn.ReLU()]
    model = nn.Sequential(*blocks)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1e-4)
    gen = torch.Generator().manual_seed(args.seed + replica)
    batch = [
        torch.randn(args.micro_batch_size, h, generator=gen) for _ in range(args.micro_batches)
    ]
    work = program(stage, args)

    def send(t: Any, peer: int) -> None:
        if pp_group is None:
            dist.send(t, peer)
        else:
            dist.send(t, group=pp_group, group_dst=peer)

    def recv(t: Any, peer: int) -> None:
        if pp_group is None:
            dist.recv(t, peer)
        else:
            dist.recv(t, group=pp_group, group_src=peer)

    def one_step() -> None:
        opt.zero_grad(set_to_none=True)
        x: dict[int, torch.Tensor] = {}
        y: dict[int, torch.Tensor] = {}
        g: dict[int, torch.Tensor] = {}
        for what, i, peer, data in work:
            if what == "F":
                if stage == 0:
                    x[i] = batch[i]
                y[i] = model(x[i])
            elif what == "B":
                if stage == last:
                    y.pop(i).float().pow(2).mean().backward()
                else:
                    y.pop(i).backward(g.pop(i))
            elif what == "recv":
                t = torch.empty(args.micro_batch_size, h)
                recv(t, peer)
                if data == "act":
                    x[i] = t.requires_grad_(True)
                else:
                    g[i] = t
            elif data == "act":
                send(y[i].detach(), peer)
            else:
                grad = x.pop(i).grad
                assert grad is not None
                send(grad, peer)
        if dp_group is not None:  # gradient synchronisation over the stage's DP group
            for prm in reversed(params):
                dist.all_reduce(prm.grad, group=dp_group)
        opt.step()

    out_dir = Path(args.out).resolve()
    profile_steps(out_dir, rank, args.steps, one_step, WAIT_STEPS, WARMUP_STEPS)
    if rank == 0:
        first = WAIT_STEPS + WARMUP_STEPS
        p, m, world = args.stages, args.micro_batches, args.stages * args.dp
        mesh: dict[str, Any] = {}
        if args.dp > 1:
            mesh = {
                "groups": mesh_groups(args),
                "dp_allreduces_per_step": [2 * layers_of(s, args) for s in range(p)],
            }
        truth = {
            "world_size": world,
            "stages": args.stages,
            "dp": args.dp,
            "schedule": args.schedule,
            "micro_batches": m,
            "micro_batch_size": args.micro_batch_size,
            "hidden": args.hidden,
            "layers_per_stage": [layers_of(s, args) for s in range(p)],
            "slow_stage": args.slow_stage,
            "slow_factor": args.slow_factor if args.slow_stage >= 0 else 1,
            "steps": list(range(first, first + args.steps)),
            "p2p_per_step": {
                str(r): [[op, r - r % p + peer, n] for op, peer, n in p2p_plan(r % p, args)]
                for r in range(world)
            },
            "stage_of_rank": [r % p for r in range(world)],
            "replica_of_rank": [r // p for r in range(world)],
            **mesh,
            "bubble_fraction_formula": (p - 1) / (m + p - 1),
            "torch_version": torch.__version__,
            "generator_args": {k: v for k, v in vars(args).items() if k != "out"},
        }
        (out_dir / "ground_truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if out.exists():
        print(f"{out} exists; choose a new folder", file=sys.stderr)
        return 2
    if args.dp < 1:
        print(f"--dp {args.dp} must be at least 1", file=sys.stderr)
        return 2
    if not 0 <= args.slow_stage < args.stages and args.slow_stage != -1:
        print(f"--slow-stage {args.slow_stage} is no stage of {args.stages}", file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(args, free_port()), nprocs=args.stages * args.dp, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
