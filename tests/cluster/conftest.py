"""Standalone clusters for the cluster tier, started by scripts/cluster.sh (through the harness's LocalCluster) on
127.0.0.1 with their files in temporary directories, and always stopped (a start that fails stops what it started)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from adaptstream_bench.cluster import LocalCluster


@contextlib.contextmanager
def standalone(directory: str, workers: int, port: int, worker_memory: str | None = None) -> Iterator[str]:
    """A cluster of ``workers`` one-core workers; yields its master URL."""
    with LocalCluster(workers, directory, port, worker_memory=worker_memory) as url:
        yield url


@pytest.fixture(scope="session")
def standalone_cluster():
    """``standalone`` for a test module's own cluster (another size or port)."""
    return standalone


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory) -> Iterator[str]:
    """Three workers of one core and 1 GB for a module's tests (each test is its own application)."""
    with standalone(str(tmp_path_factory.mktemp("cluster3")), 3, 7178, "1g") as url:
        yield url
