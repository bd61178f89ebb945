"""Generate real Kineto traces of a tensor-parallel MLP on gloo (CPU), whose ranks wait for each
other's all-reduces on the program's own thread.

What it makes
-------------
``--ranks`` CPU processes (default 2) build a one-dimensional device mesh over gloo and train an
MLP of ``--layers`` blocks ``Linear(H, 4H) -> ReLU -> Linear(4H, H)`` (``H = --hidden``), each block
split with ``torch.distributed.tensor.parallel``: the first Linear column-wise, the second
row-wise (``ColwiseParallel`` / ``RowwiseParallel``, Megatron-LM's MLP split). Each block's
forward ends in an all-reduce of its output and its backward in an all-reduce of its input's
gradient: functional collectives (``_c10d_functional::all_reduce``), which the program then waits
for on its own thread (``_c10d_functional::wait_tensor``) while gloo runs the transfer on its
worker thread (``gloo:all_reduce``). Every rank profiles ``--steps`` steps
(``schedule(wait=1, warmup=1, active=STEPS)``) and writes ``rank{r}.pt.trace.json.gz`` and, on
rank 0, ``ground_truth.json``:

* ``world_size``, ``tp_size`` (= world size), ``layers``, ``hidden``, ``steps`` (the recorded
  ProfilerStep numbers), ``allreduces_per_step`` (2 x layers - 1: one forward and one backward
  per block, but the first block's input needs no gradient), ``torch_version``,
  ``generator_args``.

What the trace says (the wait on the main thread, the transfers, the compute) is read from the
traces themselves by the tests, not from here: timings differ on every run.

Only this script imports torch. Run it with a Python that has torch (tested with 2.13.0+cpu)::

    python sample_traces/generate_tp.py --out sample_traces/gloo_2rank_tp --ranks 2
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate_gloo import profile_steps  # noqa: E402 (the same profiling and gzip writer)

WAIT_STEPS, WARMUP_STEPS = 1, 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (must not exist)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker(rank: int, args: argparse.Namespace, port: int) -> None:
    """One rank: the tensor-parallel MLP's training loop under the profiler."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    mesh = init_device_mesh("cpu", (args.ranks,), mesh_dim_names=("tp",))

    torch.manual_seed(args.seed)  # the same weights on every rank before they are split
    h = args.hidden
    blocks = []
    for _ in range(args.layers):
        nn = torch.nn
        block = nn.Sequential(nn.Linear(h, 4 * h), nn.ReLU(), nn.Linear(4 * h, h))
        parallelize_module(block, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        blocks.append(block)
    model = torch.nn.Sequential(*blocks)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(args.seed)  # the same input on every rank (TP)
    x = torch.randn(args.batch_size, h, generator=gen)

    out_dir = Path(args.out).resolve()

    def one_step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    profile_steps(out_dir, rank, args.steps, one_step, WAIT_STEPS, WARMUP_STEPS)
    if rank == 0:
        first = WAIT_STEPS + WARMUP_STEPS
        truth = {
            "world_size": args.ranks,
            "tp_size": args.ranks,
            "layers": args.layers,
            "hidden": args.hidden,
            "steps": list(range(first, first + args.steps)),
            # one forward and one backward all-reduce per block, but for the first block's
            # backward: its input (the batch) needs no gradient
            "allreduces_per_step": 2 * args.layers - 1,
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
    out.mkdir(parents=True)
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(args, free_port()), nprocs=args.ranks, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
