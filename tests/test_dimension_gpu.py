"""The step by dimension on GPU traces in the modern layout (tests/gpu_mesh_traces.py): a
dp 2 x tp 2 mesh whose TP and DP all-reduces have the same size and interleave. The process
group of every call comes from `record_param_comms` / the NCCL kernel's args; no instance holds
calls of two groups; the roles come from the groups' names; and the dimensions' exposed time
equals a plain-Python sweep over the generator's schedule (its truth by construction)."""

from __future__ import annotations

import json

import gpu_mesh_traces as gm
import pytest

from commwall.analysis.db import open_db, run_id
from commwall.analysis.report.session import run_session
from commwall.analysis.steps.dimension import dimension_sentence, dimensions_section
from commwall.analysis.steps.summary import decomposition_section
from commwall.cli.main import main


def truth(mesh: gm.Mesh) -> dict[int, dict[tuple[str, str], float]]:
    """Per rank, (role, 'transfer' | 'wait') -> exposed ns per step, by a sweep over the
    schedule: a call waits from its arrival until the last of its group arrives (same pg_name
    and seq); an instant with no compute and a call past its wait is transfer, shared equally
    by the roles with such a call; with every call waiting it is wait, shared by those roles."""
    last = {}
    for calls in mesh.calls.values():
        for c in calls:
            last[c.pg_name, c.seq] = max(last.get((c.pg_name, c.seq), 0), c.ts)
    out = {}
    for r, calls in mesh.calls.items():
        cuts = sorted({t for c in calls for t in (c.ts, c.end, last[c.pg_name, c.seq])}
                      | {t for iv in mesh.compute[r] for t in iv})  # fmt: skip
        got: dict[tuple[str, str], float] = {}
        for a, b in zip(cuts, cuts[1:], strict=False):
            if any(x <= a < y for x, y in mesh.compute[r]):
                continue
            running = [c for c in calls if c.ts <= a < c.end]
            if not running:
                continue
            moving = {c.role for c in running if a >= last[c.pg_name, c.seq]}
            part, roles = ("transfer", moving) if moving else ("wait", {c.role for c in running})
            for role in roles:
                got[role, part] = got.get((role, part), 0.0) + (b - a) / len(roles)
        out[r] = {k: v / mesh.steps for k, v in got.items()}
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    mesh = gm.build(gm.Mesh())
    d = tmp_path_factory.mktemp("gpu_mesh")
    gm.write(mesh, d / "traces")
    db = str(d / "s.duckdb")
    assert main(["ingest", "--db", db, "--run", "m", "--quiet", str(d / "traces")]) == 0
    con = open_db(db)
    rid = run_id(con, "m")
    with run_session(con, rid):
        yield mesh, con, rid, dimensions_section(con, rid), decomposition_section(con, rid)
    con.close()


def test_gpu_calls_carry_their_group_and_its_ranks(store):
    mesh, con, rid, _, _ = store
    rows = con.execute(
        "SELECT rank, pg_name, pg_desc, pg_ranks, count(*) FROM collectives WHERE run_id = ? "
        "GROUP BY ALL ORDER BY ALL",
        [rid],
    ).fetchall()
    counts: dict[tuple, int] = {}
    for r, calls in mesh.calls.items():
        for c in calls:
            desc = "mesh_tp" if c.role == "TP" else "mesh_dp"
            key = (r, c.pg_name, desc, json.dumps(c.ranks))
            counts[key] = counts.get(key, 0) + 1
    expected = sorted((*k, n) for k, n in counts.items())
    assert rows == expected


def test_no_instance_holds_calls_of_two_groups(store):
    mesh, con, rid, _, _ = store
    inst = con.execute(
        "SELECT pg_name, list(DISTINCT rank ORDER BY rank) FROM collective_ranks(?) "
        "GROUP BY pg_name, op, instance",
        [rid],
    ).fetchall()
    members = {c.pg_name: c.ranks for calls in mesh.calls.values() for c in calls}
    assert len(inst) == sum(len(c) for c in mesh.calls.values()) // 2  # two ranks a group
    assert all(ranks == members[pg] for pg, ranks in inst)


def test_roles_come_from_the_group_names(store):
    _, _, _, dims, _ = store
    roles = {g["pg_desc"]: (g["role"], g["source"]) for g in dims["groups"]}
    assert roles == {"mesh_tp": ("TP", "name"), "mesh_dp": ("DP", "name")}


def test_the_dimensions_add_up_to_the_exposed_communication(store):
    _, _, _, dims, dec = store
    run = dec["run"]
    exposed = run["exposed_transfer_ms"] + run["exposed_wait_ms"]
    assert dims["exposed_comm_ms"] == pytest.approx(exposed, rel=1e-9)
    assert sum(r["exposed_ms"] for r in dims["run"]) == pytest.approx(exposed, rel=1e-9)
    assert sum(r["exposed_wait_ms"] for r in dims["run"]) == pytest.approx(
        run["exposed_wait_ms"], rel=1e-9, abs=1e-9
    )


def test_each_dimension_equals_the_schedule(store):
    mesh, _, _, dims, _ = store
    want = truth(mesh)
    # by hand for the early rank 2: TP waits [80, 100) µs, transfers [100, 150) + [300, 340)
    # + half of [360, 380); DP transfers [250, 300) + [340, 360) + half of [360, 380) + [380, 400)
    assert want[2] == {("TP", "wait"): 20_000, ("TP", "transfer"): 100_000,
                       ("DP", "transfer"): 100_000}  # fmt: skip
    for r in range(mesh.world):
        mine = {x["dimension"]: x for x in dims["ranks"] if x["rank"] == r}
        for role in ("TP", "DP"):
            for part in ("transfer", "wait"):
                got = mine[role][f"exposed_{part}_ms"] * 1e6
                assert got == pytest.approx(want[r].get((role, part), 0.0), abs=1), (r, role, part)
    means = {x["dimension"]: x["exposed_ms"] for x in dims["run"]}
    n = mesh.world
    for role in ("TP", "DP"):
        total = sum(v for r in want for (k, _), v in want[r].items() if k == role) / n
        assert means[role] * 1e6 == pytest.approx(total, abs=1)


def test_the_sentence_names_the_largest_dimension(store):
    _, _, _, dims, _ = store
    text = dimension_sentence({"dimensions": dims})
    top = dims["run"][0]
    assert text is not None and len(text.split()) <= 40
    assert f"{100 * top['share_of_step']:.0f}%" in text
