"""format("adaptstream") over a real Redis server (scripts/redis.sh) and real Spark: the six Table III queries equal
batch SQL over the same entries; kill -9 of the driver while a producer keeps writing loses and duplicates nothing;
a server restart is waited for, a server that stays away fails the query with a clear error; trimming only drops
committed entries; entries trimmed above the committed offset stop the query naming the range."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pyarrow as pa
import pytest

from adaptstream.connectors.redis import id_key, parse_url
from adaptstream.connectors.redis_produce import entries_of, write_entries
from adaptstream.workloads import WORKLOADS, LinearRoadGeneratorConfig, build_generator, write_dataset
from adaptstream.workloads.oracle import assert_stream_equals_batch, compare_multisets

pytestmark = pytest.mark.spark

SCHEMA = "k STRING, v INT"


def _stream() -> str:
    return f"spark-{uuid.uuid4().hex[:8]}"


def _reader(spark, url: str, state: str, schema: str = SCHEMA, **opts):
    r = spark.readStream.format("adaptstream").schema(schema).option("path", url).option("statePath", state)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _wait_for(cond, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _closed(r, stream: str, seconds: float = 1.0) -> None:
    """Wait until the server clock has passed the arrival group of the stream's last entry (it is then a dataset)."""
    last = r.xrevrange(stream, count=1)[0][0]
    end_ms = (id_key(last)[0] // int(seconds * 1000) + 1) * int(seconds * 1000)
    _wait_for(lambda: (lambda t: t[0] * 1000 + t[1] // 1000)(r.time()) >= end_ms)


def _stream_rows(r, stream: str) -> list[tuple]:
    out = []
    for _, f in r.xrange(stream):
        k, v = f[b"row"].decode().split(",")
        out.append((k, int(v)))
    return sorted(out)


# -- Table III over Redis --------------------------------------------------------------------------------------
INPUTS = {  # generator -> (seconds, rows per second, maxDatasetEntries, maxDatasetsPerBatch)
    "linear_road": (25, 120, 200, 3),
    "task_events": (55, 400, 500, 8),
}


def _fill(r, stream: str, generator_name: str, csv_dir) -> None:
    """The workload's rows, then its end-of-stream rows, as entries; the same entries read back as one CSV file."""
    seconds, rate, _, _ = INPUTS[generator_name]
    if generator_name == "linear_road":  # dense traffic so that LR2's slow-segment filter keeps some rows
        gen = LinearRoadGeneratorConfig(seed=11, segment_capacity=15.0).build()
    else:
        gen = build_generator(generator_name, seed=11)
    wl = max(
        (w for w in map(WORKLOADS.get, WORKLOADS.names()) if w.generator == generator_name),
        key=lambda w: w.window_s + w.effective_slide_s,
    )
    tables = [gen.generate(k, rate) for k in range(seconds)] + [wl.sentinel(after_second=seconds - 1)]
    for t in tables:
        write_entries(r, (stream,), entries_of(t))
    lines = [f[b"row"] for _, f in r.xrange(stream)]
    os.makedirs(csv_dir, exist_ok=True)
    with open(os.path.join(csv_dir, "entries.csv"), "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    assert len(lines) == sum(t.num_rows for t in tables)


@pytest.fixture(scope="module")
def redis_inputs(redis_server, tmp_path_factory) -> dict[str, tuple[str, str]]:
    r = redis_server.client()
    out = {}
    for g in INPUTS:
        stream = _stream()
        csv_dir = str(tmp_path_factory.mktemp(g))
        _fill(r, stream, g, csv_dir)
        out[g] = (f"{redis_server.url}/{stream}", csv_dir)
    for url, _ in out.values():
        _closed(r, url.rsplit("/", 1)[1])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["LR1S", "LR1T", "LR2S", "CM1S", "CM1T", "CM2S"])
def test_table_iii_queries_over_redis_equal_batch_sql_over_the_same_entries(spark, redis_inputs, tmp_path, name):
    w = WORKLOADS.get(name)
    url, csv_dir = redis_inputs[w.generator]
    _, _, piece, per_batch = INPUTS[w.generator]
    ddl = w.generator_class().spark_schema_ddl

    def factory():
        return _reader(
            spark,
            url,
            str(tmp_path / "state"),
            ddl,
            admission="asap",
            slide=str(w.lmstream_slide),
            maxDatasetEntries=str(piece),
            maxDatasetsPerBatch=str(per_batch),
            metricsPath=str(tmp_path / "m"),
        )

    result = assert_stream_equals_batch(spark, w, csv_dir, factory)
    assert len(result.batch_rows) > 0
    assert len(result.stream_batches) >= 4  # several micro-batches, not one
    with open(tmp_path / "m" / "batches.jsonl") as f:
        rows = sum(json.loads(line)["rows"] for line in f)
    with open(os.path.join(csv_dir, "entries.csv"), "rb") as f:
        assert rows == sum(1 for _ in f)  # every entry accounted once


# -- faults ------------------------------------------------------------------------------------------------------
_DRIVER = r"""
import sys
from adaptstream.spark.session import build_spark
url, out, ck, state, mode = sys.argv[1:6]
spark = build_spark(app_name="redis-kill-test")
per_batch = "1" if mode == "run" else "1000"  # many small batches to kill one mid-way; then drain quickly
df = (spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", url)
      .option("statePath", state).option("datasetSeconds", "0.5").option("maxDatasetsPerBatch", per_batch).load())
w = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
q = (w.trigger(availableNow=True) if mode == "drain" else w).start()
q.awaitTermination()
"""


class _Producer(threading.Thread):
    """Writes k<i % 5>,<i> entries at about ``rate`` per second until stopped (a live producer, not a barrier)."""

    def __init__(self, r, stream: str, rate: float = 100.0) -> None:
        super().__init__(daemon=True)
        self.r, self.stream, self.rate = r, stream, rate
        self.written = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            n = max(1, int(self.rate / 20))
            for j in range(n):
                i = self.written + j
                self.r.xadd(self.stream, {"row": f"k{i % 5},{i}"})
            self.written += n
            self.halt.wait(0.05)


@pytest.mark.slow
def test_kill_9_of_the_driver_while_the_producer_writes_loses_and_duplicates_nothing(spark, redis_server, tmp_path):
    stream = _stream()
    url = f"{redis_server.url}/{stream}"
    out, ck, state = (str(tmp_path / p) for p in ("out", "ck", "state"))
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    producer = _Producer(redis_server.client(), stream)
    producer.start()
    proc = subprocess.Popen(
        [sys.executable, str(script), url, out, ck, state, "run"],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        commits = os.path.join(ck, "commits")
        _wait_for(lambda: os.path.isdir(commits) and len(os.listdir(commits)) >= 4, timeout=240)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers, mid-batch
        proc.wait()
    at_kill = producer.written
    _wait_for(lambda: producer.written >= at_kill + 100)  # the producer keeps writing while the driver is down
    producer.halt.set()
    producer.join()
    done = subprocess.run(
        [sys.executable, str(script), url, out, ck, state, "drain"],
        env=env,
        timeout=600,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    streamed = sorted(tuple(r) for r in spark.read.parquet(out).collect())
    expected = _stream_rows(redis_server.client(), stream)
    assert len(expected) == producer.written
    assert len(set(streamed)) == len(streamed)  # nothing duplicated
    assert streamed == expected  # nothing lost


def test_server_restart_is_waited_for_and_a_server_that_stays_away_fails_clearly(spark, own_redis_server, tmp_path):
    stream = _stream()
    url = f"{own_redis_server.url}/{stream}"
    r = own_redis_server.client()
    write_entries(r, (stream,), [{"row": f"a,{i}"} for i in range(50)])
    _closed(r, stream)
    got: list[tuple] = []
    q = (
        _reader(spark, url, str(tmp_path / "state"), redisTimeout="4")
        .writeStream.foreachBatch(lambda df, _i: got.extend(tuple(x) for x in df.collect()))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        q.processAllAvailable()
        own_redis_server.stop()
        q.processAllAvailable()  # no new data while the server is away; the query keeps running
        assert q.isActive
        own_redis_server.start()
        r = own_redis_server.client()
        write_entries(r, (stream,), [{"row": f"b,{i}"} for i in range(30)])
        _closed(r, stream)
        q.processAllAvailable()
        assert sorted(got) == sorted([("a", i) for i in range(50)] + [("b", i) for i in range(30)])
        own_redis_server.stop()
        with pytest.raises(Exception, match=r"unreachable for 4 s \(option redisTimeout\)"):
            q.awaitTermination(120)
    finally:
        q.stop()


def test_trim_drops_committed_entries_and_available_now_honours_the_row_limit(spark, redis_server, tmp_path):
    stream = _stream()
    url = f"{redis_server.url}/{stream}"
    r = redis_server.client()
    first = [r.xadd(stream, {"row": f"k,{i}"}, id=f"{1000 + i // 10}000-{i % 10}").decode() for i in range(40)]
    sizes: list[int] = []
    q = (
        _reader(
            spark, url, str(tmp_path / "state"), trim="true", maxRowsPerTrigger="10", metricsPath=str(tmp_path / "m")
        )
        .writeStream.foreachBatch(lambda df, _i: sizes.append(df.count()))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        assert q.awaitTermination(240)
    finally:
        q.stop()
    assert [s for s in sizes if s] == [10, 10, 10, 10]  # one arrival second (10 entries) per batch
    left = [e.decode() for e, _ in r.xrange(stream)]
    # only committed entries were trimmed: at most the last batch's entries are left (Spark commits a batch's end
    # when it plans the next one)
    assert len(left) <= 10 and left == first[len(first) - len(left) :]


def test_entries_trimmed_above_the_committed_offset_stop_the_query_naming_the_range(spark, redis_server, tmp_path):
    stream = _stream()
    url = f"{redis_server.url}/{stream}"
    r = redis_server.client()
    write_entries(r, (stream,), [{"row": f"a,{i}"} for i in range(20)])
    _closed(r, stream)

    def run():
        return (
            _reader(spark, url, str(tmp_path / "state"))
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )

    q = run()
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    last_done = r.xrevrange(stream, count=1)[0][0].decode()
    ids = [r.xadd(stream, {"row": f"b,{i}"}).decode() for i in range(15)]
    r.xtrim(stream, maxlen=5, approximate=False)  # 10 entries the query never read are gone
    q = run()
    try:
        with pytest.raises(Exception, match=rf"10 entries in the ID range \({last_done}, {ids[10]}\)"):
            q.awaitTermination(120)
    finally:
        q.stop()


@pytest.mark.slow
def test_cli_run_drains_a_stream(spark, redis_server, tmp_path):
    """`adaptstream run --input redis://...` processes every entry present at start, emits every window, stops."""
    stream = _stream()
    r = redis_server.client()
    gen = LinearRoadGeneratorConfig(seed=5, segment_capacity=15.0).build()
    tables = [gen.generate(k, 100) for k in range(12)]
    for t in tables:
        write_entries(r, (stream,), entries_of(t))
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "adaptstream.cli",
            "run",
            "--workload",
            "LR1S",
            "--admission",
            "asap",
            "--input",
            f"{redis_server.url}/{stream}",
            "--run-dir",
            str(run_dir),
        ],
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        timeout=400,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with open(run_dir / "metrics" / "datasets.jsonl") as f:
        ds = [json.loads(line) for line in f]
    assert sum(d["rows"] for d in ds if not d["sentinel"]) == 1200 and ds[-1]["sentinel"]
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    write_dataset(pa.concat_tables(tables), csv_dir / "all.csv", "csv")
    w = WORKLOADS.get("LR1S")
    expected = w.batch_query(spark.read.schema(w.generator_class().spark_schema_ddl).csv(str(csv_dir)))
    got = spark.read.parquet(str(run_dir / "results")).select(*expected.columns)
    exp = [tuple(x) for x in expected.collect()]
    assert len(exp) > 0 and compare_multisets([tuple(x) for x in got.collect()], exp) == []


def test_producer_url_must_name_a_stream():
    with pytest.raises(Exception, match=r"HOST:PORT\[/DB\]/STREAM"):
        parse_url("redis://127.0.0.1:6379")


def test_a_password_server_through_spark_and_the_cli_never_writes_the_password(spark, own_redis_server, tmp_path):
    """An ACL user's credentials from the options (Spark) and from the URL (CLI): the entries are read exactly, and
    the password is in no file of the run directory (run.json, metrics, results, spark.log) nor in the output."""
    import redis
    from adaptstream import cli

    admin = own_redis_server.client()
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">Rd-pw-8813", "~*", "+@all")
    admin.config_set("requirepass", "Adm-pw-2291")
    r = redis.Redis(host="127.0.0.1", port=own_redis_server.port, password="Adm-pw-2291")
    stream = _stream()
    for i in range(40):
        r.xadd(stream, {"row": f"k{i % 3},{i}"})
    _closed(r, stream)
    url = f"redis://127.0.0.1:{own_redis_server.port}/{stream}"
    q = (
        _reader(spark, url, str(tmp_path / "state"), redisUser="reader", redisPassword="Rd-pw-8813")
        .writeStream.format("memory")
        .queryName("redis_password")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        assert q.awaitTermination(120) and q.exception() is None
    finally:
        q.stop()
    got = sorted(tuple(x) for x in spark.table("redis_password").collect())
    assert got == sorted(_stream_rows(r, stream))

    gen = LinearRoadGeneratorConfig(seed=5, segment_capacity=15.0).build()
    lr = _stream()
    for k in range(6):
        write_entries(r, (lr,), entries_of(gen.generate(k, 50)))
    run_dir = tmp_path / "run"
    secret_url = f"redis://reader:Rd-pw-8813@127.0.0.1:{own_redis_server.port}/{lr}"
    try:
        cli.main(["run", "--workload", "LR1S", "--admission", "asap", "--input", secret_url, "--run-dir", str(run_dir)])
    except SystemExit as exc:
        assert exc.code in (0, None)
    with open(run_dir / "metrics" / "datasets.jsonl") as f:
        assert sum(json.loads(line)["rows"] for line in f if '"sentinel": false' in line) == 300
    leaked = [str(p) for p in run_dir.rglob("*") if p.is_file() and b"Rd-pw-8813" in p.read_bytes()]
    assert leaked == []
    assert json.loads((run_dir / "run.json").read_text())["spec"]["input_dir"].startswith("redis://reader:***@")
