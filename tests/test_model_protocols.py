"""Protocol labels of matched instances from NCCL's TUNING choice lines (by size range)."""

from __future__ import annotations

import pandas as pd
from conftest import memory_store

from commwall.analysis.model.section import protocol_labels


def test_tuning_choices_label_instances_by_size():
    con = memory_store()
    con.execute("INSERT INTO runs (run_id, name) VALUES (1, 'r')")
    # as NCCL 2.24 logs them: "AllReduce: 1024 Bytes -> Algo RING proto LL ..." and so on
    con.execute(
        "INSERT INTO nccl_tuning (run_id, file_id, proc, kind, func, bytes, algo, proto) VALUES"
        " (1, 0, 0, 'choice', 'AllReduce', 1024, 'RING', 'LL'),"
        " (1, 0, 0, 'choice', 'AllReduce', 4096, 'RING', 'LL'),"
        " (1, 0, 0, 'choice', 'AllReduce', 1048576, 'RING', 'LL128'),"
        " (1, 0, 0, 'choice', 'AllGather', 1048576, 'RING', 'SIMPLE')"
    )
    df = pd.DataFrame(
        {
            "op": ["allreduce", "allreduce", "allreduce", "allgather", "broadcast"],
            "bytes": [2048.0, 1048576.0, 99e6, 1048576.0, 1024.0],
        }
    )
    labels = protocol_labels(con, 1, df).tolist()
    # 99e6 B lies outside every logged size range, broadcast has no choice line
    assert labels == ["RING/LL", "RING/LL128", None, "RING/SIMPLE", None]
