"""Generate real multi-rank PyTorch profiler (Kineto) traces of a DDP run on gloo, with a straggler.

What it makes
-------------
``--ranks`` CPU processes train a small MLP with ``DistributedDataParallel`` over the gloo backend
(rendezvous on 127.0.0.1, a free port). Every rank profiles itself with
``torch.profiler.profile(activities=[CPU], record_shapes=True,
schedule=schedule(wait=1, warmup=1, active=STEPS))`` and writes into ``--out``:

* ``rank{r}.pt.trace.json.gz``: one trace per rank, written by PyTorch's own C++ exporter
  (``export_chrome_trace``) and gzipped by this script at ``--gzip-level`` (default 6; PyTorch
  itself would use level 9, several times slower on large traces). The metadata holds
  ``distributedInfo`` (``backend "gloo"``, ``rank``, ``world_size``, ``pg_config``). ``traceName``
  is the bare file name, so no machine path ends up in the file.
* ``ground_truth.json``: what was injected (below).

How
---
* Model: ``Linear(1000, H) -> ReLU -> LAYERS x [Linear(H, H) -> ReLU] -> Linear(H, 10)`` with
  ``H = --model-size`` (default 128) and ``LAYERS = --layers`` (default 26): ~0.56 M parameters.
  SGD, MSE loss, ``--batch-size`` (default 64) random samples per rank and step.
* ``DDP(model, bucket_cap_mb=0.25)``: with the defaults the gradients travel in 7 buckets, i.e. 7
  asynchronous gloo all-reduces per step during backward, plus one blocking 1-element
  ``dist.all_reduce`` of the loss after the optimizer step: 8 gloo collectives per step.
  ``collectives_per_step`` and ``bucket_numel`` in the ground truth come from DDP's own bucket
  assignment.
* The straggler rank spends ``--delay-ms`` (default 40 ms) extra per step. ``--mode compute`` spends
  it on extra ``256x256`` matmuls (real ``aten::mm`` events on the main thread), ``--mode sleep``
  in ``time.sleep``. ``--placement backward`` (default) splits the delay evenly over the backward
  pass (a gradient hook on the input of each of the LAYERS + 1 last Linear layers, like a uniformly
  slow device), so the straggler is late for nearly every gradient bucket; ``--placement front``
  spends it in one block before the forward pass (a host stall; the straggler is then late mainly
  for the first buckets of each step). No marker event is added: the straggler must be found from
  the traces (it starts its gloo ops last and has the smallest total gloo time).
* ``--alternate K`` makes the straggler slow only in every other block of K recorded steps, the
  first block clean (K = 1: steps #3, #5, ... are slow): a controlled design in which the clean
  steps of the same run, measured under the same machine conditions, are the reference for what
  the slow steps would take without the straggler (separate runs on a shared machine differ by
  more than the effect of interest). Unrecorded steps are clean.
* ``--pin`` runs rank r (every thread of it) on CPU r mod the number of CPUs. Without it, on a
  host with fewer cores than threads, a rank computes faster while another sleeps and slower
  while another runs extra matmuls: what the straggler does would change the others' speed.
* Steps 0 (wait) and 1 (warm-up; DDP rebuilds its buckets after the first iteration) are not
  recorded, so the traces hold ``ProfilerStep#2`` ... ``ProfilerStep#(STEPS+1)``.
* ``torch.set_num_threads(1)`` in every rank keeps the ranks from fighting over cores.

Ground truth (``ground_truth.json``)
------------------------------------
``world_size``; ``straggler_rank`` (-1 = none); ``mode`` (``compute``/``sleep``, ``none`` without a
straggler); ``steps`` (the recorded ProfilerStep numbers); ``collectives_per_step``;
``bucket_cap_mb``; ``torch_version``; ``generator_args`` (all CLI arguments but ``--out`` and
``--port``); plus ``bucket_numel`` (elements per collective of a step, in issue order, the loss
reduce last), ``n_params``, ``delay_ms``, ``placement`` and ``injected_delay_ms`` (the delay the
straggler actually spent in each recorded step, ms; 0 in the clean steps of ``--alternate``);
``alternate`` (K, 0 without) and ``delayed_steps`` (the ProfilerStep numbers with a delay).
``host_load_1min`` and ``host_cpus``: the host's 1-minute load average when the run started and
its number of CPUs (ranks share the cores with whatever else runs), and the niceness the
ranks ran at (e.g. ``nice -n -10 python generate_gloo.py ...`` gives them precedence over
other jobs on a shared host); ``pinned`` (``--pin``: rank r ran on CPU r mod the CPUs).

Only this script imports torch. Run it with a Python that has torch (tested with 2.13.0+cpu), e.g.
from this folder::

    python generate_gloo.py --out gloo_4rank_compute --mode compute --straggler 2
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUCKET_CAP_MB = 0.25
WAIT_STEPS = 1
WARMUP_STEPS = 1
IN_FEATURES = 1000
OUT_FEATURES = 10
EXTRA_MATMUL_DIM = 256


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(
        description="Generate per-rank Kineto traces of a gloo DDP run with an injected straggler.",
    )
    p.add_argument("--out", required=True, type=Path, help="output directory (created if missing)")
    p.add_argument("--ranks", type=int, default=4, help="number of processes (world size)")
    p.add_argument(
        "--steps", type=int, default=6, help="number of active (recorded) profiler steps"
    )
    p.add_argument(
        "--straggler",
        type=int,
        default=None,
        help="rank that is made slow; -1 for none (default 2, or the last rank if --ranks < 3)",
    )
    p.add_argument(
        "--mode",
        choices=("compute", "sleep"),
        default="compute",
        help="straggler delay: extra matmuls (compute) or time.sleep (sleep)",
    )
    p.add_argument("--delay-ms", type=float, default=40.0, help="delay per step on the straggler")
    p.add_argument(
        "--placement",
        choices=("backward", "front"),
        default="backward",
        help="backward: delay split evenly over the backward pass (one chunk per hidden "
        "activation, like a uniformly slow device); front: one block before the forward pass",
    )
    p.add_argument(
        "--alternate",
        type=int,
        default=0,
        metavar="K",
        help="delay only every other block of K recorded steps, the first block clean (0: every "
        "step); the clean steps of the same run are the reference for the slow ones",
    )
    p.add_argument(
        "--pin",
        action="store_true",
        help="pin rank r (all its threads) to CPU r mod the number of CPUs: with one CPU per "
        "rank, what one rank does (extra compute, sleeping) no longer speeds up or slows down "
        "the others",
    )
    p.add_argument(
        "--pair",
        action="store_true",
        help="make a counterfactual pair: the run with --straggler into OUT/straggler, then the "
        "same job without a straggler into OUT/baseline, back to back",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for weights and data")
    p.add_argument("--model-size", type=int, default=128, help="hidden width H of the MLP")
    p.add_argument("--layers", type=int, default=26, help="number of hidden HxH layers")
    p.add_argument("--batch-size", type=int, default=64, help="per-rank batch size")
    p.add_argument(
        "--bucket-mb",
        type=float,
        default=BUCKET_CAP_MB,
        help="DDP bucket_cap_mb (default %(default)s); a tiny cap (0.001) gives one bucket per "
        "parameter tensor, so one run spans message sizes from tens of bytes to the largest "
        "weight",
    )
    p.add_argument("--gzip-level", type=int, default=6, help="gzip level of the output (1-9)")
    p.add_argument(
        "--port", type=int, default=0, help="rendezvous port on 127.0.0.1; 0 = free port"
    )
    args = p.parse_args(argv)
    if args.ranks < 1:
        p.error("--ranks must be >= 1")
    if args.steps < 1:
        p.error("--steps must be >= 1")
    if args.straggler is None:
        args.straggler = min(2, args.ranks - 1) if args.ranks > 1 else -1
    if not -1 <= args.straggler < args.ranks:
        p.error("--straggler must be -1 or a rank in [0, ranks)")
    if args.alternate < 0:
        p.error("--alternate must be >= 0")
    if not 1 <= args.gzip_level <= 9:
        p.error("--gzip-level must be in 1..9")
    return args


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gzip_file(src: Path, dst: Path, level: int) -> None:
    """Stream-compress ``src`` into ``dst`` (mtime 0, so equal input gives equal bytes)."""
    with open(src, "rb") as fin, open(dst, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=level, fileobj=raw, mtime=0) as gz:
            shutil.copyfileobj(fin, gz, 1 << 20)


def trace_writer(out_dir: Path, rank: int, level: int = 6) -> Callable[[Any], None]:
    """torch.profiler's `on_trace_ready`: the trace as `rank<R>.pt.trace.json.gz` in `out_dir`,
    exported under a bare relative name so that its traceName holds no machine path."""
    raw = f"rank{rank}.pt.trace.json"

    def on_trace_ready(prof: Any) -> None:
        cwd = os.getcwd()
        os.chdir(out_dir)
        try:
            prof.export_chrome_trace(raw)
        finally:
            os.chdir(cwd)
        gzip_file(out_dir / raw, out_dir / f"{raw}.gz", level)
        (out_dir / raw).unlink()

    return on_trace_ready


def profile_steps(
    out_dir: Path, rank: int, steps: int, one_step: Callable[[], None], wait: int, warmup: int
) -> None:
    """Run `one_step` wait + warmup + `steps` times under torch.profiler (CPU activity, shapes
    recorded), every rank starting together, the last `steps` profiled and written by
    trace_writer."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    sched = schedule(wait=wait, warmup=warmup, active=steps, repeat=1)
    dist.barrier()
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=sched,
        on_trace_ready=trace_writer(out_dir, rank),
    ) as prof:
        for _ in range(wait + warmup + steps):
            one_step()
            prof.step()


def build_model(hidden: int, layers: int) -> Any:
    """The MLP: Linear(1000, H), ReLU, ``layers`` x (Linear(H, H), ReLU), Linear(H, 10).

    ``model.delay_hook`` (default ``None``) is called on the input of every Linear but the first;
    the straggler rank sets it to register a backward hook that injects its per-layer delay.
    """
    import torch.nn as nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(IN_FEATURES, hidden)
            self.hidden = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
            self.out = nn.Linear(hidden, OUT_FEATURES)
            self.delay_hook: Callable[[Any], None] | None = None

        def forward(self, x: Any) -> Any:
            h = self.inp(x).relu()
            for lin in self.hidden:
                if self.delay_hook is not None:
                    self.delay_hook(h)
                h = lin(h).relu()
            if self.delay_hook is not None:
                self.delay_hook(h)
            return self.out(h)

    return MLP()


def is_delayed(step: int, alternate: int) -> bool:
    """Whether the straggler is slow in (0-based, recorded or not) step ``step``: every step
    without ``--alternate``; else every other block of ``alternate`` recorded steps, the first
    block clean, and no unrecorded step."""
    idx = step - (WAIT_STEPS + WARMUP_STEPS)
    if alternate <= 0:
        return True
    return idx >= 0 and (idx // alternate) % 2 == 1


def inject_delay(mode: str, delay_s: float, a: Any, b: Any) -> float:
    """Spend ``delay_s`` seconds (extra matmuls or sleep); return the seconds actually spent."""
    import torch

    t0 = time.perf_counter()
    if mode == "sleep":
        time.sleep(delay_s)
    else:
        with torch.no_grad():
            while time.perf_counter() - t0 < delay_s:
                torch.mm(a, b)
    return time.perf_counter() - t0


def worker(rank: int, args: argparse.Namespace, port: int, result_dir: str) -> None:
    """One rank: DDP training loop under the profiler; writes ``rank{rank}.pt.trace.json.gz``."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if args.pin:  # before any thread starts, so that every thread of the rank inherits it
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)

    torch.manual_seed(args.seed)
    model = build_model(args.model_size, args.layers)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()

    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    n_batches = 4
    xs = [torch.randn(args.batch_size, IN_FEATURES, generator=gen) for _ in range(n_batches)]
    ys = [torch.randn(args.batch_size, OUT_FEATURES, generator=gen) for _ in range(n_batches)]
    mm_a = torch.randn(EXTRA_MATMUL_DIM, EXTRA_MATMUL_DIM, generator=gen)
    mm_b = torch.randn(EXTRA_MATMUL_DIM, EXTRA_MATMUL_DIM, generator=gen)

    out_dir = Path(args.out).resolve()
    on_trace_ready = trace_writer(out_dir, rank, args.gzip_level)

    is_straggler = rank == args.straggler
    # Delay bookkeeping for the current step: seconds spent, hook calls so far.
    state = {"spent": 0.0, "calls": 0, "on": True}
    if is_straggler and args.placement == "backward":
        chunk_s = args.delay_ms / 1000.0 / (args.layers + 1)

        def on_grad(grad: Any) -> None:
            # Aim at the cumulative budget so that overshoot of one chunk shortens the next.
            if not state["on"]:
                return
            state["calls"] += 1
            owed = chunk_s * state["calls"] - state["spent"]
            if owed > 0:
                state["spent"] += inject_delay(args.mode, owed, mm_a, mm_b)

        def delay_hook(h: Any) -> None:
            if h.requires_grad:
                h.register_hook(on_grad)

        model.delay_hook = delay_hook

    injected: list[float] = []
    first = WAIT_STEPS + WARMUP_STEPS
    sched = schedule(wait=WAIT_STEPS, warmup=WARMUP_STEPS, active=args.steps, repeat=1)
    dist.barrier()
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=sched,
        on_trace_ready=on_trace_ready,
    ) as prof:
        for step in range(first + args.steps):
            state["spent"], state["calls"] = 0.0, 0
            state["on"] = is_delayed(step, args.alternate)
            if is_straggler and state["on"] and args.placement == "front":
                state["spent"] += inject_delay(args.mode, args.delay_ms / 1000.0, mm_a, mm_b)
            x, y = xs[step % n_batches], ys[step % n_batches]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)  # blocking 1-element collective
            if is_straggler and step >= first:
                injected.append(round(state["spent"] * 1000.0, 3))
            prof.step()

    info: dict[str, Any] = {"rank": rank, "injected_delay_ms": injected}
    if rank == 0:
        data = ddp._get_ddp_logging_data()
        sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
        info["bucket_bytes"] = [int(s) for s in str(sizes).split(",") if s.strip()]
        info["n_params"] = sum(p.numel() for p in model.parameters())
    Path(result_dir, f"rank{rank}.json").write_text(json.dumps(info))
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """Spawn the ranks, then write ``ground_truth.json`` (with ``--pair``: the run with its
    straggler into ``OUT/straggler``, then at once the same job without one into
    ``OUT/baseline``)."""
    args = parse_args(argv)
    if args.pair:
        if args.straggler < 0:
            raise SystemExit("--pair needs a straggler rank")
        out = args.out
        for sub, straggler in (("straggler", args.straggler), ("baseline", -1)):
            args.out, args.straggler, args.pair = out / sub, straggler, False
            run_once(args)
        return 0
    return run_once(args)


def run_once(args: argparse.Namespace) -> int:
    """One run of the job described by ``args``."""
    import tempfile

    import torch
    import torch.multiprocessing as mp

    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("rank*.pt.trace.json*"):
        old.unlink()
    port = args.port or free_port()
    load_1min = os.getloadavg()[0]  # how busy the host was when the run started
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as result_dir:
        mp.spawn(worker, args=(args, port, result_dir), nprocs=args.ranks, join=True)
        infos = {
            int(p.stem.removeprefix("rank")): json.loads(p.read_text())
            for p in Path(result_dir).glob("rank*.json")
        }
    elapsed = time.perf_counter() - t0

    bucket_bytes = infos[0].get("bucket_bytes", [])
    first = WAIT_STEPS + WARMUP_STEPS
    gen_args = {k: v for k, v in vars(args).items() if k not in ("out", "port", "pair")}
    steps = list(range(first, first + args.steps))
    truth = {
        "world_size": args.ranks,
        "straggler_rank": args.straggler,
        "mode": args.mode if args.straggler >= 0 else "none",
        "steps": steps,
        "collectives_per_step": len(bucket_bytes) + 1,
        "bucket_cap_mb": args.bucket_mb,
        "torch_version": torch.__version__,
        "generator_args": gen_args,
        "bucket_numel": [b // 4 for b in bucket_bytes] + [1],
        "n_params": infos[0].get("n_params"),
        "delay_ms": args.delay_ms if args.straggler >= 0 else 0.0,
        "placement": args.placement,
        "injected_delay_ms": (
            infos[args.straggler]["injected_delay_ms"] if args.straggler >= 0 else []
        ),
        "host_load_1min": round(load_1min, 2),
        "host_cpus": os.cpu_count(),
        "niceness": os.nice(0),
        "pinned": args.pin,
        "alternate": args.alternate,
        "delayed_steps": (
            [s for s in steps if is_delayed(s, args.alternate)] if args.straggler >= 0 else []
        ),
    }
    (args.out / "ground_truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    sizes = {p.name: p.stat().st_size for p in sorted(args.out.glob("rank*.pt.trace.json.gz"))}
    print(f"wrote {len(sizes)} traces ({sum(sizes.values()) / 1e6:.2f} MB) in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
