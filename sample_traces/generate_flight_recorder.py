"""Generate real PyTorch Flight Recorder dumps of hung gloo jobs, each with one known cause.

What it makes
-------------
``--ranks`` CPU processes join a gloo process group (rendezvous on 127.0.0.1, a free port) with a
short timeout (``--timeout-s``, default 3 s) and run ``--good`` (default 5) blocking
``all_reduce`` calls of ``--numel`` (default 1024) float elements, so that collective sequence
ids 1 .. good complete on every rank. Then every rank but the culprit calls ``all_gather`` (seq
good + 1) and the culprit (``--culprit``, default 1) does what ``--fault`` says:

* ``skip``: it never enters the collective (it sleeps past the timeout);
* ``op``: it calls ``all_reduce`` instead of ``all_gather``;
* ``size``: it calls ``all_gather`` with twice as many elements;
* ``dtype``: it calls ``all_gather`` with float64 tensors instead of float32.

For ``size`` and ``dtype`` the culprit enters ``timeout + 1.5`` s late: in gloo, data of the
wrong size arriving at a peer aborts the peer's process before it can dump, so the others must
have timed out (and dumped) first. The dumps still hold the mismatched call on the culprit.

The gloo timeout ends the collective on the ranks that entered it (a ``RuntimeError``, caught),
and every rank then dumps its Flight Recorder buffer (``TORCH_FR_BUFFER_SIZE`` = 2000) with
PyTorch's own serialisers, written into ``--out``:

* ``rank{r}.json.gz``: ``torch._C._distributed_c10d._dump_fr_trace_json(True, False)``, gzipped;
* with ``--pickle-out DIR``: ``rank{r}.pkl.gz`` in DIR, ``_dump_fr_trace(True, False, False)`` of
  the same buffer at the same moment (no stack traces, so no file path ends up in a dump);
* with ``--kineto``: ``rank{r}.pt.trace.json.gz`` beside the JSON dumps, a PyTorch profiler
  trace (CPU, ``record_shapes=True``) of the whole job, exported after the hang;
* ``ground_truth.json``: what was injected (below).

Before anything is kept, the script checks the dumps themselves: every rank has the ``good``
all-reduces (seq 1 .. good, same size), the healthy ranks record ``all_gather`` at seq good + 1,
and the culprit records nothing there (``skip``) or the injected op, size or dtype. A run whose
dumps do not show the injected fault is an error, and nothing is written.

Ground truth (``ground_truth.json``)
------------------------------------
``world_size``, ``fault``, ``culprit_rank``, ``hang_seq`` (the collective seq id of the fault),
``expected_op`` (``all_gather``), ``culprit_op`` (what the culprit recorded there, ``null`` for
``skip``), ``expected_numel``/``culprit_numel`` (elements per rank of the input), ``expected_dtype``
/``culprit_dtype``, ``last_good_seq`` and ``last_good_op``, ``timeout_s``, ``torch_version``,
``fr_version`` (the dump's ``version``) and ``generator_args``.

Only this script imports torch. Run it with a Python that has torch (tested with 2.13.0+cpu), e.g.
from the repository root::

    .venv-torch/bin/python sample_traces/generate_flight_recorder.py --fault skip \
        --out sample_traces/fr_skip
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FAULTS = ("skip", "op", "size", "dtype")
BUFFER_SIZE = "2000"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description="Generate Flight Recorder dumps of a hung gloo job.")
    p.add_argument("--out", required=True, type=Path, help="directory for the JSON dumps")
    p.add_argument("--pickle-out", type=Path, help="directory for pickle dumps of the same run")
    p.add_argument("--fault", choices=FAULTS, required=True)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--culprit", type=int, default=1)
    p.add_argument("--good", type=int, default=5, help="all-reduces before the fault")
    p.add_argument("--numel", type=int, default=1024)
    p.add_argument("--timeout-s", type=float, default=3.0)
    p.add_argument("--kineto", action="store_true", help="also write profiler traces")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (0: a free one)")
    a = p.parse_args(argv)
    if not 0 <= a.culprit < a.ranks:
        p.error("--culprit must be a rank")
    if a.good < 1:  # the ground truth names the last good all-reduce, and the dumps' check too
        p.error("--good must be at least 1")
    return a


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fault_call(args: argparse.Namespace, rank: int) -> tuple[str | None, int, str]:
    """(op, elements per rank, dtype name) this rank calls at the fault's seq id."""
    if rank != args.culprit or args.fault in ("skip",):
        op = None if rank == args.culprit else "all_gather"
        return op, args.numel, "float32"
    if args.fault == "op":
        return "all_reduce", args.numel, "float32"
    if args.fault == "size":
        return "all_gather", 2 * args.numel, "float32"
    return "all_gather", args.numel, "float64"


def _worker(rank: int, args: argparse.Namespace, port: int, tmp: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=args.timeout_s)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks, timeout=timeout)
    prof = None
    if args.kineto:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        prof.__enter__()
    x = torch.ones(args.numel)
    for _ in range(args.good):
        dist.all_reduce(x)
    op, numel, dtype = _fault_call(args, rank)
    if op is None:
        time.sleep(args.timeout_s * 2 + 2)  # never enters: the others time out meanwhile
    else:
        if rank == args.culprit and args.fault in ("size", "dtype"):
            # Data of the wrong size reaching a peer aborts that peer's process in gloo (no
            # dump): the culprit enters once the others have timed out and dumped.
            time.sleep(args.timeout_s + 1.5)
        t = torch.ones(numel, dtype=getattr(torch, dtype))
        try:
            if op == "all_reduce":
                dist.all_reduce(t)
            else:
                dist.all_gather([torch.zeros_like(t) for _ in range(args.ranks)], t)
        except RuntimeError as e:
            print(f"rank {rank}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
    c10d = torch._C._distributed_c10d
    Path(tmp, f"rank{rank}.json").write_bytes(c10d._dump_fr_trace_json(True, False))
    Path(tmp, f"rank{rank}.pkl").write_bytes(c10d._dump_fr_trace(True, False, False))
    if prof is not None:
        prof.__exit__(None, None, None)
        os.chdir(tmp)  # a bare file name, so the trace's traceName holds no machine path
        prof.export_chrome_trace(f"rank{rank}.pt.trace.json")
    os._exit(0)  # the process group is broken: skip its teardown


def _numel(sizes: list) -> int:
    n = 1
    for d in sizes[0]:
        n *= d
    return n


def check(args: argparse.Namespace, dumps: dict[int, dict]) -> dict[str, Any]:
    """Verify from the dumps that the injected fault is what they show; the fault's facts."""
    hang = args.good + 1
    dtype_names = {"float32": "Float", "float64": "Double"}
    for r in range(args.ranks):
        by_seq = {e["collective_seq_id"]: e for e in dumps[r]["entries"]}
        for s in range(1, args.good + 1):
            e = by_seq.get(s)
            if e is None or e["profiling_name"] != "gloo:all_reduce":
                raise SystemExit(f"rank {r}: seq {s} is not the expected all_reduce")
            if _numel(e["input_sizes"]) != args.numel:
                raise SystemExit(f"rank {r}: seq {s} has the wrong size")
        op, numel, dtype = _fault_call(args, r)
        e = by_seq.get(hang)
        if op is None:
            if e is not None:
                raise SystemExit(f"rank {r}: skipped seq {hang} but the dump records it")
            continue
        if e is None or e["profiling_name"] != f"gloo:{op}":
            raise SystemExit(f"rank {r}: seq {hang} is not {op} in the dump")
        if _numel(e["input_sizes"]) != numel or e["input_dtypes"][0] != dtype_names[dtype]:
            raise SystemExit(f"rank {r}: seq {hang} size or dtype differ from what was called")
        if max(by_seq) != hang:
            raise SystemExit(f"rank {r}: the dump records collectives after seq {hang}")
    op, numel, dtype = _fault_call(args, args.culprit)
    return {
        "culprit_op": op,
        "culprit_numel": numel,
        "culprit_dtype": dtype if op else None,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the job, check its dumps, write them and the ground truth."""
    args = parse_args(argv)
    os.environ["TORCH_FR_BUFFER_SIZE"] = BUFFER_SIZE
    import torch
    import torch.multiprocessing as mp

    port = args.port or _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.start_processes(
            _worker, args=(args, port, tmp), nprocs=args.ranks, join=False, start_method="spawn"
        )
        for proc in ctx.processes:  # a rank that dies after dumping does not stop the others
            proc.join()
        lost = [r for r in range(args.ranks) if not Path(tmp, f"rank{r}.json").exists()]
        if lost:
            raise SystemExit(f"no dump from rank(s) {lost}: nothing written")
        dumps = {r: json.loads(Path(tmp, f"rank{r}.json").read_bytes()) for r in range(args.ranks)}
        facts = check(args, dumps)
        args.out.mkdir(parents=True, exist_ok=True)
        outs = [(args.out, "json", "json")]
        if args.pickle_out:
            args.pickle_out.mkdir(parents=True, exist_ok=True)
            outs.append((args.pickle_out, "pkl", "pkl"))
        if args.kineto:
            outs.append((args.out, "pt.trace.json", "pt.trace.json"))
        for r in range(args.ranks):
            for folder, src, dst in outs:
                with open(Path(tmp, f"rank{r}.{src}"), "rb") as f:
                    with gzip.open(folder / f"rank{r}.{dst}.gz", "wb", compresslevel=9) as g:
                        shutil.copyfileobj(f, g)
    truth = {
        "world_size": args.ranks,
        "fault": args.fault,
        "culprit_rank": args.culprit,
        "hang_seq": args.good + 1,
        "expected_op": "all_gather",
        "expected_numel": args.numel,
        "expected_dtype": "float32",
        **facts,
        "last_good_seq": args.good,
        "last_good_op": "all_reduce",
        "timeout_s": args.timeout_s,
        "torch_version": torch.__version__,
        "fr_version": dumps[0]["version"],
        "generator_args": {
            k: v for k, v in vars(args).items() if k not in ("out", "pickle_out", "port")
        },
    }
    for folder in {args.out, args.pickle_out} - {None}:
        (folder / "ground_truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    print(json.dumps(truth, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
