"""`commwall capture` around real 2-rank gloo jobs started by torchrun, with
`commwall.capture.profile` in the training script (needs torch; CPU only).

* straggler: rank 1 computes 30 ms more before each step's forward pass (matmuls); the
  directory ingests whole, the trace shows rank 1's extra operator time (read by plain
  Python), and the report names rank 1 as the straggler.
* hang: rank 1 skips the all_reduce of step 3 (collective seq 4) and stalls; gloo's 4 s timeout
  ends rank 0's wait, and both ranks leave Flight Recorder dumps (rank 1's from the helper's
  stall watchdog, rank 0's when the timeout's exception leaves the helper) that `commwall hang`
  reads as "rank 1 never entered seq 4".
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commwall.cli.main import main

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

#: The training script: `job.py straggler|hang CULPRIT`.
JOB = """
import datetime, os, sys, time
import torch
import torch.distributed as dist
import commwall.capture

mode, culprit = sys.argv[1], int(sys.argv[2])
timeout = datetime.timedelta(seconds=float(os.environ.get("JOB_TIMEOUT_S", "60")))
dist.init_process_group("gloo", timeout=timeout)
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
if mode == "straggler":
    model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(6)])
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(32, 128)
    with commwall.capture.profile(steps=range(STEPS[0], STEPS[1] + 1)) as prof:
        for step in range(STEPS[1] + 2):
            if rank == culprit:  # the injected compute straggler
                a = torch.randn(256, 256)
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < EXTRA_S:
                    a = torch.tanh(a @ a)
            loss = ddp(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    dist.destroy_process_group()
else:
    t = torch.ones(1024)
    with commwall.capture.profile(steps=range(1, 3)) as prof:
        for step in range(6):
            if step == SKIPPED_STEP and rank == culprit:
                time.sleep(20)  # skips this step's all_reduce and stalls
                os._exit(0)
            dist.all_reduce(t)
            prof.step()
"""
STEPS = (2, 5)
EXTRA_S = 0.03
SKIPPED_STEP = 3  # its all_reduce is collective seq 4 (seq counts from 1)
CULPRIT = 1


def capture(tmp_path: Path, mode: str, *options: str) -> tuple[int, Path]:
    """Run the job under `commwall capture` with torchrun (2 processes); (status, run dir)."""
    script = tmp_path / "job.py"
    script.write_text(
        f"STEPS = {STEPS}\nEXTRA_S = {EXTRA_S}\nSKIPPED_STEP = {SKIPPED_STEP}\n" + JOB
    )
    out = tmp_path / mode
    env = {**os.environ, "JOB_TIMEOUT_S": "4", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "commwall", "capture", "--out", str(out), *options, "--",
           sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", str(script), mode, str(CULPRIT)]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, out


def operator_ms(trace_path: Path, names: set[str]) -> float:
    """Total duration (ms) of the CPU operators `names` inside the trace's ProfilerStep
    windows, summed by plain Python from the trace file."""
    events = json.loads(gzip.decompress(trace_path.read_bytes()))["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    total = 0.0
    for e in events:
        if e.get("ph") == "X" and e.get("name") in names:
            if any(s["ts"] <= e["ts"] < s["ts"] + s["dur"] for s in steps):
                total += e["dur"]
    return total / 1e3


def test_a_straggler_job_is_captured_whole_and_diagnosed(tmp_path, capsys):
    status, out = capture(tmp_path, "straggler")
    assert status == 0
    traces = {r: out / "kineto" / f"rank{r}.pt.trace.json.gz" for r in (0, 1)}
    for r, path in traces.items():
        trace = json.loads(gzip.decompress(path.read_bytes()))
        assert trace["distributedInfo"]["rank"] == r
        assert trace["distributedInfo"]["world_size"] == 2
        steps = sorted(
            int(e["name"].split("#")[1])
            for e in trace["traceEvents"]
            if str(e.get("name", "")).startswith("ProfilerStep#")
        )
        assert steps == list(range(STEPS[0], STEPS[1] + 1))  # the same steps on every rank
        info = json.loads((out / "ranks" / f"rank{r}.json").read_text())
        assert (info["rank"], info["world_size"], info["backend"]) == (r, 2, "gloo")
    # the injected work is in rank 1's trace: ≥ half of 30 ms × 4 steps more matmul and tanh
    extra = {
        r: operator_ms(p, {"aten::mm", "aten::matmul", "aten::tanh"}) for r, p in traces.items()
    }
    assert extra[1] - extra[0] > 0.5 * EXTRA_S * 1e3 * (STEPS[1] - STEPS[0] + 1)
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(out), "--db", str(db), "--run", "job", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "run 'job': 2 file(s) ingested, 0 already present, 0 failed; ranks [0, 1]" in err
    assert "run 'job': capture complete: traces from all 2 ranks, steps 2-5" in err
    assert main(["report", "--db", str(db), "--run", "job", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stragglers"]["flagged"] == [CULPRIT]
    assert report["run_info"]["capture"] == "complete: traces from all 2 ranks, steps 2-5"
    assert f"Rank {CULPRIT}" in report["diagnosis"]["answer"]


def test_a_hung_job_leaves_dumps_that_name_the_rank_that_skipped(tmp_path, capsys):
    status, out = capture(tmp_path, "hang", "--hang-dump", "2")
    assert status != 0  # rank 0's collective timed out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["exit_status"] == status
    seqs = {}
    for r in (0, 1):
        dump = json.loads((out / "fr" / f"rank_{r}.json").read_text())
        seqs[r] = [e["collective_seq_id"] for e in dump["entries"]]
    # rank 0 entered seq SKIPPED_STEP + 1, rank 1 stopped before it
    assert seqs == {0: list(range(1, SKIPPED_STEP + 2)), 1: list(range(1, SKIPPED_STEP + 1))}
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(out), "--db", str(db), "--run", "hung", "--quiet"]) == 0
    assert f"capture incomplete: the job exited with status {status}" in capsys.readouterr().err
    assert main(["hang", "--db", str(db), "--run", "hung", "--format", "json"]) == 0
    hang = json.loads(capsys.readouterr().out)
    (group,) = hang["groups"]
    assert group["cause"]["kind"] == "missing"
    assert group["cause"]["seq"] == SKIPPED_STEP + 1
    assert group["cause"]["culprit_ranks"] == [CULPRIT]
    assert f"rank {CULPRIT} never entered it" in hang["verdict"]
