"""Shared fixtures: one SparkSession for the whole run (cold start ~10 s), stopped at the end."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark():
    from adaptstream.spark.session import build_spark

    session = build_spark(app_name="adaptstream-tests")
    try:
        yield session
    finally:
        session.stop()


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    """GPU tests run when a CUDA device is present and are skipped (with the reason) otherwise."""
    if any("gpu" in item.keywords for item in items) and not _has_cuda():
        skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
