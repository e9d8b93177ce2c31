"""``adaptstream.tune`` and ``adaptstream submit`` on a user's own application (examples/app: own schemas, CSV
directories and a Redis stream): every query's output equals the same query in batch SQL, every query is scheduled
(decisions > 0), bad input is refused with clear errors, and the scheduler's state survives a restart."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import uuid

import pytest

import adaptstream
from adaptstream.errors import ConfigError

pytestmark = pytest.mark.spark
APP_DIR = pathlib.Path(__file__).parents[2] / "examples" / "app"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", APP_DIR / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def drain_and_stop(queries) -> None:
    """Process what each query's input holds now, then stop them all (also when one fails)."""
    try:
        for q in queries:
            q.processAllAvailable()
    finally:
        for q in queries:
            q.stop()


def _rows(df) -> list[tuple]:
    return sorted(tuple(round(x, 9) if isinstance(x, float) else x for x in r) for r in df.collect())


def expected(spark, app, data: str, events_csv: str) -> dict[str, list[tuple]]:
    """The three queries of the example, in batch SQL over the same input."""
    from pyspark.sql import functions as F

    readings = spark.read.schema(app.READINGS).csv(os.path.join(data, "readings"))
    orders = spark.read.schema(app.ORDERS).csv(os.path.join(data, "orders"))
    events = spark.read.schema(app.EVENTS).csv(events_csv)
    return {
        "sensor_avg": _rows(
            readings.groupBy("sensor", F.window("ts", "10 seconds")).agg(F.avg("reading").alias("avg_reading"))
        ),
        "big_orders": _rows(orders.where("amount > 10").select("order_id", "customer", "amount")),
        "actions": _rows(events.groupBy("action", F.window("ts", "10 seconds")).count()),
    }


@pytest.mark.redis
def test_the_example_application_under_klink_equals_batch_sql_and_every_query_is_scheduled(
    spark, redis_server, tmp_path
):
    app, make = _load("app"), _load("make_data")
    data, out = str(tmp_path / "data"), str(tmp_path / "out")
    url = f"{redis_server.url}/events-{uuid.uuid4().hex[:8]}"
    assert make.main([data, url]) == 0
    events_csv = tmp_path / "events.csv"
    events_csv.write_text("\n".join(make.events()) + "\n")

    with adaptstream.tune(spark, scheduler="klink", metrics_path=str(tmp_path / "metrics")) as tuner:
        assert adaptstream.tune(spark, scheduler="klink", metrics_path=str(tmp_path / "metrics")) is tuner
        with pytest.raises(ConfigError, match="tuned already"):
            adaptstream.tune(spark, scheduler="rr")
        adaptstream.register(spark)  # the example's call: a no-op under the tuner
        queries = app.start_queries(spark, data, out, url)
        drain_and_stop(queries)
        status = tuner.status()
    assert status["scheduler"] == "klink" and set(status["queries"]) == {"sensor_avg", "big_orders", "actions"}
    for name, q in status["queries"].items():
        assert q["batches"] > 0 and q["decisions"] > 0 and q["sources"], (name, q)
    assert len(status["registered"]) == 3
    report = json.loads((tmp_path / "metrics" / "tuner.json").read_text())
    assert report["scheduler"] == "klink" and report["queries"].keys() == status["queries"].keys()

    want = expected(spark, app, data, str(events_csv))
    for name in ("sensor_avg", "big_orders", "actions"):
        assert _rows(spark.read.parquet(os.path.join(out, name))) == want[name], name


def test_bad_input_to_tune_is_refused_with_the_valid_choices(spark, tmp_path):
    with pytest.raises(ConfigError, match="valid choices: default, fair, fcfs, hr, klink, rr, sbox"):
        adaptstream.tune(spark, scheduler="klnk")
    with pytest.raises(ConfigError, match=r"has no parameter\(s\) \['hodl'\]"):
        adaptstream.tune(spark, scheduler="klink", scheduler_params="hodl=1")
    with pytest.raises(ConfigError, match="needs a cluster manager"):
        adaptstream.tune(spark, elastic="prompt")
    with pytest.raises(ConfigError, match=r"has no parameter\(s\) \['histroy'\]"):
        adaptstream.tune(spark, admission="lmstream", admission_params="histroy=3")
    with pytest.raises(ConfigError, match=r"spark\.scheduler\.mode=FAIR"):
        adaptstream.tune(spark, scheduler="fair")


def test_the_scheduler_state_survives_a_restart_of_the_application(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        (src / f"{i}.csv").write_text("".join(f"k{j},{j}\n" for j in range(5)))
    state, ck = str(tmp_path / "tuner-state"), str(tmp_path / "ck")

    def run(tuner) -> None:
        df = (
            spark.readStream.format("adaptstream")
            .schema("k STRING, v INT")
            .option("path", str(src))
            .option("fileStableSeconds", "0")
            .option("windowPeriod", "2 seconds")
            .load()
        )
        q = df.writeStream.queryName("mine").format("noop").option("checkpointLocation", ck).start()
        try:
            q.processAllAvailable()
        finally:
            q.stop()

    with adaptstream.tune(spark, scheduler="klink", state_path=state) as first:
        assert first.restored is None  # nothing saved yet: a fresh start
        run(first)
        seen = first.status()["queries"]["mine"]
        assert seen["decisions"] > 0 and len(seen["sources"]) == 1
    (source,) = seen["sources"]
    saved = json.loads((tmp_path / "tuner-state" / "tuner-policies.json").read_text())
    klink_state = saved["policies"]["scheduler"]
    assert klink_state["policy"] == "klink" and source in klink_state["state"]["queries"]

    (src / "3.csv").write_text("k9,9\n")
    with adaptstream.tune(spark, scheduler="klink", state_path=state) as second:
        assert second.restored == saved["offset"]
        assert second.controller.policy.state_dict() == klink_state  # restored before any query registers
        run(second)  # the same query restarts from its checkpoint, under the same source name
        after = second.status()["queries"]["mine"]
    assert after["sources"] == [source] and after["decisions"] > 0
    resumed = second.controller.policy.queries[source]
    assert resumed.batches > klink_state["state"]["queries"][source]["batches"]


@pytest.mark.slow
def test_kill_9_of_the_driver_inside_a_batch_resumes_outputs_and_scheduler_state(spark, tmp_path):
    """SIGKILL of a tuned application after a batch reached its sink but before Spark committed it: the restart
    from the same checkpoint and state path restores the scheduler's saved state before any query registers, and
    the output equals batch SQL (the replayed batch overwrites its batch id: nothing lost, nothing twice)."""
    src = tmp_path / "in"
    src.mkdir()
    for i in range(5):
        (src / f"{i}.csv").write_text("".join(f"k{(i * 7 + j) % 5},{i * 100 + j}\n" for j in range(20)))
    out, ck, state = tmp_path / "out", tmp_path / "ck", tmp_path / "state"
    here = pathlib.Path(__file__).resolve()
    env = {**os.environ, "PYTHONPATH": str(here.parents[2] / "src"), "SPARK_LOCAL_IP": "127.0.0.1"}
    driver = [sys.executable, str(here.with_name("tuner_driver.py")), str(src), str(out), str(ck), str(state)]
    killed = subprocess.run([*driver, "3"], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (ck / "commits" / "3").exists()  # batch 3 reached the sink, Spark did not commit it
    saved = json.loads((state / "tuner-policies.json").read_text())
    klink = saved["policies"]["scheduler"]
    assert klink["policy"] == "klink" and klink["state"]["queries"]  # learned before the kill
    finished = subprocess.run(driver, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    restored = json.loads(next(x for x in finished.stdout.splitlines() if x.startswith("RESTORED "))[9:])
    assert restored == {"offset": saved["offset"], "scheduler": klink}
    got = _rows(spark.read.parquet(str(out)).select("k", "v"))
    assert got == _rows(spark.read.schema("k STRING, v INT").csv(str(src)))
    assert len(got) == 100


# -- adaptstream submit: the same application, unmodified --------------------------------------------------
def _submit(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "adaptstream.cli", "submit", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.redis
@pytest.mark.slow
def test_the_example_application_unmodified_under_submit(spark, redis_server, tmp_path):
    make = _load("make_data")
    data, out, metrics = (str(tmp_path / p) for p in ("data", "out", "metrics"))
    url = f"{redis_server.url}/events-{uuid.uuid4().hex[:8]}"
    assert make.main([data, url]) == 0
    done = _submit(str(APP_DIR / "app.py"), data, out, url, "--scheduler", "klink", "--metrics", metrics)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    for name in ("sensor_avg", "big_orders", "actions"):
        assert name in done.stdout
    report = json.loads((tmp_path / "metrics" / "tuner.json").read_text())
    assert report["scheduler"] == "klink" and report["elastic"] is None and report["exit_status"] == 0
    assert set(report["queries"]) == {"sensor_avg", "big_orders", "actions"}
    for name, q in report["queries"].items():
        assert isinstance(q["batches"], int) and q["batches"] > 0, name
        assert isinstance(q["decisions"], int) and q["decisions"] > 0, name
    assert all(len(x) == 2 and x[1] >= 1 for x in report["executors"])

    events_csv = tmp_path / "events.csv"
    events_csv.write_text("\n".join(make.events()) + "\n")
    want = expected(spark, _load("app"), data, str(events_csv))
    for name in ("sensor_avg", "big_orders", "actions"):
        assert _rows(spark.read.parquet(os.path.join(out, name))) == want[name], name


def test_a_script_that_raises_keeps_its_status_shows_its_traceback_once_and_closes_the_tuner(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "q = spark.readStream.format('rate').load().writeStream.queryName('left_running').format('noop').start()\n"
        "raise RuntimeError('boom in the application')\n"
    )
    done = _submit(str(script), "--metrics", str(tmp_path / "m"), "--scheduler", "rr")
    assert done.returncode == 1
    assert done.stderr.count("RuntimeError: boom in the application") == 1
    assert done.stderr.count("Traceback") == 1
    report = json.loads((tmp_path / "m" / "tuner.json").read_text())
    assert report["closed"] and report["exit_status"] == 1 and report["scheduler"] == "rr"


def test_submit_of_a_missing_script_is_one_line_before_spark_starts(tmp_path):
    done = _submit(str(tmp_path / "nope.py"), timeout=60)
    assert done.returncode == 2 and "no such application script" in done.stderr
    assert "Traceback" not in done.stderr


# -- adaptstream run --sql: one's own queries over one's own files from the CLI ---------------------------------
def _cli(capsys, *args: str) -> tuple[int, str]:
    from adaptstream import cli

    try:
        cli.main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out + out.err


def test_run_sql_runs_several_own_queries_under_klink_equal_to_batch_sql(spark, tmp_path, capsys, monkeypatch):
    from adaptstream import cli

    monkeypatch.setattr(cli.run, "_spark", lambda master, log_file, shuffle_partitions=2: spark)
    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        (src / f"{i}.csv").write_text("".join(f"k{j % 3},{i * 10 + j}\n" for j in range(10)))
    run = tmp_path / "run"
    code, out = _cli(
        capsys, "run", "--input", str(src), "--schema", "k STRING, v INT", "--scheduler", "klink",
        "--sql", "SELECT k, v FROM input WHERE v % 2 = 0",
        "--sql", "SELECT k, count(*) AS n, sum(v) AS s FROM input GROUP BY k",
        "--run-dir", str(run),
    )  # fmt: skip
    assert code == 0, out
    assert "Traceback" not in out and "q1" in out and "q2" in out
    batch = spark.read.schema("k STRING, v INT").csv(str(src))
    batch.createOrReplaceTempView("input_batch")
    want1 = _rows(spark.sql("SELECT k, v FROM input_batch WHERE v % 2 = 0"))
    want2 = _rows(spark.sql("SELECT k, count(*) AS n, sum(v) AS s FROM input_batch GROUP BY k"))
    assert _rows(spark.read.parquet(str(run / "q1" / "output"))) == want1
    assert _rows(spark.read.parquet(str(run / "q2" / "output"))) == want2
    report = json.loads((run / "sql.json").read_text())
    assert [report["queries"][q]["mode"] for q in ("q1", "q2")] == ["append", "complete"]
    assert all(report["queries"][q]["decisions"] > 0 for q in ("q1", "q2")), report["queries"]
    assert json.loads((run / "tuner.json").read_text())["scheduler"] == "klink"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--sql", "SELEC k FROM input"), "--sql 1 ('SELEC k FROM input'): [PARSE_SYNTAX_ERROR]"),
        (("--sql", "SELECT nope FROM input"), "UNRESOLVED_COLUMN"),
        (("--sql", "SELECT 1", "--workload", "LR1S"), "either --workload"),
    ],
)
def test_run_sql_errors_are_one_line(spark, tmp_path, capsys, monkeypatch, args, expected):
    from adaptstream import cli

    monkeypatch.setattr(cli.run, "_spark", lambda master, log_file, shuffle_partitions=2: spark)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("x,1\n")
    code, out = _cli(capsys, "run", "--input", str(tmp_path / "in"), "--schema", "k STRING, v INT", *args,
                     "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert code != 0 and expected in " ".join(out.split()), out
    assert "Traceback" not in out


def test_a_query_that_fails_is_noted_and_the_others_go_on(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.csv").write_text("k1,1\nk2,2\n")
    with adaptstream.tune(spark, scheduler="klink") as tuner:
        good = (
            spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", str(src))
            .option("fileStableSeconds", "0").load()
            .writeStream.queryName("good").format("memory").start()
        )  # fmt: skip
        bad = (
            spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", str(src))
            .option("numBlocks", "0").load()  # refused by the source once the query starts
            .writeStream.queryName("bad").format("noop").start()
        )  # fmt: skip
        try:
            from pyspark.errors import StreamingQueryException

            with pytest.raises(StreamingQueryException, match="numBlocks"):
                bad.awaitTermination(60)
            good.processAllAvailable()
            assert sorted(tuple(r) for r in spark.table("good").collect()) == [("k1", 1), ("k2", 2)]
        finally:
            good.stop()
            bad.stop()
        queries = tuner.status()["queries"]
    assert queries["bad"]["state"].startswith("failed:") and "numBlocks" in queries["bad"]["state"]
    assert queries["good"]["state"] == "stopped" and queries["good"]["batches"] > 0


def test_a_taken_controller_port_falls_back_to_a_free_one(spark, caplog):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with adaptstream.tune(spark, scheduler="rr", port=port) as tuner:
            assert tuner.controller.port not in (0, port)
            assert tuner.status()["controller"] == f"127.0.0.1:{tuner.controller.port}"
    assert any(f"port {port} is not free" in r.getMessage() for r in caplog.records)


def test_each_query_gets_its_own_latency_target_slide_then_trigger_then_default(spark, tmp_path):
    """Under the default ``latency_target="auto"``: an adaptstream source with windowPeriod 4 s has a 4-s target
    and its batches are judged against 2 s (MaxLat is about two batch times), Spark's own file source on a 3-s
    processing-time trigger against 3 s (read from Spark's query), and one with neither against the 10-s default."""
    from adaptstream.tuner import DEFAULT_TARGET_S

    src = tmp_path / "in"
    src.mkdir()
    (src / "a.csv").write_text("k1,1\nk2,2\n")
    with adaptstream.tune(spark, scheduler="rr") as tuner:
        windowed = (
            spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", str(src))
            .option("fileStableSeconds", "0").option("windowPeriod", "4 seconds").load()
            .writeStream.queryName("windowed").format("noop").start()
        )  # fmt: skip
        timed = (
            spark.readStream.schema("k STRING, v INT").csv(str(src))
            .writeStream.queryName("timed").trigger(processingTime="3 seconds").format("noop").start()
        )  # fmt: skip
        plain = spark.readStream.schema("k STRING, v INT").csv(str(src)).writeStream.queryName("plain")
        plain = plain.format("noop").start()
        drain_and_stop([windowed, timed, plain])
        queries = tuner.status()["queries"]
    targets = {n: (queries[n]["latency_target"], queries[n]["batch_target"]) for n in ("windowed", "timed", "plain")}
    assert targets == {"windowed": (4.0, 2.0), "timed": (3.0, 3.0), "plain": (DEFAULT_TARGET_S, DEFAULT_TARGET_S)}


def test_queries_whose_sources_keep_state_under_metrics_paths_are_scheduled_apart(spark, tmp_path):
    """Two queries with their own ``metricsPath`` (as every built-in workload has): each registers under its own
    name, so the scheduler arbitrates two queries, not one."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.csv").write_text("k1,1\nk2,2\n")
    with adaptstream.tune(spark, scheduler="rr") as tuner:
        queries = [
            spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", str(src))
            .option("fileStableSeconds", "0").option("metricsPath", str(tmp_path / name / "metrics")).load()
            .writeStream.queryName(name).format("noop").start()
            for name in ("first", "second")
        ]  # fmt: skip
        drain_and_stop(queries)
        status = tuner.status()
    (a,), (b,) = (status["queries"][n]["sources"] for n in ("first", "second"))
    assert a != b and len(status["controller_stats"]["registrations"]) == 2
    assert all(status["queries"][n]["decisions"] > 0 for n in ("first", "second"))
