"""Elasticity on a real standalone cluster (3 workers of 1 core, 1 GB): executors are removed and added through
Spark's own requests, and a pane-mode query whose policy asks for more executors gets them.

Runs in a subprocess: the rest of the suite shares one local SparkSession, and a process holds one SparkContext.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = textwrap.dedent("""
    import os, sys
    from adaptstream.spark.executors import ExecutorControl
    from adaptstream.spark.session import build_spark
    spark = build_spark(master=sys.argv[1], conf={"spark.executor.memory": "512m", "spark.executor.cores": "1",
                        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    ctl = ExecutorControl(spark.sparkContext)
    print("START", ctl.wait_for(3, timeout=120), len(ctl.executors()))
    print("KILL", ctl.scale_to(1)["killed"], ctl.wait_for(1, timeout=60))
    print("AFTER_KILL", len(ctl.executors()))
    print("ADD", ctl.scale_to(2)["requested"], ctl.wait_for(2, timeout=120))
    print("AFTER_ADD", len(ctl.executors()))
    n = spark.range(0, 1000, 1, 4).selectExpr("id % 7 AS k").groupBy("k").count().count()
    print("JOB", n)
    spark.stop()
""")


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    env = {
        **os.environ,
        "ADAPTSTREAM_CLUSTER_DIR": str(tmp_path_factory.mktemp("cluster")),
        "ADAPTSTREAM_MASTER_PORT": "7178",
        "PYTHON": sys.executable,
        "ADAPTSTREAM_WORKER_MEMORY": "1g",
    }
    try:  # a start that times out may leave daemons behind: stop in every case
        url = subprocess.run(
            ["bash", f"{ROOT}/scripts/cluster.sh", "start", "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout.strip()
        yield url
    finally:
        subprocess.run(["bash", f"{ROOT}/scripts/cluster.sh", "stop"], env=env, timeout=120, check=False)


def test_executors_are_removed_and_added(master):
    env = {
        **os.environ,
        "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, master], env=env, capture_output=True, text=True, timeout=480, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "START True 3" in out, out + res.stderr[-2000:]
    assert "AFTER_KILL 1" in out, out
    assert "ADD 1 True" in out and "AFTER_ADD 2" in out, out
    assert "JOB 7" in out, out
