"""Elasticity on a real standalone cluster (3 workers of 1 core, 1 GB): executors are removed and added through
Spark's own requests, and ``adaptstream.tune(elastic="prompt")`` scales the executors of a query on Spark's own
``rate`` source out while its batches run late and in once they are early, with every row written once (the work
per row is read from a file the test rewrites, heavy then light, so lateness comes from the query and the
executors, not from the machine).

Runs in a subprocess: the rest of the suite shares one local SparkSession, and a process holds one SparkContext.
"""

from __future__ import annotations

import json
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


def test_executors_are_removed_and_added(cluster3):
    env = {
        **os.environ,
        "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, cluster3], env=env, capture_output=True, text=True, timeout=480, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "START True 3" in out, out + res.stderr[-2000:]
    assert "AFTER_KILL 1" in out, out
    assert "ADD 1 True" in out and "AFTER_ADD 2" in out, out
    assert "JOB 7" in out, out


TUNER_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import adaptstream
    from pyspark.sql import functions as F
    from adaptstream.spark.session import build_spark

    master, out, ck, load, metrics = sys.argv[1:6]
    spark = build_spark(master=master, conf={"spark.executor.memory": "512m", "spark.executor.cores": "1",
                        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    params = "initial_map_tasks=1;initial_reduce_buckets=1;min_tasks=1;max_executors=3;d=2;grace=2"
    tuner = adaptstream.tune(spark, elastic="prompt", elastic_params=params, latency_target=2.0,
                             metrics_path=metrics)

    @F.udf("long")
    def work(v):
        with open(load) as f:
            time.sleep(float(f.read()))
        return v

    df = spark.readStream.format("rate").option("rowsPerSecond", 12).option("numPartitions", 3).load()
    q = (df.select(work("value").alias("value")).writeStream.queryName("ticks").format("parquet")
         .option("path", out).option("checkpointLocation", ck).trigger(processingTime="2 seconds").start())

    def executors():
        return tuner.status()["executors"][-1][1]

    def phase(per_row, until, timeout):
        with open(load + ".tmp", "w") as f:
            f.write(str(per_row))
        os.replace(load + ".tmp", load)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not until():
            q.awaitTermination(1.0)
        print("PHASE", per_row, executors(), round(time.monotonic() - deadline + timeout, 1), flush=True)

    phase(0.0, lambda: executors() == 1, 180)     # light: the plan's one executor
    phase(0.4, lambda: executors() >= 2, 240)     # heavy: batches late -> more executors
    peak = executors()
    phase(0.0, lambda: executors() == 1, 240)     # light again: early batches -> fewer
    q.stop()
    tuner.close()
    print("PEAK", peak, flush=True)
    got = spark.read.parquet(out).agg(F.count("value"), F.countDistinct("value"), F.min("value"), F.max("value"))
    print("OUT", *got.first(), flush=True)  # the committed files only (the file sink's log)
    spark.stop()
""")


def test_the_tuner_scales_executors_of_a_rate_query_out_and_in_without_losing_rows(cluster3, tmp_path):
    load = tmp_path / "per_row_seconds"
    load.write_text("0")
    out, ck, metrics = (str(tmp_path / p) for p in ("out", "ck", "metrics"))
    env = {
        **os.environ,
        "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    res = subprocess.run(
        [sys.executable, "-c", TUNER_SCRIPT, cluster3, out, ck, str(load), metrics],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    lines = [ln.split() for ln in res.stdout.splitlines() if ln.startswith(("PHASE", "PEAK", "OUT"))]
    assert [ln[0] for ln in lines] == ["PHASE", "PHASE", "PHASE", "PEAK", "OUT"], res.stdout
    (_, _, first, _), (_, _, heavy, _), (_, _, light, _), (_, peak), (_, *written) = lines
    assert int(first) == 1 and int(heavy) >= 2 and int(peak) >= 2 and int(light) == 1, res.stdout

    report = json.loads((tmp_path / "metrics" / "tuner.json").read_text())
    counts = [n for _, n in report["executors"]]
    top = counts.index(max(counts))
    assert max(counts) >= 2 and counts[-1] < max(counts) and top < len(counts) - 1, counts  # out, then in
    assert report["elasticity_log"], "the policy logged no decision"
    plans = report["plans"]  # the executors planned after each judged batch, in batch order
    assert plans and all(q == "ticks" and 1 <= n <= 3 and w == 0 for q, _, n, w in plans), plans  # no scheduler
    assert [p[1] for p in plans] == sorted(p[1] for p in plans) and max(p[2] for p in plans) >= 2
    q = report["queries"]["ticks"]
    count, distinct, lo, hi = map(int, written)
    assert count == distinct == q["rows"] > 0  # every row of every completed batch, written once
    assert (lo, hi) == (0, count - 1)  # the rate source's values from the first: none missing in between


def test_kill_9_of_a_tuned_application_resumes_its_elasticity_plan(spark, cluster3, tmp_path):
    """SIGKILL of an application under ``tune(scheduler="klink", elastic="prompt", state_path=...)`` on the
    cluster, inside a batch, then a restart on the same checkpoint and state: both policies' states are restored as
    last saved, Alg. 4 goes on from the restored plan (its first decision after the restart starts from it, not
    from the initial plan), and the output equals batch SQL. Every batch is late against a 0.05 s target, so Alg. 4
    (d=1, no grace) scales out after each one: the plan at the kill is not the initial one."""
    src = tmp_path / "in"
    src.mkdir()
    for i in range(6):
        (src / f"{i}.csv").write_text("".join(f"k{(i * 7 + j) % 5},{i * 100 + j}\n" for j in range(20)))
    out, ck, state, metrics = (tmp_path / p for p in ("out", "ck", "state", "metrics"))
    here = os.path.join(ROOT, "tests", "spark", "tuner_driver.py")
    env = {
        **os.environ,
        "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TUNER_MASTER": cluster3,
        "TUNER_ELASTIC_PARAMS": "initial_map_tasks=1;initial_reduce_buckets=1;min_tasks=1;max_executors=3;d=1;grace=0",
        "TUNER_LATENCY_TARGET": "0.05",
        "TUNER_METRICS": str(metrics),
    }
    driver = [sys.executable, here, str(src), str(out), str(ck), str(state)]
    killed = subprocess.run([*driver, "3"], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    saved = json.loads((state / "tuner-policies.json").read_text())
    elastic = saved["policies"]["elasticity"]
    assert elastic["policy"] == "prompt" and elastic["state"]["batches"] >= 1, elastic
    p, r = elastic["state"]["p"], elastic["state"]["r"]
    assert (p, r) != (1, 1), elastic  # scaled out before the kill

    finished = subprocess.run(driver, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-3000:]
    restored = json.loads(next(x for x in finished.stdout.splitlines() if x.startswith("RESTORED "))[9:])
    assert restored == {"offset": saved["offset"], "scheduler": saved["policies"]["scheduler"], "elasticity": elastic}
    report = json.loads((metrics / "tuner.json").read_text())
    decisions = report["elasticity_log"]  # the restarted run's decisions only (the log is not state)
    assert decisions and decisions[0]["from"] == [p, r] and decisions[0]["direction"] == "out", decisions
    got = sorted(tuple(x) for x in spark.read.parquet(str(out)).select("k", "v").collect())
    want = sorted(tuple(x) for x in spark.read.schema("k STRING, v INT").csv(str(src)).collect())
    assert got == want and len(got) == 120


def test_cli_runs_several_workloads_under_one_tuner_that_schedules_and_scales(cluster3, tmp_path):
    """``adaptstream run --workload LR1S --workload CM2S --scheduler klink --elastic prompt --master URL``: the
    application's tuner schedules both queries and plans the executors in one loop (the scheduler's slots follow
    the last plan); every generated row is processed once."""
    from adaptstream.metrics.summary import load_datasets

    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "SPARK_LOCAL_IP": "127.0.0.1"}  # fmt: skip
    params = "initial_map_tasks=1;initial_reduce_buckets=1;min_tasks=1;max_executors=3;d=1;grace=0"
    args = [
        *("run", "--workload", "LR1S", "--workload", "CM2S", "--scheduler", "klink", "--elastic", "prompt"),
        *("--elastic-params", params, "--master", cluster3, "--rate", "200", "--duration", "12"),
        *("--run-dir", str(run_dir)),
    ]
    res = subprocess.run([sys.executable, "-m", "adaptstream.cli", *args], env=env, capture_output=True, text=True,
                         timeout=600, check=False, cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "elasticity prompt: executors" in " ".join(res.stdout.split()), res.stdout[-2000:]
    report = json.loads((run_dir / "tuner" / "tuner.json").read_text())
    assert (report["scheduler"], report["elastic"]) == ("klink", "prompt")
    assert len(report["queries"]) == 2 and all(q["decisions"] > 0 for q in report["queries"].values()), report
    assert report["plans"] and report["executors"], report
    assert report["slots"] == report["plans"][-1][2]  # the scheduler's slots follow the executors planned
    for name in ("LR1S", "CM2S"):
        assert load_datasets(str(run_dir / name / "metrics"))["rows"].sum() == 200 * 12, name
