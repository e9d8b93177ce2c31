"""The CLI shows clean errors (no traceback) that list the valid choices."""

from __future__ import annotations

import os
import subprocess
import sys

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "adaptstream.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_unknown_admission_lists_choices_without_traceback():
    res = _cli("run", "--admission", "sometimes")
    assert res.returncode == 2
    out = res.stdout + res.stderr
    assert "valid choices: asap, fixed, lmstream" in out
    assert "Traceback" not in out


def test_unknown_workload_lists_choices():
    res = _cli("run", "--workload", "LR9Z")
    assert res.returncode == 2
    assert "LR1S" in res.stdout + res.stderr


def test_help_lists_commands():
    res = _cli("--help")
    assert res.returncode == 0
    for cmd in ("run", "demo", "bench"):
        assert cmd in res.stdout
