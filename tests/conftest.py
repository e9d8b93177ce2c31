"""Shared fixtures and the test tiers.

One SparkSession per pytest-xdist worker (cold start ~10 s), stopped at the end; the cluster tier runs on one worker
in turn (``pytest_xdist_make_scheduler`` below: fixed ports and cgroups). Tiers are markers: ``spark`` (a real
SparkSession), ``cluster`` (a standalone cluster), ``redis`` (a real redis-server started by scripts/redis.sh),
``slow`` (more than a few seconds), ``gpu``. Tests that use the ``spark`` or ``redis_server`` fixtures or live in
tests/spark or tests/cluster are marked here, and a test that starts Spark without the
marker fails, so ``pytest -m "not spark and not slow and not cluster"`` is the quick tier. Nothing is written
outside temporary directories: Hypothesis keeps no example database and its home is a temporary directory.
A failed test runs once more only when Spark's planning worker did not connect back within its hard-coded 10 s
(pytest-rerunfailures, pyproject's addopts): an overloaded machine, not the code under test.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
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


_SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


class RedisServer:
    """A redis-server on 127.0.0.1 started by scripts/redis.sh (a free port, a temporary directory), stopped by PID.

    ``stop`` + ``start`` again restarts it on the same port and directory (its append-only file survives)."""

    def __init__(self) -> None:
        self.port: int | None = None
        self.pid: int | None = None
        self.dir: str | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        args = [str(self.port), str(self.dir)] if self.port else []
        done = subprocess.run([str(_SCRIPTS / "redis.sh"), "start", *args], capture_output=True, text=True)
        if done.returncode == 3 and os.environ.get("ADAPTSTREAM_REQUIRE_REDIS") != "1":
            pytest.skip(f"no redis-server: {done.stderr.strip()}")
        if done.returncode != 0:
            raise RuntimeError(f"scripts/redis.sh start failed: {done.stderr.strip()}")
        info = dict(kv.split("=", 1) for kv in done.stdout.split())
        self.port, self.pid, self.dir = int(info["port"]), int(info["pid"]), info["dir"]
        return self

    def stop(self) -> None:
        if self.pid is not None:
            subprocess.run([str(_SCRIPTS / "redis.sh"), "stop", str(self.pid)], check=True)
            self.pid = None

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)

    def cleanup(self) -> None:
        self.stop()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server():
    """One real redis-server for the session; tests use their own stream names."""
    server = RedisServer()
    try:
        yield server.start()
    finally:
        server.cleanup()


@pytest.fixture
def own_redis_server():
    """A redis-server of this test's own (for tests that stop or restart it)."""
    server = RedisServer()
    try:
        yield server.start()
    finally:
        server.cleanup()


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
        if {"redis_server", "own_redis_server"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.redis)
        if (_TESTS / "cluster") in path.parents:
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.slow)
    if any("gpu" in item.keywords for item in items) and not _has_cuda():
        skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent (and harmless) without xdist
def pytest_xdist_make_scheduler(config, log):
    """Load scheduling with every test under tests/cluster in one work unit, so one worker runs them in turn (their
    clusters use fixed ports and cgroups). Grouped by path, not by the ``xdist_group`` marker: pytest 9.2 no longer
    shows xdist the marker's nodeid suffix, and the cluster tests then ran on both workers at once."""
    from xdist.scheduler import LoadGroupScheduling

    class ClusterInTurn(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "cluster" if nodeid.startswith("tests/cluster/") else nodeid

    return ClusterInTurn(config, log)


@pytest.fixture(autouse=True)
def _alone_when_it_measures(request, tmp_path_factory):
    """Under pytest-xdist a test marked ``alone`` (it measures CPU shares or transfer rates) runs with no other test
    beside it: it holds a lock exclusively that every other test holds shared while it runs (closing the file
    releases it)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    lock = tmp_path_factory.getbasetemp().parent / "alone.lock"  # the run's directory, shared by its workers
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if "alone" in request.node.keywords else fcntl.LOCK_SH)
        yield


@pytest.fixture(autouse=True)
def _no_tuner_outlives_its_test():
    """A tuner a test leaves open (it failed before its close()) would make every later ``adaptstream.tune`` on the
    worker's shared SparkSession a ConfigError: one failure became seven in CI. Close it and say so."""
    yield
    tuner_mod = sys.modules.get("adaptstream.tuner")
    if tuner_mod is None:
        return
    for tuner in [t for t in list(tuner_mod._TUNERS.values()) if not t.closed]:
        warnings.warn(f"a test left a tuner open ({tuner.config}); closed by tests/conftest.py", stacklevel=1)
        tuner.close()


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
