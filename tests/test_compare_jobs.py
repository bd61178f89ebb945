"""Whether two runs are the same job (analysis/compare/pair.py): facts both reports have are
compared, a run against itself has no difference."""

from __future__ import annotations

from commwall.analysis.compare.pair import comparable, job_differences

DLRM = {"run_info": {"n_ranks": 8, "device_kind": "gpu", "backends": ["nccl"],
                     "gpus": ["Tesla V100-SXM2-16GB"]}}  # fmt: skip
GLOO = {"run_info": {"n_ranks": 4, "device_kind": "cpu", "backends": ["gloo"], "gpus": []}}


def test_different_jobs_are_said_to_be():
    assert job_differences(DLRM, GLOO) == [
        "ranks: 8 → 4", "devices: gpu → cpu", "backends: nccl → gloo"
    ]  # fmt: skip
    assert not comparable(DLRM, GLOO)


def test_the_same_job_and_unknown_facts():
    assert comparable(DLRM, DLRM) and comparable(GLOO, {"run_info": {"n_ranks": 4}})
    assert job_differences({}, GLOO) == []
