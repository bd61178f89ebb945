"""Generate real Kineto traces of jobs with several process groups on gloo (CPU): a 2-D device mesh
(data parallel x tensor parallel), FSDP2 (``fully_shard``) with or without a compute straggler,
and a mixture-of-experts layer whose tokens travel by all-to-all with imbalanced routing.

What it makes
-------------
``--ranks`` CPU processes (``torch.multiprocessing``, gloo on 127.0.0.1) run one of three jobs
(``--job``), profile ``--steps`` steps each (``schedule(wait=1, warmup=1, active=STEPS)``,
``record_shapes=True``) and write ``rank{r}.pt.trace.json.gz`` and, on rank 0,
``ground_truth.json``:

* ``mesh2d``: ``init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))`` with
  ``tp = --tp`` (default 2) and ``dp = ranks / tp``. An MLP of ``--layers`` blocks
  ``Linear(H, 4H) -> ReLU -> Linear(4H, H)`` split column- then row-wise over the ``tp`` dimension
  (``ColwiseParallel`` / ``RowwiseParallel``): each block's forward ends in an all-reduce of its
  output over the TP group, its backward in one of its input's gradient (not the first block's).
  After backward every rank all-reduces its local gradient shards over its DP group, one
  blocking ``dist.all_reduce`` per parameter in reverse registration order (``4 x layers``
  gradients). The DP ranks see different batches, the TP ranks of a DP replica the same one.
  The traces' ``distributedInfo.pg_config`` lists the mesh's groups (``mesh_dp``, ``mesh_tp``).
* ``fsdp``: a plain MLP (``--layers`` blocks as above) with every block and the root wrapped by
  ``fully_shard`` over a 1-D mesh of all ranks: per step an all-gather of each block's
  parameters in forward, again in backward (``reshard_after_forward``), and a reduce-scatter of
  its gradients (gloo runs ``c10d::_reduce_scatter_base_`` over ``gloo:all_reduce``).
  ``--straggler R`` makes rank R run extra ``256x256`` matmuls for ``--delay-ms`` per step in
  its forward pass (a compute straggler: real ``aten::mm`` events on its main thread).
* ``moe``: a data-parallel mixture-of-experts layer, one expert per rank. Each rank routes its
  ``--tokens`` tokens to the experts with fixed skewed weights (``--hot-rank``, default 1,
  receives ``--hot-share`` of every rank's tokens, default 0.55; the rest evenly), exchanges the
  counts with ``all_to_all_single`` and then the tokens with ``all_to_all_single`` over uneven
  splits, applies its expert, sends the results back the same way (the reverse splits), and in
  backward the same two exchanges run again; then the expert and router gradients are
  all-reduced over the world (DP).

Ground truth (``ground_truth.json``)
------------------------------------
``job``, ``world_size``, ``steps`` (the recorded ProfilerStep numbers), ``torch_version``,
``generator_args``; ``groups``: every process group of the job with its ``name``, ``role`` (TP,
DP, FSDP, EP) and member ``ranks`` as the program built it. Per job also: ``mesh2d``: ``dp``,
``tp``, ``tp_allreduces_per_step`` (2 x layers - 1), ``dp_allreduces_per_step`` (4 x layers);
``fsdp``: ``straggler_rank`` (-1: none), ``delay_ms`` (the per-step calls are read from the
traces); ``moe``: ``hot_rank``, ``hot_share``, ``tokens`` and ``send_counts`` (rank ->
tokens it sends to each rank, the routing actually used). Timings, waits and who was late are
read from the traces by the tests, not from here: they differ on every run.

Only this script imports torch. Run it with a Python that has torch (tested with 2.13.0+cpu)::

    python sample_traces/generate_mesh.py --job mesh2d --ranks 4 --out tests/data/mesh/dp2_tp2
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate_gloo import profile_steps  # noqa: E402 (the same profiling and gzip writer)

WAIT_STEPS, WARMUP_STEPS = 1, 1
JOBS = ("mesh2d", "fsdp", "moe")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (must not exist)")
    p.add_argument("--job", choices=JOBS, required=True)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--tp", type=int, default=2, help="mesh2d: TP ranks per DP replica")
    p.add_argument("--straggler", type=int, default=-1, help="fsdp: the slow rank (-1: none)")
    p.add_argument("--delay-ms", type=float, default=30.0)
    p.add_argument("--tokens", type=int, default=256, help="moe: tokens per rank and step")
    p.add_argument("--hot-rank", type=int, default=1)
    p.add_argument("--hot-share", type=float, default=0.55)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mlp_blocks(h: int, layers: int) -> list[Any]:
    import torch.nn as nn

    return [
        nn.Sequential(nn.Linear(h, 4 * h), nn.ReLU(), nn.Linear(4 * h, h)) for _ in range(layers)
    ]


def burn(ms: float) -> None:
    """Extra real compute for `ms` milliseconds: 256x256 matmuls (aten::mm events)."""
    import torch

    a = torch.randn(256, 256)
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        a = torch.mm(a, a).tanh_()


def setup_mesh2d(rank: int, args: argparse.Namespace, truth: dict) -> tuple[Any, Any, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    tp, dp = args.tp, args.ranks // args.tp
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(args.seed)  # the same weights on every rank before they are split
    blocks = mlp_blocks(args.hidden, args.layers)
    for b in blocks:
        parallelize_module(b, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    model = torch.nn.Sequential(*blocks)
    dp_group = mesh.get_group("dp")
    params = [p for p in model.parameters()]
    replica = rank // tp  # the DP replica: its TP ranks see the same batch
    gen = torch.Generator().manual_seed(args.seed + replica)
    x = torch.randn(args.batch_size, args.hidden, generator=gen)

    def step() -> None:
        loss = model(x).float().pow(2).mean()
        loss.backward()
        for p in reversed(params):  # gradient synchronisation over the DP group
            dist.all_reduce(p.grad.to_local(), group=dp_group)

    grid = [[d * tp + t for t in range(tp)] for d in range(dp)]
    truth.update(
        dp=dp,
        tp=tp,
        tp_allreduces_per_step=2 * args.layers - 1,
        dp_allreduces_per_step=len(params),
        groups=[
            *({"name": "tp", "role": "TP", "ranks": row} for row in grid),
            *({"name": "dp", "role": "DP", "ranks": list(col)} for col in zip(*grid, strict=True)),
        ],
    )
    return model, step, None


def setup_fsdp(rank: int, args: argparse.Namespace, truth: dict) -> tuple[Any, Any, Any]:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (args.ranks,), mesh_dim_names=("dp_shard",))
    torch.manual_seed(args.seed)
    blocks = mlp_blocks(args.hidden, args.layers)
    model = torch.nn.Sequential(*blocks)
    for b in blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)
    gen = torch.Generator().manual_seed(args.seed + rank)
    x = torch.randn(args.batch_size, args.hidden, generator=gen)
    slow = rank == args.straggler

    def step() -> None:
        if slow:
            burn(args.delay_ms)
        loss = model(x).float().pow(2).mean()
        loss.backward()

    truth.update(
        straggler_rank=args.straggler,
        delay_ms=args.delay_ms if args.straggler >= 0 else 0.0,
        groups=[{"name": "dp_shard", "role": "FSDP", "ranks": list(range(args.ranks))}],
    )
    return model, step, None


def setup_moe(rank: int, args: argparse.Namespace, truth: dict) -> tuple[Any, Any, Any]:
    import torch
    import torch.distributed as dist

    n = args.ranks
    torch.manual_seed(args.seed)
    h = args.hidden
    expert = torch.nn.Sequential(
        torch.nn.Linear(h, 2 * h), torch.nn.ReLU(), torch.nn.Linear(2 * h, h)
    )
    share = [(1 - args.hot_share) / (n - 1)] * n
    share[args.hot_rank] = args.hot_share
    counts = [int(args.tokens * s) for s in share]
    counts[args.hot_rank] += args.tokens - sum(counts)  # every token goes somewhere
    gen = torch.Generator().manual_seed(args.seed + rank)
    x = torch.randn(args.tokens, h, generator=gen, requires_grad=False)

    class AllToAll(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: Any, send: list[int], recv: list[int]) -> Any:
            ctx.send, ctx.recv = send, recv
            out = t.new_empty(sum(recv), t.shape[1])
            dist.all_to_all_single(out, t.contiguous(), recv, send)
            return out

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            out = g.new_empty(sum(ctx.send), g.shape[1])
            dist.all_to_all_single(out, g.contiguous(), ctx.send, ctx.recv)
            return out, None, None

    params = list(expert.parameters())

    def step() -> None:
        send = torch.tensor(counts, dtype=torch.int64)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)  # how many tokens each rank will receive
        recv_l = recv.tolist()
        tokens = x.clone().requires_grad_(True)
        got = AllToAll.apply(tokens, counts, recv_l)
        back = AllToAll.apply(expert(got), recv_l, counts)
        loss = back.float().pow(2).mean()
        loss.backward()
        for p in params:
            dist.all_reduce(p.grad)
        for p in params:
            p.grad = None

    everyone = list(range(n))
    truth.update(
        hot_rank=args.hot_rank,
        hot_share=args.hot_share,
        tokens=args.tokens,
        send_counts={str(r): counts for r in everyone},
        groups=[{"name": "default_pg", "role": "EP", "ranks": everyone}],
    )
    return expert, step, None


SETUP = {"mesh2d": setup_mesh2d, "fsdp": setup_fsdp, "moe": setup_moe}


def worker(rank: int, args: argparse.Namespace, port: int) -> None:
    """One rank: the job's training loop under the profiler."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    truth: dict = {}
    model, step, _ = SETUP[args.job](rank, args, truth)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    out_dir = Path(args.out).resolve()

    def one_step() -> None:
        opt.zero_grad(set_to_none=True)
        step()
        opt.step()

    profile_steps(out_dir, rank, args.steps, one_step, WAIT_STEPS, WARMUP_STEPS)
    if rank == 0:
        first = WAIT_STEPS + WARMUP_STEPS
        truth = {
            "job": args.job,
            "world_size": args.ranks,
            "steps": list(range(first, first + args.steps)),
            **truth,
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
    if args.job == "mesh2d" and args.ranks % args.tp:
        print(f"--ranks {args.ranks} is not a multiple of --tp {args.tp}", file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(args, free_port()), nprocs=args.ranks, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
