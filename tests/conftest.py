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
