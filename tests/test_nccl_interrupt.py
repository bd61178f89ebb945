"""A launcher stopping the job from outside is said, on the real nccl-tests log 013 (4 nodes of
RTX 3090 under MPICH's Hydra; tests/data/nccl/013*, notice beside it), and its line shapes are
read (table below).

Read from the raw log: line 1376 `[mpiexec@oneflow-27] Sending Ctrl-C to processes as requested`
follows the 2048-byte run's device list with no NCCL line after it; line 1750 says the same
after all 32 ranks logged the 8192-byte AllReduce (opCount 0) and no result row. The report
said 0 errors, 0 timeouts and nothing of either."""

from __future__ import annotations

import gzip

import pytest
from conftest import DATA, analysis_store

from commwall.analysis.report.build import build_report
from commwall.ingest.formats.nccl_log.torch_lines import classify

(LOG,) = (DATA / "nccl").glob("013_*.log.gz")
CTRL_C = "[mpiexec@oneflow-27] Sending Ctrl-C to processes as requested"


def test_the_launchers_interrupts_are_reported(tmp_path):
    lines = gzip.decompress(LOG.read_bytes()).decode().splitlines()
    at = [i + 1 for i, s in enumerate(lines) if s == CTRL_C]
    assert at == [1376, 1750]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / LOG.name).write_bytes(LOG.read_bytes())
    con = analysis_store(tmp_path / "s.duckdb", (tmp_path / "d",))
    rep = build_report(con, "d", keep_going=False)
    con.close()
    got = rep["nccl"]["interrupted"]
    assert got["count"] == 2 and [x["line"] for x in got["lines"]] == at
    assert all(x["text"] == CTRL_C for x in got["lines"])
    assert rep["nccl"]["findings"][0].startswith("a launcher stopped the job from outside")
    assert (
        "a launcher stopped the job from outside (2 line(s): 1376, 1750; first: "
        in (rep["diagnosis"]["paragraph"])
    )


def test_after_a_failure_the_stop_comes_second(tmp_path):
    # a rank that died, then Slurm cancelling the step: the stop is as likely srun ending the
    # other tasks as anyone stopping the job, so the death is said first
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "job.log").write_text(
        "n1:100:100 [3] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "n1:100:100 [3] NCCL INFO comm 0x1 rank 3 nranks 4 cudaDev 3 busId 1000 - Init COMPLETE\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "slurmstepd: error: *** STEP 5.0 ON n1 CANCELLED AT 2025-01-01T00:00:00 ***\n"
    )
    con = analysis_store(tmp_path / "s.duckdb", (tmp_path / "d",))
    rep = build_report(con, "d", keep_going=False)
    con.close()
    found = rep["nccl"]["findings"]
    assert rep["nccl"]["interrupted"]["count"] == 1 and rep["nccl"]["crashed"]["ranks"] == [3]
    stop = next(i for i, f in enumerate(found) if f.startswith("a launcher stopped the job"))
    died = next(i for i, f in enumerate(found) if "out of GPU memory" in f)
    assert died < stop


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (CTRL_C, CTRL_C),
        ("3: srun: interrupt (one more within 1 sec to abort)",
         "srun: interrupt (one more within 1 sec to abort)"),
        ("srun: forcing job termination", "srun: forcing job termination"),
        ("mpirun: Forwarding signal 2 to job", "mpirun: Forwarding signal 2 to job"),
        ("slurmstepd: error: *** STEP 77.0 ON gpu-3 CANCELLED AT 2025-06-01T10:00:00 DUE TO TIME "
         "LIMIT ***", "*** STEP 77.0 ON gpu-3 CANCELLED AT 2025-06-01T10:00:00 DUE TO TIME LIMIT ***"),
        ("W0712 08:55:01.123000 140 torch/distributed/elastic/agent/server/api.py:704] Received "
         "Signals.SIGTERM death signal, shutting down workers",
         "Received Signals.SIGTERM death signal, shutting down workers"),
        ("the user pressed Ctrl-C twice", None),  # no launcher's phrase
        ("job CANCELLED AT noon", None),
    ],
)  # fmt: skip
def test_interrupt_line_shapes(line, text):
    t = classify(line)
    if text is None:
        assert t is None or t.kind != "interrupt"
    else:
        assert t is not None and t.kind == "interrupt" and t.message == text
        assert t.fields["rank"] is None
