"""`commwall capture` around a plain `python -c` child (no torch): the environment the job
sees, its exit status passed through, signals forwarded, no run directory overwritten, and
manifest.json; the script helper's off switch and its promise to load no torch."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime

import pytest

from commwall import capture
from commwall.cli import capture_run
from commwall.cli.main import main

#: A child that writes the environment it was given to the file named by its first argument.
DUMP_ENV = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"


def run_capture(tmp_path, *args, code=DUMP_ENV, child_args=()):
    out = tmp_path / "run"
    rc = main(["capture", "--out", str(out), *args, "--", sys.executable, "-c", code, *child_args])
    return rc, out


def test_the_job_sees_every_capture_setting(tmp_path):
    env_file = tmp_path / "env.json"
    rc, out = run_capture(tmp_path, child_args=[str(env_file)])
    assert rc == 0
    env = json.loads(env_file.read_text())
    root = out.resolve()
    assert env["COMMWALL_CAPTURE_DIR"] == str(root)
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["NCCL_DEBUG_SUBSYS"] == "INIT,NET,GRAPH,ENV,TUNING"
    assert env["NCCL_DEBUG_FILE"] == str(root / "nccl" / "%h.%p.log")
    assert env["TORCH_FR_BUFFER_SIZE"] == env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == str(root / "fr" / "rank_")
    assert env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(root / "fr" / "rank_")
    assert "NCCL_PROFILER_PLUGIN" not in env
    assert sorted(p.name for p in out.iterdir()) == [
        "fr",
        "kineto",
        "manifest.json",
        "nccl",
        "ranks",
    ]


def test_options_and_the_users_own_levels(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "0")
    plugin = tmp_path / "libnccl-profiler-inspector.so"
    plugin.write_bytes(b"\x7fELF")
    env_file = tmp_path / "env.json"
    rc, out = run_capture(
        tmp_path, "--inspector-plugin", str(plugin), "--nccl-coll", "--hang-dump", "2.5",
        child_args=[str(env_file)],
    )  # fmt: skip
    assert rc == 0
    env = json.loads(env_file.read_text())
    assert env["NCCL_DEBUG"] == "WARN"  # set by the user: kept
    assert env["NCCL_DEBUG_SUBSYS"].split(",")[-1] == "COLL"
    assert env["TORCH_FR_BUFFER_SIZE"] == env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "0"
    assert env["NCCL_PROFILER_PLUGIN"] == str(plugin.resolve())
    assert env["NCCL_INSPECTOR_ENABLE"] == "1"
    assert env["NCCL_INSPECTOR_DUMP_DIR"] == str(out.resolve() / "inspector")
    assert env["COMMWALL_CAPTURE_HANG_S"] == "2.5"
    m = json.loads((out / "manifest.json").read_text())
    assert m["settings"]["flight_recorder"] is False  # the user's 0 turned it off
    assert m["settings"]["inspector"] is True
    assert m["settings"]["nccl_debug"] == "WARN"


def test_no_nccl_log_and_no_flight_recorder_leave_them_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    env_file = tmp_path / "env.json"
    rc, _ = run_capture(
        tmp_path, "--no-nccl-log", "--no-flight-recorder", child_args=[str(env_file)]
    )
    env = json.loads(env_file.read_text())
    assert rc == 0
    assert not {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "TORCH_FR_DUMP_TEMP_FILE"} & set(env)


def test_exit_status_is_passed_through(tmp_path):
    rc, out = run_capture(tmp_path, code="import sys; sys.exit(7)")
    assert rc == 7
    assert json.loads((out / "manifest.json").read_text())["exit_status"] == 7


def test_a_job_ended_by_a_signal_exits_128_plus_the_signal(tmp_path):
    rc, out = run_capture(tmp_path, code="import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert rc == 128 + signal.SIGTERM
    m = json.loads((out / "manifest.json").read_text())
    assert (m["exit_status"], m["signal"]) == (143, "SIGTERM")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_reach_the_job(tmp_path, sig):
    """The job handles the signal itself (here: writes a file, exits 5); capture waits for it."""
    ready, got = tmp_path / "ready", tmp_path / "got"
    code = (
        "import signal, sys, time, pathlib\n"
        "def h(s, f):\n"
        f"    pathlib.Path({str(got)!r}).write_text(str(s)); sys.exit(5)\n"
        "signal.signal(signal.SIGTERM, h); signal.signal(signal.SIGINT, h)\n"
        f"pathlib.Path({str(ready)!r}).write_text('1')\n"
        "time.sleep(60)\n"
    )
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "commwall", "capture", "--out", str(out), "--",
           sys.executable, "-c", code]  # fmt: skip
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(sig)
    assert p.wait(timeout=30) == 5
    assert got.read_text() == str(int(sig))
    assert json.loads((out / "manifest.json").read_text())["exit_status"] == 5


def test_an_existing_run_directory_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    marker = tmp_path / "ran"
    rc = main(["capture", "--out", str(out), "--", sys.executable, "-c",
               f"open({str(marker)!r}, 'w')"])  # fmt: skip
    assert rc == 2
    assert f"{out}: exists and is not an empty directory" in capsys.readouterr().err
    assert not marker.exists()  # the job never ran
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_an_empty_directory_is_used(tmp_path):
    (tmp_path / "run").mkdir()
    rc, out = run_capture(tmp_path, code="pass")
    assert rc == 0 and (out / "manifest.json").is_file()


def test_bad_commands_are_refused(tmp_path, capsys):
    assert main(["capture", "--out", str(tmp_path / "a")]) == 2
    assert "no command to run" in capsys.readouterr().err
    rc = main(["capture", "--out", str(tmp_path / "b"), "--", str(tmp_path / "no-such-launcher")])
    assert rc == 2
    assert "no-such-launcher: cannot start" in capsys.readouterr().err
    rc = main(["capture", "--out", str(tmp_path / "c"), "--inspector-plugin",
               str(tmp_path / "none.so"), "--", "true"])  # fmt: skip
    assert rc == 2 and "no such NCCL Inspector plugin file" in capsys.readouterr().err


def test_manifest_records_the_run(tmp_path):
    before = time.time_ns()
    rc, out = run_capture(tmp_path, code="import time; time.sleep(0.2)")
    after = time.time_ns()
    assert rc == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["commwall_capture"] == 1
    assert m["command"] == [sys.executable, "-c", "import time; time.sleep(0.2)"]
    assert m["hosts"] == [socket.gethostname()]
    assert before <= m["start"]["ns"] < m["end"]["ns"] <= after
    assert m["end"]["ns"] - m["start"]["ns"] >= 200_000_000  # the child slept 0.2 s
    for t in (m["start"], m["end"]):
        utc = datetime.fromisoformat(t["utc"])
        assert utc.utcoffset().total_seconds() == 0
        assert abs(utc.timestamp() * 1e9 - t["ns"]) < 2_000  # the same moment, to the µs
    assert (m["exit_status"], m["signal"]) == (0, None)
    assert m["environment"]["NCCL_DEBUG_FILE"].endswith("/nccl/%h.%p.log")
    assert m["settings"]["flight_recorder"] is True
    assert m["settings"]["flight_recorder_buffer"] == 2000


def test_default_run_directory_is_a_utc_timestamp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["capture", "--", sys.executable, "-c", "pass"]) == 0
    (found,) = (tmp_path / "commwall-runs").iterdir()
    assert datetime.strptime(found.name, "%Y%m%dT%H%M%SZ")
    assert str(capture_run.default_dir(datetime(2026, 1, 2, 3, 4, 5))) == (
        "commwall-runs/20260102T030405Z"
    )


# -- the script helper, off ----------------------------------------------------------------------


def test_helper_is_a_no_op_without_a_directory_or_when_switched_off(tmp_path, monkeypatch):
    monkeypatch.delenv("COMMWALL_CAPTURE_DIR", raising=False)
    with capture.profile(steps=range(1, 3)) as prof:
        prof.step()
    assert isinstance(prof, capture.Disabled) and not prof.enabled
    monkeypatch.setenv("COMMWALL_CAPTURE_DIR", str(tmp_path))
    monkeypatch.setenv("COMMWALL_CAPTURE", "0")
    assert isinstance(capture.profile(), capture.Disabled)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("steps", [[], [3, 5], [-1, 0], range(4, 4)])
def test_helper_needs_a_run_of_consecutive_steps(steps):
    with pytest.raises(ValueError, match="consecutive"):
        capture.profile(steps=steps)


def test_importing_commwall_or_the_helper_loads_no_torch():
    code = (
        "import sys, commwall, commwall.capture\n"
        "p = commwall.capture.profile()\n"
        "p.step()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "COMMWALL_CAPTURE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
