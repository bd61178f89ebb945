"""The order and wording of the hang verdict when several process groups hang (analysis/hangs/section.py):
sequence numbers count per group, so the root is the group whose culprits wait nowhere else; a
culprit waiting inside another group's hung collective is said to be held there; two groups
holding each other's culprits are a cycle. Findings given by hand (hang_findings' shape)."""

from __future__ import annotations

from commwall.analysis.hangs.section import cycle_sentence, order_hung


def group(pg: str, seq: int, bad: list[int], others: list[int]) -> dict:
    cause = {"pg_name": pg, "pg_desc": None, "seq": seq, "op_name": "all_reduce",
             "kind": "missing", "culprit_ranks": bad, "other_ranks": others}  # fmt: skip
    return {"pg_name": pg, "pg_desc": None, "cause": cause}


def test_the_group_whose_culprit_waits_nowhere_comes_first():
    # groups 1 = {0, 1} and 2 = {2, 3}; rank 1 sleeps before group 1's seq 4: rank 0 waits
    # there, so it never reaches seq 4 of group 0, where ranks 2 and 3 wait
    g0, g1 = group("0", 4, [0, 1], [2, 3]), group("1", 4, [1], [0])
    ordered = order_hung([g0, g1])
    assert [g["pg_name"] for g in ordered] == ["1", "0"]
    assert g0["held"] == {0: "process group 1 at all-reduce seq 4"} and g1["held"] == {}
    # where the held ranks wait, as a JSON list (a set was printed as the text "set()")
    assert g0["held_in"] == ["1"] and g1["held_in"] == []
    assert cycle_sentence(ordered) == ""


def test_groups_holding_each_others_culprits_are_a_cycle():
    # rank 1 skipped group 1's seq 4 and waits in group 0's seq 4; rank 0 waits in group 1's
    g0, g1 = group("0", 4, [0], [1, 2, 3]), group("1", 4, [1], [0])
    ordered = order_hung([g0, g1])
    assert g0["held"] and g1["held"]
    assert "wait on each other" in cycle_sentence(ordered)
