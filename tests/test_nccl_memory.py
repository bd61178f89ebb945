"""A big log is parsed in a stream: peak memory does not grow with the file."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from nccl_log_gen import Job, make_log

CHILD = """
import json, resource, sys
from ingest.formats.nccl_log import parse
p = parse(sys.argv[1])
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "colls": p.tables["nccl_colls"].num_rows, "lines": p.detail["lines"]}))
"""


def peak(path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, check=True,
                         capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout)


@pytest.mark.slow
def test_peak_memory_is_flat(tmp_path):
    log = make_log(Job(version="2.21.5", nodes=2, gpus=4, colls=500, noise=False))
    colls = ("\n".join(x for x in log.lines if " opCount " in x) + "\n").encode()
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    small.write_bytes(colls * 25)
    with open(big, "wb") as f:
        for _ in range(125):
            f.write(colls)
    a, b = peak(small), peak(big)
    assert b["colls"] == 5 * a["colls"] == 125 * 4000
    assert b["lines"]["recognised"] == b["lines"]["total"]
    assert b["rss_mb"] < a["rss_mb"] + 60, (a, b)
