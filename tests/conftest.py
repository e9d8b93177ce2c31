"""Shared fixtures and the test tiers.

One SparkSession for the whole run (cold start ~10 s), stopped at the end. Tiers are markers: ``spark`` (a real
SparkSession), ``cluster`` (a standalone cluster), ``slow`` (more than a few seconds), ``gpu``. Tests that use the
``spark`` fixture or live in tests/spark or tests/cluster are marked here, and a test that starts Spark without the
marker fails, so ``pytest -m "not spark and not slow and not cluster"`` is the quick tier. Nothing is written
outside temporary directories: Hypothesis keeps no example database and its home is a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="adaptstream-hypothesis-")


def _check_import_tree() -> None:
    """Fail early when the tests would exercise another checkout's code (an editable install of a sibling tree)."""
    import adaptstream

    here = Path(__file__).resolve().parents[1]
    pkg = Path(adaptstream.__file__).resolve()
    if pkg.parent.parent.name == "src" and here not in pkg.parents:
        raise pytest.UsageError(
            f"adaptstream is imported from {pkg.parent}, not from this checkout ({here}/src): "
            f"run with PYTHONPATH={here}/src"
        )


_check_import_tree()


def _configure_hypothesis() -> None:
    try:
        from hypothesis import settings
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        return
    set_hypothesis_home_dir(_HYPOTHESIS_HOME)
    settings.register_profile("adaptstream", database=None)
    settings.load_profile("adaptstream")


_configure_hypothesis()


def pytest_unconfigure(config):
    shutil.rmtree(_HYPOTHESIS_HOME, ignore_errors=True)


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


_TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    """Mark the tiers from what a test uses and where it lives; skip GPU tests (with the reason) without CUDA."""
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if "spark" in getattr(item, "fixturenames", ()) or (_TESTS / "spark") in path.parents:
            item.add_marker(pytest.mark.spark)
        if (_TESTS / "cluster") in path.parents:
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.slow)
    if any("gpu" in item.keywords for item in items) and not _has_cuda():
        skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def _spark_context_active() -> bool:
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


@pytest.fixture(autouse=True)
def _spark_needs_the_marker(request):
    """A test outside the spark tier must not start Spark: it would make the quick tier slow and order-dependent."""
    before = _spark_context_active()
    yield
    if not before and "spark" not in request.node.keywords and _spark_context_active():
        pytest.fail("this test started a SparkContext: mark it @pytest.mark.spark (or use the spark fixture)")
