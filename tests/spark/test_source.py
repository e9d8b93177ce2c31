"""The adaptstream source against real Spark: rows delivered exactly, quarantine, metrics, restart."""

from __future__ import annotations

import json
import os
import time

import pytest
from pyspark.sql import functions as F

pytestmark = pytest.mark.spark

SCHEMA = "k STRING, v INT"


def _write(path: str, lines: list[str]) -> None:
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    _stamp(path)


_LAST_MTIME = [0.0]


def _stamp(path: str) -> None:
    """Give each written file a strictly later modification time, so the arrival order is explicit."""
    mtime = max(time.time(), _LAST_MTIME[0] + 0.001)
    _LAST_MTIME[0] = mtime
    os.utime(path, (mtime, mtime))


def _stream(spark, src: str, run: str, **opts):
    reader = (
        spark.readStream.format("adaptstream")
        .schema(SCHEMA)
        .option("path", src)
        .option("metricsPath", os.path.join(run, "metrics"))
        .option("fileStableSeconds", "0")
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_files_rows_equal_batch_and_bad_rows_quarantined(spark, tmp_path):
    src, run = str(tmp_path / "in"), str(tmp_path / "run")
    os.makedirs(src)
    _write(f"{src}/a.csv", ["x,1", "y,2"])
    _write(f"{src}/b.csv", ["x,3", "broken-row", "z,notanint", "z,4"])
    got: list[tuple] = []
    q = (
        _stream(spark, src, run, admission="asap")
        .writeStream.foreachBatch(lambda df, _id: got.extend(tuple(r) for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        q.processAllAvailable()
        _write(f"{src}/c.csv", ["w,5"])
        q.processAllAvailable()
    finally:
        q.stop()
    expected = [("w", 5), ("x", 1), ("x", 3), ("y", 2), ("z", 4)]
    assert sorted(got) == expected
    with open(f"{run}/metrics/quarantine.jsonl") as f:
        bad = [json.loads(line) for line in f]
    assert sorted(b["raw"] for b in bad) == ["broken-row", "z,notanint"]
    with open(f"{run}/metrics/datasets.jsonl") as f:
        ds = [json.loads(line) for line in f]
    assert [d["rows"] for d in ds] == [2, 2, 1]
    assert [d["quarantined"] for d in ds] == [0, 2, 0]
    assert all(d["latency"] >= d["buffering"] >= 0 for d in ds)


def test_restart_from_checkpoint_no_loss_no_duplicates(spark, tmp_path):
    src, run, out, ck = (str(tmp_path / p) for p in ("in", "run", "out", "ck"))
    os.makedirs(src)
    for i in range(3):
        _write(f"{src}/{i:03d}.csv", [f"k{j},{i * 10 + j}" for j in range(5)])

    def start():
        return (
            _stream(spark, src, run, admission="asap")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", ck)
            .start()
        )

    q = start()
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    for i in range(3, 6):
        _write(f"{src}/{i:03d}.csv", [f"k{j},{i * 10 + j}" for j in range(5)])
    q = start()
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    streamed = _rows(spark.read.parquet(out))
    batch = _rows(spark.read.schema(SCHEMA).csv(src))
    assert streamed == batch
    assert len(streamed) == 30


def test_generator_connector_restart_replays_exactly(spark, tmp_path):
    """Stop mid-stream and restart from the checkpoint: the generator resumes, nothing is lost or doubled."""
    from adaptstream.workloads import GENERATORS, write_run

    run, out, ck = (str(tmp_path / p) for p in ("run", "out", "ck"))
    ddl = GENERATORS.get("linear_road")(seed=5).build().spark_schema_ddl

    def start():
        df = (
            spark.readStream.format("adaptstream")
            .option("connector", "generator")
            .option("generator", "linear_road")
            .option("seed", "5")
            .option("rate", "50")
            .option("duration", "12")
            .option("metricsPath", f"{run}/metrics")
            .option("path", f"{run}/input")
            .load()
        )
        return df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck).start()

    def datasets_written() -> int:
        return (
            len([n for n in os.listdir(f"{run}/input") if n.endswith(".csv")]) if os.path.isdir(f"{run}/input") else 0
        )

    q = start()
    try:
        deadline = time.time() + 120
        while datasets_written() < 3 and time.time() < deadline:
            time.sleep(0.2)
    finally:
        q.stop()  # possibly in the middle of a batch
    first = datasets_written()
    assert 3 <= first < 12
    q = start()
    try:
        deadline = time.time() + 120
        while datasets_written() < 12 and time.time() < deadline:
            time.sleep(0.2)
        q.processAllAvailable()
    finally:
        q.stop()
    assert datasets_written() == 12
    streamed = _rows(spark.read.parquet(out))
    assert streamed == _rows(spark.read.schema(ddl).csv(f"{run}/input"))
    assert len(streamed) == 12 * 50
    # the resumed generator wrote what an uninterrupted one would have
    write_run(GENERATORS.get("linear_road")(seed=5).build(), None, str(tmp_path / "ref"), [50] * 12)
    assert streamed == _rows(spark.read.schema(ddl).csv(str(tmp_path / "ref")))


def test_timestamp_column_through_source(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _write(str(src / "a.csv"), ["a,2024-01-01 00:00:05", "b,2024-01-01 00:00:35"])
    got: list = []
    q = (
        spark.readStream.format("adaptstream")
        .schema("k STRING, ts TIMESTAMP")
        .option("path", str(src))
        .option("fileStableSeconds", "0")
        .load()
        .groupBy(F.window("ts", "30 seconds"))
        .count()
        .writeStream.outputMode("complete")
        .foreachBatch(lambda df, _i: got.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    batch = spark.read.schema("k STRING, ts TIMESTAMP").csv(str(src))
    expected = sorted((r[0][0], r[1]) for r in batch.groupBy(F.window("ts", "30 seconds")).count().collect())
    assert len(expected) == 2  # the two rows fall into two different 30 s windows
    assert sorted((r[0][0], r[1]) for r in got) == expected


def _drain_three_files(spark, src: str, run: str, ck: str, first: int, out: str | None = None) -> None:
    """Write files first..first+2 (10 rows each), drain them under lmstream one file per batch (AvailableNow) into
    ``out`` as Parquet, or into the noop sink."""
    for i in range(first, first + 3):
        _write(f"{src}/{i:03d}.csv", [f"k{j},{i}" for j in range(10)])
    w = _stream(spark, src, run, admission="lmstream", slide="0", maxFilesPerTrigger="1").writeStream
    w = w.format("parquet").option("path", out) if out else w.format("noop")
    q = w.trigger(availableNow=True).option("checkpointLocation", ck).start()
    try:
        assert q.awaitTermination(120)
        assert q.exception() is None
    finally:
        q.stop()


def test_policy_state_survives_a_restart(spark, tmp_path):
    """What LMStream learned (rows and processing time so far, Eq. 4) is saved at each commit and resumed."""
    src, run, ck = str(tmp_path / "in"), str(tmp_path / "run"), str(tmp_path / "ck")
    os.makedirs(src)

    def state() -> dict:
        with open(f"{run}/metrics/source/policies.json") as f:
            return json.load(f)["policies"]["admission"]["state"]

    def drain(first: int) -> None:
        _drain_three_files(spark, src, run, ck, first)

    drain(0)
    before = state()
    assert before["batches_seen"] == 3
    drain(3)
    after = state()
    assert after["batches_seen"] == 6  # continued from the snapshot, not from a fresh policy
    assert after["rows_done"] > before["rows_done"]


def test_a_torn_policy_state_file_never_stops_the_query(spark, tmp_path):
    """Half a record appended to policies.json (a torn write, a full disk, a bad copy): the restarted query
    delivers every row, exactly once; the policies start fresh and the damaged file is kept aside, not reused."""
    src, run, ck, out = (str(tmp_path / p) for p in ("in", "run", "ck", "out"))
    os.makedirs(src)
    state_file = f"{run}/metrics/source/policies.json"

    def drain(first: int) -> None:
        _drain_three_files(spark, src, run, ck, first, out)

    drain(0)
    with open(state_file, "a") as f:
        f.write('{"offset": 9, "policies": {"admi')
    drain(3)
    with open(state_file) as f:
        assert json.load(f)["policies"]["admission"]["state"]["batches_seen"] == 3  # fresh, then 3 new batches
    assert os.path.exists(state_file + ".bad")
    expected = sorted((f"k{j}", i) for i in range(6) for j in range(10))
    assert _rows(spark.read.parquet(out)) == expected


@pytest.mark.parametrize("files", [0, 1])
def test_a_refused_option_is_the_query_exception_on_an_empty_or_full_directory(spark, tmp_path, files):
    """An option the source refuses ends the query with that ConfigError as query.exception(), never with the
    UnboundLocalError PySpark 4.3's source runner raises when the reader's constructor fails."""
    src = str(tmp_path / "in")
    os.makedirs(src)
    for i in range(files):
        _write(f"{src}/{i}.csv", ["a,1"])
    q = _stream(spark, src, str(tmp_path / "run"), delimiter=";;").writeStream.format("noop").start()
    try:
        with pytest.raises(Exception, match="delimiter must be one character"):
            q.awaitTermination(60)
        message = str(q.exception())
    finally:
        q.stop()
    assert "ConfigError" in message and "UnboundLocalError" not in message
