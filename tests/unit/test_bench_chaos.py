"""bench chaos: the verdict rule per kind, the report rendered from its JSON alone, input written whole, and the
Python workers of a session found by their command line."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptstream.errors import ConfigError
from adaptstream_bench.chaos import chaos_command, error_lines, python_workers, write_input
from adaptstream_bench.chaos_report import targets, write_report
from adaptstream_bench.procs import kill_session


def _trial(kind="driver-files", lost=0, dup=0, wrong=0, rc=0, killed="driver process group", k=0):
    return {"kind": kind, "trial": k, "seed": k, "kill_at_s": 5.0 + k, "killed": killed, "first_rc": -9,
            "commits_before_restart": k, "restart_rc": rc, "restart_s": 12.0, "restart_error": "" if rc == 0
            else "boom", "unit": "rows", "expected": 100, "got": 100 - lost + dup, "lost": lost, "duplicated": dup,
            "wrong": wrong, "load": 1.0}  # fmt: skip


def _data(trials, skipped=()):
    meta = {"command": "adaptstream bench chaos", "git": "x", "started": 0.0, "machine": {"host": "h", "cpus": 2,
            "python": "3.11"}, "load_before": [1.0, 1.0, 1.0], "sizing": "test"}  # fmt: skip
    return {"meta": meta, "trials": list(trials), "skipped": list(skipped)}


@pytest.mark.parametrize(
    ("trials", "skipped", "met"),
    [
        ([_trial(k=0), _trial(k=1)], (), True),
        ([_trial(k=0), _trial(k=1, dup=1)], (), False),  # one duplicate misses the kind
        ([_trial(k=0), _trial(k=1, lost=3)], (), False),
        ([_trial(k=0, wrong=1)], (), False),
        ([_trial(k=0, rc=1)], (), False),  # a restart that does not drain
        ([_trial(k=0, killed="not killed: the driver finished first")], (), None),  # nothing was killed
        ([_trial(k=0)], ("driver-files trial 2",), None),  # the budget cut a trial
    ],
)
def test_one_verdict_per_kind(trials, skipped, met):
    (t,) = targets(_data(trials, skipped))
    assert t["met"] is met


def test_report_from_the_json_alone(tmp_path):
    data = _data([_trial(k=0), _trial("worker-files", k=0, killed="python worker (1 of 2)"),
                  _trial("worker-files", k=1, rc=1)])  # fmt: skip
    data["trials"][1].update(first_rc=1, first_error="StreamingQueryException: worker died")
    write_report(data, tmp_path)
    saved = json.loads((tmp_path / "chaos.json").read_text())
    assert [t["met"] for t in saved["targets"]] == [True, False]
    md = (tmp_path / "chaos.md").read_text()
    assert "**met**" in md and "**missed**" in md and "Failed restarts" in md and "boom" in md
    assert "worker died" in md
    assert (tmp_path / "chaos.png").stat().st_size > 1000
    saved.pop("targets")
    write_report(saved, tmp_path)  # re-rendered from what was saved
    assert (tmp_path / "chaos.md").read_text() == md


def test_input_files_are_whole_and_the_pane_rows_carry_event_times(tmp_path):
    write_input("driver-files", tmp_path / "a", 3, random.Random(0))
    assert sorted(os.listdir(tmp_path / "a")) == ["000.csv", "001.csv", "002.csv"]
    assert (tmp_path / "a" / "001.csv").read_text().splitlines()[:2] == ["k1,0", "k1,1"]
    write_input("driver-pane", tmp_path / "b", 2, random.Random(0))
    k, ts, v = (tmp_path / "b" / "001.csv").read_text().splitlines()[0].split(",")
    assert k.startswith("k") and ts.startswith("2024-01-01 00:01:") and 0 <= int(v) < 1000


CHILD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setpgid(0, 0); time.sleep(60)", "-m",
                          "pyspark." + "daemon", "pyspark.worker"])  # the parent's own command line names no daemon
print(child.pid, flush=True)
time.sleep(60)
"""


def _dead(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_python_workers_are_found_in_the_session_even_in_a_group_of_their_own():
    """pyspark.daemon leads a process group of its own: only the session holds the driver's Python workers."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD], start_new_session=True, stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        child = int(proc.stdout.readline())
        while os.getpgid(child) != child:  # the child has not left the group yet
            pass
        assert python_workers(proc.pid) == [(child, "worker")]
        assert python_workers(other.pid) == []  # its own session, no pyspark on its command line
        assert kill_session(proc.pid) >= 2
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while not _dead(child) and time.monotonic() < deadline:
            pass  # killed; init reaps it when it gets to it
        assert _dead(child)
    finally:
        for p in (proc, other):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_the_controller_kind_writes_two_queries_of_their_own_keys(tmp_path):
    write_input("controller", tmp_path / "c", 4, random.Random(0))
    assert sorted(os.listdir(tmp_path / "c" / "a")) == ["000.csv", "002.csv"]
    assert sorted(os.listdir(tmp_path / "c" / "b")) == ["001.csv", "003.csv"]
    assert (tmp_path / "c" / "b" / "003.csv").read_text().splitlines()[0] == "b3,0"


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="--kinds"):
        chaos_command(kinds="driver,files")
    with pytest.raises(ConfigError, match="--kill-to"):
        chaos_command(kill_from=10.0, kill_to=5.0)


def test_error_lines_keep_what_names_the_error():
    text = "Traceback\n  File x\nadaptstream.errors.ConnectorError: offset 1 is beyond\n\tat org.X(Y)\nState: ACTIVE"
    assert error_lines(text) == "adaptstream.errors.ConnectorError: offset 1 is beyond"
    assert error_lines("no words of failure") == "no words of failure"


def test_batches_committed_count_commit_files_not_their_crc_and_old_runs_say_what_they_counted(tmp_path):
    from adaptstream_bench.chaos_report import committed, committed_label

    old = _trial(k=3)  # recorded with the file count of commits/
    new = {**_trial(k=1), "batches_committed_before_restart": 5}
    new.pop("commits_before_restart")
    assert committed(old) == 3 and committed(new) == 5
    assert committed_label([new]) == "batches committed before restart"
    assert ".crc" in committed_label([old, new])
