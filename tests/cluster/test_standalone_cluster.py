"""The source on a real Spark standalone cluster (master + 2 workers on 127.0.0.1, started by scripts/cluster.sh).

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
    from adaptstream.spark.session import build_spark
    src, out = sys.argv[1], sys.argv[2]
    spark = build_spark(master=sys.argv[3], conf={"spark.executor.memory": "1g",
                        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    q = (spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", src)
         .option("metricsPath", out + "/metrics").option("numBlocks", "4").load()
         .writeStream.format("parquet").option("path", out + "/data")
         .option("checkpointLocation", out + "/ck").start())
    q.processAllAvailable(); q.stop()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    rows = sorted(tuple(r) for r in spark.read.parquet(out + "/data").collect())
    expected = sorted(tuple(r) for r in spark.read.schema("k STRING, v INT").csv(src).collect())
    print("EXECUTORS", executors, "EQUAL", rows == expected, "ROWS", len(rows))
    spark.stop()
""")


@pytest.fixture(scope="module")
def master(tmp_path_factory, standalone_cluster):
    with standalone_cluster(str(tmp_path_factory.mktemp("cluster")), 2, 7177) as url:
        yield url


def test_source_on_standalone_cluster_equals_batch(master, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        (src / f"{i}.csv").write_text("".join(f"k{j},{i * 100 + j}\n" for j in range(25)))
    env = {
        **os.environ,
        "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(src), str(tmp_path / "out"), master],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "EXECUTORS 2 EQUAL True ROWS 100" in res.stdout, res.stdout + res.stderr[-2000:]
