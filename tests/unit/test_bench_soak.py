"""bench soak: processes sampled from /proc by role, and the growth rule per role and measure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from adaptstream.errors import ConfigError
from adaptstream_bench.soak import ROLES, role_of, sample, soak_command
from adaptstream_bench.soak_report import targets, write_report


def _s(t, rss=100, fds=50, threads=20, procs=1):
    one = {"procs": procs, "rss_mb": rss, "fds": fds, "threads": threads}
    return {"t": t, **{r: dict(one) for r in ROLES}}


def _data(samples, exit_status=0):
    meta = {"command": "adaptstream bench soak", "git": "x", "started": 0.0, "machine": {"host": "h", "cpus": 2,
            "python": "3.11"}, "load_before": [1.0, 1.0, 1.0], "sizing": "test", "minutes": 10.0,
            "warmup_minutes": 2.0, "exit_status": exit_status, "sampled": "test"}  # fmt: skip
    return {"meta": meta, "samples": samples}


def test_flat_run_meets_growth_misses_and_missing_samples_stay_undecided():
    flat = [_s(t) for t in range(0, 600, 10)]
    assert {t["met"] for t in targets(_data(flat))} == {True}
    grown = [_s(t, rss=100 if t < 300 else 120) for t in range(0, 600, 10)]
    rss = [t for t in targets(_data(grown)) if "RSS" in t["target"]]
    assert [t["met"] for t in rss] == [False] * len(ROLES)
    short = [_s(t) for t in range(0, 300, 10)]  # the run ended before its last minute
    assert {t["met"] for t in targets(_data(short))} == {None}
    assert {t["met"] for t in targets(_data(flat, exit_status=1))} == {None}


def test_report_from_the_json_alone(tmp_path):
    write_report(_data([_s(t) for t in range(0, 600, 10)]), tmp_path)
    saved = json.loads((tmp_path / "soak.json").read_text())
    assert len(saved["targets"]) == 3 * len(ROLES)
    md = (tmp_path / "soak.md").read_text()
    assert "**met**" in md and (tmp_path / "soak.png").stat().st_size > 1000


def test_roles_by_command_line():
    assert role_of(7, 7, b"python -c main run") == "driver"
    assert role_of(8, 7, b"/usr/lib/jvm/bin/java -cp x") == "jvm"
    assert role_of(9, 7, b"python -m pyspark.sql.streaming.python_streaming_source_runner") == "source"
    assert role_of(10, 7, b"python -m pyspark.daemon pyspark.worker") == "workers"
    assert role_of(11, 7, b"sleep 5") is None


def test_sample_reads_the_session_from_proc():
    code = "import sys, time; b = bytearray(20 << 20); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"  # started and holding 20 MB
        s = sample(proc.pid)
        assert s["driver"]["procs"] == 1 and s["driver"]["rss_mb"] >= 20 and s["driver"]["fds"] >= 3
        assert s["driver"]["threads"] >= 1 and s["jvm"]["procs"] == 0
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_warmup_longer_than_the_run_is_a_config_error():
    with pytest.raises(ConfigError, match="--warmup-minutes"):
        soak_command(minutes=2.0, warmup_minutes=3.0)
