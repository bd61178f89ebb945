"""Generate real Kineto traces of a gloo all-reduce size sweep: the model's clean calibration set.

DDP runs on a 2-core machine (sample_traces/gloo_*) overlap their all-reduces with backward
compute and with each other (gloo runs async work on two threads), so their transfer times are
mostly CPU scheduling, not message size. This sweep isolates the collective: ``--ranks``
processes on 127.0.0.1 run, in every round, one blocking ``dist.all_reduce`` of each size of
``--sizes`` (float32 elements) in a seeded random order, each after a ``dist.barrier()`` so that
the ranks arrive together; no compute runs beside them. Each round is one profiler step
(``ProfilerStep#r``), so held-out splits can keep a round together.

Output in ``--out``: ``rank{r}.pt.trace.json.gz`` (PyTorch's own exporter, CPU activities,
``record_shapes``; ``traceName`` is the bare file name) and ``ground_truth.json``: world_size,
rounds, ``order`` (per round, the element counts in issue order), ``bytes`` (element count x 4),
torch_version and the generator's arguments. Only this script imports torch; run it with a
Python that has it, from the repository root::

    .venv-torch/bin/python benchmarks/gloo_sweep.py --out tests/data/model/gloo_sweep_2rank
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sample_traces"))
from generate_gloo import free_port, gzip_file  # noqa: E402

#: float32 elements per all-reduce: 4 B to 16 MiB, about two sizes per decade.
SIZES = (1, 16, 256, 2048, 8192, 32768, 131072, 524288, 1048576, 2097152, 4194304)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gzip-level", type=int, default=9)
    return p.parse_args(argv)


def orders(args: argparse.Namespace) -> list[list[int]]:
    """The element counts of every round, in issue order (a seeded shuffle per round)."""
    import random

    rng = random.Random(args.seed)
    out = []
    for _ in range(args.rounds):
        sizes = list(args.sizes)
        rng.shuffle(sizes)
        out.append(sizes)
    return out


def worker(rank: int, args: argparse.Namespace, port: int) -> None:
    """One rank: the sweep under the profiler; writes ``rank{rank}.pt.trace.json.gz``."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    tensors = {n: torch.ones(n) for n in args.sizes}
    for n in args.sizes:  # warm-up: gloo's first call of a size sets up its buffers
        dist.all_reduce(tensors[n])
    out_dir = args.out.resolve()
    raw_name = f"rank{rank}.pt.trace.json"

    def on_trace_ready(prof: Any) -> None:
        with contextlib.chdir(out_dir):  # a bare file name: no machine path in traceName
            prof.export_chrome_trace(raw_name)
            gzip_file(Path(raw_name), Path(raw_name + ".gz"), args.gzip_level)
            os.remove(raw_name)

    sched = schedule(wait=0, warmup=1, active=args.rounds, repeat=1)
    cpu = {"activities": [ProfilerActivity.CPU], "record_shapes": True}
    with profile(schedule=sched, on_trace_ready=on_trace_ready, **cpu) as prof:
        for sizes in [[], *orders(args)]:  # the first (empty) step is the profiler's warm-up
            for n in sizes:
                dist.barrier()
                dist.all_reduce(tensors[n])
            dist.barrier()
            prof.step()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """Spawn the ranks, then write ``ground_truth.json``."""
    import torch
    import torch.multiprocessing as mp

    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    mp.spawn(worker, args=(args, free_port()), nprocs=args.ranks, join=True)
    order = orders(args)
    truth = {
        "world_size": args.ranks,
        "rounds": args.rounds,
        "order": order,
        "bytes": [[4 * n for n in r] for r in order],
        "torch_version": torch.__version__,
        "generator_args": {k: v for k, v in vars(args).items() if k != "out"},
    }
    (args.out / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
