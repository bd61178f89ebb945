"""`commwall ingest` of NCCL logs, `commwall nccl` in both formats, and the report's section."""

from __future__ import annotations

import json

import pytest
from nccl_log_gen import Job, make_log

from commwall.analysis.nccl.section import empty_section
from commwall.cli.commands._output import fmt_table
from commwall.cli.main import main
from commwall.cli.text_report import render_text
from commwall.dashboard.nccl_text import ranges

JOB = Job(
    version="2.24.3", nodes=2, gpus=2, colls=12, warn_rank=1, timeout_culprit=3, launcher="srun"
)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = tmp_path_factory.mktemp("ncclcli")
    log = make_log(JOB).write(d / "job.log.gz", gz=True)
    db = d / "s.duckdb"
    assert main(["ingest", str(log), "--db", str(db), "--run", "job", "--quiet"]) == 0
    return db


def test_nccl_json(db, capsys):
    assert main(["nccl", "--db", str(db), "--run", "job", "--format", "json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["present"] and s["versions"] == ["2.24.3"]
    assert s["lines"]["nccl"] == s["lines"]["recognised"] + s["lines"]["unknown"]
    assert {t["scope"] for t in s["transports"]} == {"intra-node", "inter-node"}
    assert s["gdr"] is True and s["timeouts"]["collectives"][0]["likely_culprits"] == [3]


def test_nccl_text(db, capsys):
    assert main(["nccl", "--db", str(db), "--run", "job"]) == 0
    out = capsys.readouterr().out
    assert "GPU Direct RDMA: on (connections;" in out
    assert "not enqueued 3, waiting 0-2" in out
    assert "TCP sockets between nodes: no" in out
    assert "versions: 2.24.3 (ranks 0-3)" in out
    # the job spans 2 nodes over IB (the generator's default network)
    assert "inter-node: yes (hosts); network IB (connections)" in out
    # the generator plants one line of an unknown family and one damaged line per rank
    ranks = JOB.nodes * JOB.gpus
    assert f"{ranks:>6}  Future NCCL (unknown; first at " in out
    assert f"{ranks:>6}  damaged (damaged; first at " in out


def test_report_has_the_nccl_section(db, capsys):
    assert main(["report", "--db", str(db), "--run", "job", "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["nccl"]["present"] and rep["nccl"]["warnings"]["count"] == 1
    text = render_text({"run": "job", "nccl": rep["nccl"]}, fmt_table)
    assert "== NCCL logs" in text and "GPU Direct RDMA: on" in text
    absent = render_text({"run": "job", "nccl": empty_section()}, fmt_table)
    assert "NCCL_DEBUG=INFO" in absent


def test_unknown_run(db, capsys):
    assert main(["nccl", "--db", str(db), "--run", "nope"]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "ranks,text", [([], "-"), ([3], "3"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([9, 1, 0], "0-1,9")]
)
def test_rank_ranges(ranks, text):
    assert ranges(ranks) == text
