"""The hang section on real Flight Recorder dumps of hung gloo jobs (sample_traces/fr_*, made
by generate_flight_recorder.py, whose ground_truth.json says what was injected), and a
cross-check with PyTorch's own analyser (torch.distributed.flight_recorder) on the same dumps,
skipped where torch is not importable."""

from __future__ import annotations

import argparse
import json

import pytest

from commwall.analysis.db import load_modules, run_id
from commwall.analysis.hangs.section import hang_section
from commwall.ingest import discover, store
from commwall.ingest.formats import flight_recorder
from tests.conftest import SAMPLES

SETS = ("fr_skip", "fr_op", "fr_size", "fr_dtype", "fr_skip_pickle")
KIND = {"skip": "missing", "op": "op", "size": "size", "dtype": "dtype"}
DTYPE = {"float32": "Float", "float64": "Double"}
#: fr_trace's MatchState for each injected fault.
FR_TRACE_KIND = {
    "op": "COLLECTIVE_TYPE_MISMATCH",
    "size": "SIZE_OR_SYNTAX_MISMATCH",
    "dtype": "COLLECTIVE_DTYPE_MISMATCH",
}


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """One store with every sample hang run (dumps and, where present, Kineto traces)."""
    c = store.connect(tmp_path_factory.mktemp("hang") / "s.duckdb")
    for name in SETS:
        store.ingest(c, name, discover.expand([str(SAMPLES / name)]))
    return load_modules(c)


def truth(name: str) -> dict:
    return json.loads((SAMPLES / name / "ground_truth.json").read_text())


@pytest.mark.parametrize("name", SETS)
def test_the_named_cause_is_the_injected_one(con, name):
    t = truth(name)
    h = hang_section(con, run_id(con, name))
    assert h["present"] and h["n_dumps"] == t["world_size"]
    (g,) = h["groups"]
    c = g["cause"]
    others = [r for r in range(t["world_size"]) if r != t["culprit_rank"]]
    assert (c["seq"], c["kind"]) == (t["hang_seq"], KIND[t["fault"]])
    assert (c["culprit_ranks"], c["other_ranks"]) == ([t["culprit_rank"]], others)
    assert c["op_name"] == t["expected_op"] and not c["ambiguous"]
    assert g["last_common_seq"] == t["hang_seq"] - (t["fault"] == "skip")
    assert g["first_unentered_seq"] == (t["hang_seq"] if t["fault"] == "skip" else None)
    n, m = t["culprit_numel"], t["expected_numel"]
    w = t["world_size"]
    expected_value = {
        "skip": None,
        "op": f"gloo:{t['expected_op']}",
        "size": f"[[{m}]] -> [[{w}, {m}]]",
        "dtype": DTYPE[t["expected_dtype"]],
    }[t["fault"]]
    culprit_value = {
        "skip": None,
        "op": [f"gloo:{t['culprit_op']}"],
        "size": [f"[[{n}]] -> [[{w}, {n}]]"],
        "dtype": [DTYPE[t["culprit_dtype"] or "float32"]],
    }[t["fault"]]
    assert (c["expected"], c["culprit_values"]) == (expected_value, culprit_value)
    words = f"at seq {t['hang_seq']}" if t["fault"] != "skip" else f"seq {t['hang_seq']}"
    assert words in h["verdict"] and f"rank {t['culprit_rank']} " in h["verdict"]


def test_the_skip_sentence(con):
    h = hang_section(con, run_id(con, "fr_skip"))
    t = truth("fr_skip")
    # PyTorch's op names in words: all_gather → all-gather
    expected_op, last_op = (t[k].replace("_", "-") for k in ("expected_op", "last_good_op"))
    assert h["verdict"] == (
        f"Hang in process group 0 (default_pg) at {expected_op} seq {t['hang_seq']}: "
        f"rank {t['culprit_rank']} never entered it (its last recorded collective is "
        f"{last_op} seq {t['last_good_seq']}); ranks 0, 2, 3 waited."
    )


def test_pickle_dumps_give_the_json_dumps_findings(con):
    a = hang_section(con, run_id(con, "fr_skip"))
    b = hang_section(con, run_id(con, "fr_skip_pickle"))
    assert (a["forms"], b["forms"]) == (["json"], ["pickle"])
    assert a["findings"] == b["findings"] and a["ranks"] == b["ranks"]


@pytest.mark.parametrize("name", ("fr_skip", "fr_op", "fr_size", "fr_dtype"))
def test_kineto_traces_of_the_same_job_join_the_timeline(con, name):
    t = truth(name)
    rows = hang_section(con, run_id(con, name))["timeline"]
    assert rows and all(r["join_key"] == "order" for r in rows)  # gloo traces carry no seq
    for rank in range(t["world_size"]):
        mine = [r for r in rows if r["rank"] == rank]
        starts = [r["trace_ts"] for r in mine]
        assert starts == sorted(starts)
        # the traced call starts after Flight Recorder saw it enqueued (same clock), soon after
        assert all(0 <= r["trace_ts"] - r["time_created_ns"] < 200_000_000 for r in mine)
    # the hung all_gather lasts as long as the gloo timeout on a rank that waited in it
    waited = [r for r in rows if r["seq"] == t["hang_seq"] and r["rank"] != t["culprit_rank"]]
    assert waited and all(r["trace_dur"] >= t["timeout_s"] * 1e9 for r in waited)


def test_a_run_without_dumps_says_so(con, tmp_path):
    c = load_modules(store.connect(tmp_path / "e.duckdb"))
    c.execute("INSERT INTO runs VALUES (7, 'empty', NULL, NULL)")
    h = hang_section(c, 7)
    assert not h["present"] and "TORCH_FR_BUFFER_SIZE" in h["reason"]


# --- PyTorch's own analyser on the same dumps ---------------------------------------------


def _details(name: str, order: list[int] | None = None) -> dict:
    """The dumps as fr_trace's loader would give them (read here without pickle.load)."""
    t = truth(name)
    out = {}
    for r in order or range(t["world_size"]):
        folder = SAMPLES / name
        path = next(p for p in folder.glob(f"rank{r}.*") if "trace" not in p.name)
        dump, _ = flight_recorder.load(path, 1 << 20)
        out[f"rank{r}"] = {"rank": r, "host_name": f"host{r}", **dump}
    return out


def _rekey(details: dict) -> dict:
    """gloo's pg_config keyed by '' renamed to the entries' group name, as fr_trace needs."""
    for d in details.values():
        names = {e["process_group"][0] for e in d["entries"]}
        if list(d["pg_config"]) == [""] and len(names) == 1:
            d["pg_config"] = {names.pop(): d["pg_config"][""]}
    return details


def _fr_trace(details: dict):
    builder = pytest.importorskip("torch.distributed.flight_recorder.components.builder")
    args = argparse.Namespace(verbose=False, just_print_entries=False, allow_incomplete_ranks=False,
                              mismatch_cap=10)  # fmt: skip
    db = builder.build_db(details, args, str(next(iter(details.values()))["version"]))
    # a collective some rank never joined keeps pass_check True, with missing_ranks set
    return next(c for c in db.collectives if not c.pass_check or c.missing_ranks)


@pytest.mark.parametrize("name", ("fr_skip", "fr_op", "fr_size", "fr_dtype"))
def test_fr_trace_agrees_on_the_seq_and_the_culprit(con, name):
    pytest.importorskip("torch")
    t = truth(name)
    bad = _fr_trace(_rekey(_details(name)))
    assert bad.collective_seq_id == t["hang_seq"]
    ours = hang_section(con, run_id(con, name))["groups"][0]["cause"]
    if t["fault"] == "skip":
        assert bad.missing_ranks == set(ours["culprit_ranks"])
    else:
        assert set(bad.mismatch_collectives) == set(ours["culprit_ranks"])
        kinds = {c.type_of_mismatch.state.name for c in bad.mismatch_collectives.values()}
        assert kinds == {FR_TRACE_KIND[t["fault"]]}


def test_fr_trace_cannot_read_gloo_group_config_as_written(con):
    pytest.importorskip("torch")
    with pytest.raises(KeyError):
        _fr_trace(_details("fr_skip"))


def test_fr_trace_blames_by_dump_order_where_we_blame_the_minority(con):
    pytest.importorskip("torch")
    t = truth("fr_op")
    culprit = t["culprit_rank"]
    first = [culprit] + [r for r in range(t["world_size"]) if r != culprit]
    bad = _fr_trace(_rekey(_details("fr_op", first)))
    # with the culprit's dump listed first, fr_trace takes its call as the reference
    assert set(bad.mismatch_collectives) == set(first[1:])
    ours = hang_section(con, run_id(con, "fr_op"))["groups"][0]["cause"]
    assert ours["culprit_ranks"] == [culprit]


def test_a_store_made_before_the_fr_tables_says_so(tmp_path):
    c = store.connect(tmp_path / "old.duckdb")
    for t in ("fr_entries", "fr_groups", "fr_pg_status", "fr_dumps"):
        c.execute(f"DROP TABLE {t}")
    c.execute("INSERT INTO runs VALUES (3, 'old', NULL, NULL)")
    h = hang_section(load_modules(c), 3)
    assert not h["present"] and "predates" in h["reason"]


def test_the_op_sentence(con):
    t = truth("fr_op")
    assert hang_section(con, run_id(con, "fr_op"))["verdict"] == (
        f"Mismatch in process group 0 (default_pg) at seq {t['hang_seq']}: rank "
        f"{t['culprit_rank']} called {t['culprit_op'].replace('_', '-')} where ranks 0, 2, 3 "
        f"called {t['expected_op'].replace('_', '-')}."  # PyTorch's names in words
    )


def test_generator_refuses_a_job_without_good_collectives(capsys):
    """The generator's ground truth names the last good all-reduce (seq --good), so --good 0
    has no truth to write: it is refused before torch is imported, with the reason."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_flight_recorder", SAMPLES / "generate_flight_recorder.py"
    )
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with pytest.raises(SystemExit) as e:
        gen.parse_args(["--out", "x", "--fault", "skip", "--good", "0"])
    assert e.value.code == 2
    assert "--good must be at least 1" in capsys.readouterr().err
    assert gen.parse_args(["--out", "x", "--fault", "skip", "--good", "1"]).good == 1
