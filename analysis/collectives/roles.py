"""A process group's role in the job's parallelism, from its name or description.

Megatron-LM names its groups for what they carry (`TENSOR_MODEL_PARALLEL_GROUP`,
`TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP`, `EXPERT_MODEL_PARALLEL_GROUP`, …); PyTorch's device
meshes name theirs for the mesh dimension (`mesh_tp`, `dp_shard`, `pp`); the default group is
the whole world. The role is the dimensions a group spans, in the order TP, CP, DP, PP, EP (expert
dimensions prefixed "expert"), e.g. "TP", "TP+CP", "TP+DP+CP", "EP", "expert TP+EP", "FSDP",
"world"; None when the name says nothing (a bare number, "undefined"). docs/parallelism.md.
"""

from __future__ import annotations

import re

#: Words of a Megatron-style description and the dimension each names.
_WORDS = {"TENSOR": "TP", "CONTEXT": "CP", "DATA": "DP", "PIPELINE": "PP", "EMBEDDING": "PP"}
#: Mesh dimension names (PyTorch DeviceMesh, torchtitan) and the role each names.
_MESH = {
    "tp": "TP", "cp": "CP", "dp": "DP", "pp": "PP", "ep": "EP", "etp": "expert TP",
    "dp_replicate": "DP", "dp_shard": "FSDP", "dp_shard_cp": "FSDP+CP", "fsdp": "FSDP",
    "tensor": "TP", "pipeline": "PP", "data": "DP", "context": "CP", "expert": "EP",
}  # fmt: skip
_ORDER = ("TP", "CP", "DP", "PP", "EP")


def group_role(name: str | None, desc: str | None = None) -> str | None:
    """The role of the process group called `name` with description `desc` (see module)."""
    for text in (desc, name):
        role = _role(text)
        if role is not None:
            return role
    return None


def _role(text: str | None) -> str | None:
    if not text or text == "undefined":
        return None
    if text in ("default_pg", "WORLD", "world"):
        return "world"
    mesh = re.sub(r"^(?:mesh_|.*?_mesh_)", "", text.strip().lower())
    if mesh in _MESH:
        return _MESH[mesh]
    words = set(re.split(r"[^A-Z]+", text.upper()))
    dims = {_WORDS[w] for w in words if w in _WORDS}
    if "WITH" in words and "CP" in words:  # TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP
        dims.add("CP")
    if "EXPERT" in words:
        # EXPERT_MODEL_PARALLEL_GROUP: the expert dimension itself (EP); with TENSOR: expert TP
        # (EXPERT_TENSOR_PARALLEL_GROUP), and with MODEL too: expert TP and EP together
        if not dims:
            return "EP"
        if "MODEL" in words:
            dims.add("EP")
        return "expert " + "+".join(d for d in _ORDER if d in dims)
    if not dims and "MODEL" in words:  # Megatron's model-parallel group: TP x PP
        return "TP+PP"
    if not dims:
        return None
    return "+".join(d for d in _ORDER if d in dims)


def structural_role(
    ops: dict[str, int],
    allgather_out_nelems: set[int] | frozenset[int] = frozenset(),
    reduce_nelems: set[int] | frozenset[int] = frozenset(),
    functional_waits: bool = False,
) -> str | None:
    """The role a group's calls suggest when its name says nothing (docs/parallelism.md):

    * all-to-alls: EP (the token exchange of a mixture of experts);
    * all-gathers whose gathered sizes are also reduced (reduce-scatter, or gloo's all-reduce
      standing in for one): FSDP (parameters gathered, their gradients reduce-scattered);
    * send and receive only: PP (activations between neighbouring stages);
    * all-reduces that the program waits for on its own thread (functional collectives): TP;
    * other all-reduces: DP (gradient synchronisation), unless the group also all-gathers
      (then None);
    * else None.

    `ops` counts the group's calls per normalised op; `allgather_out_nelems` and
    `reduce_nelems` are the element counts of its all-gathers' outputs and of its
    reduce-scatters' inputs and all-reduces; `functional_waits` says whether its all-reduces are
    waited for on the program's thread (`_c10d_functional::wait_tensor`).
    """
    n = {op: c for op, c in ops.items() if c > 0}
    if n.get("alltoall"):
        return "EP"
    if n.get("allgather"):  # without a reduction of the gathered sizes: not telling
        return "FSDP" if set(allgather_out_nelems) & set(reduce_nelems) else None
    if n and set(n) <= {"send", "recv", "sendrecv"}:
        return "PP"
    if n.get("allreduce"):
        return "TP" if functional_waits else "DP"
    return None


def role_of(name: str | None, desc: str | None, structure: str | None = None) -> tuple[str, str]:
    """(role, source): from the name or description where it says one other than the whole
    world, else from `structure` (structural_role), else the world's or 'unknown'. `source` is
    'name', 'structure' or 'none'."""
    named = group_role(name, desc)
    if named is not None and named != "world":
        return named, "name"
    if structure is not None:
        return structure, "structure"
    return (named or "unknown"), ("name" if named else "none")
