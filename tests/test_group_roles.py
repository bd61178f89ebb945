"""Process-group roles from names and descriptions (analysis/collectives/roles.py), table-driven:
Megatron-LM's group descriptions (as its Flight Recorder dumps carry them), PyTorch device-mesh
dimension names, the default group, and names that say nothing."""

from __future__ import annotations

import pytest

from commwall.analysis.collectives.roles import group_role, role_of, structural_role

CASES = [
    # Megatron-LM (parallel_state.py) descriptions
    ("37", "TENSOR_MODEL_PARALLEL_GROUP", "TP"),
    ("69", "TENSOR_AND_CONTEXT_PARALLEL_GROUP", "TP+CP"),
    ("64", "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", "TP+CP+DP"),
    ("1", "DATA_PARALLEL_GROUP", "DP"),
    ("2", "DATA_PARALLEL_GROUP_WITH_CP", "CP+DP"),
    ("3", "CONTEXT_PARALLEL_GROUP", "CP"),
    ("4", "PIPELINE_MODEL_PARALLEL_GROUP", "PP"),
    ("5", "EMBEDDING_GROUP", "PP"),
    ("6", "MODEL_PARALLEL_GROUP", "TP+PP"),
    ("72", "EXPERT_MODEL_PARALLEL_GROUP", "EP"),
    ("90", "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", "expert TP+EP"),
    ("7", "EXPERT_TENSOR_PARALLEL_GROUP", "expert TP"),
    ("8", "EXPERT_DATA_PARALLEL_GROUP", "expert DP"),
    # PyTorch device meshes and torchtitan
    ("mesh_tp", None, "TP"),
    ("mesh_dp", None, "DP"),
    ("dp_shard", None, "FSDP"),
    ("dp_replicate", None, "DP"),
    ("pp", None, "PP"),
    ("ep", None, "EP"),
    # the world, and names that say nothing
    ("0", "default_pg", "world"),
    ("0", "undefined", None),
    ("12", None, None),
    (None, None, None),
]


@pytest.mark.parametrize(("name", "desc", "role"), CASES)
def test_group_role(name, desc, role):
    assert group_role(name, desc) == role


def test_the_description_wins_over_the_name():
    assert group_role("mesh_dp", "TENSOR_MODEL_PARALLEL_GROUP") == "TP"
    assert group_role("mesh_dp", "undefined") == "DP"


STRUCTURE = [
    # (ops, all-gather outputs, reduced sizes, functional waits) -> role
    ({"alltoall": 6, "allreduce": 12}, set(), {128}, False, "EP"),
    # FSDP2 on gloo: 131712 gathered elements, reduce-scattered as gloo all-reduces of 131712
    ({"allgather": 18, "allreduce": 9}, {131712}, {131712}, False, "FSDP"),
    ({"allgather": 4, "reduce_scatter": 4}, {4096}, {4096}, False, "FSDP"),
    ({"allgather": 4, "allreduce": 4}, {4096}, {1}, False, None),  # gathers alone: no role
    ({"send": 8, "recv": 8}, set(), set(), False, "PP"),
    ({"allreduce": 7}, set(), {16384}, True, "TP"),
    ({"allreduce": 8}, set(), {67338}, False, "DP"),
    ({"barrier": 1}, set(), set(), False, None),
    ({}, set(), set(), False, None),
]


@pytest.mark.parametrize(("ops", "gathered", "reduced", "waits", "role"), STRUCTURE)
def test_structural_role(ops, gathered, reduced, waits, role):
    assert structural_role(ops, gathered, reduced, waits) == role


ROLE_OF = [
    ("3", "mesh_tp", "DP", ("TP", "name")),  # a name that says a role wins
    ("0", "default_pg", "FSDP", ("FSDP", "structure")),  # the world: structure tells more
    ("0", "default_pg", None, ("world", "name")),
    (None, None, "EP", ("EP", "structure")),
    (None, None, None, ("unknown", "none")),
]


@pytest.mark.parametrize(("name", "desc", "structure", "expected"), ROLE_OF)
def test_role_of(name, desc, structure, expected):
    assert role_of(name, desc, structure) == expected
