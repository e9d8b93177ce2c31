"""Standalone clusters for the cluster tier, started by scripts/cluster.sh on 127.0.0.1 with their files in
temporary directories, and always stopped (a start that times out may leave daemons behind)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@contextlib.contextmanager
def standalone(directory: str, workers: int, port: int, worker_memory: str | None = None) -> Iterator[str]:
    """A cluster of ``workers`` one-core workers; yields its master URL."""
    env = {
        **os.environ,
        "ADAPTSTREAM_CLUSTER_DIR": directory,
        "ADAPTSTREAM_MASTER_PORT": str(port),
        "PYTHON": sys.executable,
    }
    if worker_memory:
        env["ADAPTSTREAM_WORKER_MEMORY"] = worker_memory
    try:
        yield subprocess.run(
            ["bash", f"{ROOT}/scripts/cluster.sh", "start", str(workers)],
            env=env, capture_output=True, text=True, timeout=300, check=True,
        ).stdout.strip()  # fmt: skip
    finally:
        subprocess.run(["bash", f"{ROOT}/scripts/cluster.sh", "stop"], env=env, timeout=120, check=False)


@pytest.fixture(scope="session")
def standalone_cluster():
    """``standalone`` for a test module's own cluster (another size or port)."""
    return standalone


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory) -> Iterator[str]:
    """Three workers of one core and 1 GB for a module's tests (each test is its own application)."""
    with standalone(str(tmp_path_factory.mktemp("cluster3")), 3, 7178, "1g") as url:
        yield url
