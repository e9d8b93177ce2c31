"""Lint, format and type checks run with the tests, so the README's one test command covers them (and CI with it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ["src", "tests", "scripts", "benchmarks"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_check_is_clean() -> None:
    res = _run("ruff", "check", *TREES)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_ruff_format_is_clean() -> None:
    res = _run("ruff", "format", "--check", *TREES)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


@pytest.mark.slow  # a cold mypy run takes about a minute
def test_mypy_is_clean() -> None:
    res = _run("mypy", "src")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
