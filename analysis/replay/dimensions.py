"""What-ifs by parallelism dimension: the replay (engine.py) with the collectives of one
dimension changed, offered where the run has that dimension (docs/parallelism.md, "What-ifs by
dimension").

* **Tensor-parallel communication faster**: the transfer of every instance whose process group
  is tensor parallel divided by the speedup. A group's dimension is the one the step by
  dimension gives it (analysis/steps/dimension.py `group_roles`: its role from its name, else
  from what its calls do).
* **Experts balanced**: the transfer of every all-to-all of an expert-parallel group scaled by
  its mean rank pair's bytes over its largest pair's (sql/replay.sql
  `replay_alltoall_balance`): as if the router sent every rank pair the mean. The approximation
  is that an all-to-all takes as long as its busiest pair takes to move its bytes, at the
  bandwidth the instance reached; latency, and a rank that is busy because it sends or receives
  much in all, are not modelled. An all-to-all whose split sizes or group ranks are not known
  is left as measured.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from commwall.analysis import policy
from commwall.analysis.replay.chain import Steps
from commwall.analysis.replay.walk import WhatIf
from commwall.analysis.steps.dimension import group_roles
from commwall.analysis.steps.summary import json_value

#: The key of "experts balanced" in the report's `replay.whatifs`.
EXPERTS_BALANCED = "experts_balanced"


def tp_key(speedup: float = policy.WHATIF_TRANSFER_SPEEDUP) -> str:
    """The key of "tensor-parallel communication `speedup`× faster" in `replay.whatifs`."""
    return f"tp_transfer_{speedup:g}x"


def instance_dimensions(con: duckdb.DuckDBPyConnection, rid: int) -> pd.DataFrame:
    """One row per matched collective instance of run `rid`: ik, op, dimension (TP, CP, PP,
    EP, FSDP, DP or unknown: its process group's, steps/dimension.py group_roles)."""
    roles = group_roles(con, rid)
    dim = dict(zip(roles["pg_name"], roles["dimension"], strict=True))
    inst = con.execute("SELECT ik, pg_name, op FROM collective_instances(?)", [rid]).df()
    return pd.DataFrame(
        {
            "ik": inst["ik"].astype("int64"),
            "op": inst["op"],
            "dimension": [dim.get(json_value(n), "unknown") for n in inst["pg_name"]],
        }
    )


def dimension_whatifs(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    steps: Steps,
    speedup: float = policy.WHATIF_TRANSFER_SPEEDUP,
) -> list[WhatIf]:
    """The what-ifs by dimension of run `rid` whose instances are among `steps`' barriers:
    tensor-parallel communication `speedup`× faster where a TP instance is replayed, experts
    balanced where an expert-parallel all-to-all with known split sizes is (see module)."""
    inst = instance_dimensions(con, rid)
    inst = inst[inst["ik"].isin(steps.inst_key)]
    out = []
    tp = np.sort(inst.loc[inst["dimension"] == "TP", "ik"].to_numpy(np.int64))
    if len(tp):
        out.append(
            WhatIf(
                tp_key(speedup),
                f"tensor-parallel communication {speedup:g}x faster (the transfer of the "
                "TP groups' collectives)",
                instance_scale=tuple((int(k), 1 / speedup) for k in tp),
            )
        )
    ep = inst[(inst["dimension"] == "EP") & (inst["op"] == "alltoall")]
    if not ep.empty:
        bal = con.execute(
            "SELECT ik, pair_mean_bytes, pair_max_bytes FROM replay_alltoall_balance(?)", [rid]
        ).df()
        bal = bal[bal["ik"].isin(ep["ik"]) & (bal["pair_max_bytes"] > 0)].sort_values("ik")
        if not bal.empty:
            factors = (bal["pair_mean_bytes"] / bal["pair_max_bytes"]).clip(upper=1.0)
            out.append(
                WhatIf(
                    EXPERTS_BALANCED,
                    "experts balanced (every rank pair of the expert all-to-alls moves the "
                    "mean bytes)",
                    instance_scale=tuple(
                        (int(k), float(f)) for k, f in zip(bal["ik"], factors, strict=True)
                    ),
                )
            )
    return out
