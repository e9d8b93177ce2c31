"""The input path under faults, with real files and real Spark: results always equal batch SQL over the final files.

kill -9 of the driver mid-stream, files written in place and renamed from temporary names, a torn manifest, two
queries on one directory, malformed-only and oversize-field files, Trigger.AvailableNow with read limits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.spark

SCHEMA = "k STRING, v INT"


def _put(path: str, lines: list[str]) -> None:
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def _reader(spark, src: str, **opts):
    r = spark.readStream.format("adaptstream").schema(SCHEMA).option("path", src)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def _batch(spark, src: str) -> list[tuple]:
    return _rows(spark.read.schema(SCHEMA).option("mode", "DROPMALFORMED").csv(src))


def _wait_for(cond, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def test_available_now_drains_in_bounded_batches_then_stops(spark, tmp_path):
    src, run = str(tmp_path / "in"), str(tmp_path / "run")
    os.makedirs(src)
    for i in range(10):
        _put(f"{src}/{i:02d}.csv", [f"k{i},{j}" for j in range(3)])
    sizes: list[int] = []
    q = (
        _reader(spark, src, maxFilesPerTrigger="3", metricsPath=run, fileStableSeconds="0")
        .writeStream.foreachBatch(lambda df, _i: sizes.append(df.count()))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        assert q.awaitTermination(180)  # stops by itself once the backlog present at start is drained
    finally:
        q.stop()
    assert [s for s in sizes if s] == [9, 9, 9, 3]
    with open(f"{run}/batches.jsonl") as f:
        assert [json.loads(line)["datasets"] for line in f] == [3, 3, 3, 1]


def test_bad_files_never_crash_and_every_bad_row_is_counted(spark, tmp_path):
    src, run = str(tmp_path / "in"), str(tmp_path / "run")
    os.makedirs(src)
    _put(f"{src}/a.csv", ["only,bad,rows", "nope"])  # every row malformed
    _put(f"{src}/b.csv", [f"{'x' * 200_000},1", "bad", "ok,2"])  # an oversize field beside a bad row
    _put(f"{src}/c.csv", ["NA,3", "null,4", ",5", "n,NaN"])  # null tokens: only the empty field is null
    got: list[tuple] = []
    q = (
        _reader(spark, src, metricsPath=run, fileStableSeconds="0")
        .writeStream.foreachBatch(lambda df, _i: got.extend(tuple(r) for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(got, key=str) == sorted([("x" * 200_000, 1), ("ok", 2), ("NA", 3), ("null", 4), (None, 5)], key=str)
    with open(f"{run}/datasets.jsonl") as f:
        ds = {os.path.basename(d["path"]): (d["rows"], d["quarantined"]) for d in map(json.loads, f)}
    assert ds == {"a.csv": (0, 2), "b.csv": (2, 1), "c.csv": (3, 1)}
    with open(f"{run}/quarantine.jsonl") as f:
        assert sorted(json.loads(line)["raw"] for line in f) == ["bad", "n,NaN", "nope", "only,bad,rows"]


def test_files_written_in_place_and_renamed_are_read_exactly_once(spark, tmp_path):
    src, ck, out = str(tmp_path / "in"), str(tmp_path / "ck"), str(tmp_path / "out")
    os.makedirs(src)
    state = str(tmp_path / "state")

    def writer() -> None:
        with open(f"{src}/inplace.csv", "w") as f:  # written in place, chunk by chunk
            for c in range(10):
                f.write("".join(f"p{c},{c * 500 + j}\n" for j in range(500)))
                f.flush()
                time.sleep(0.02)  # a slow writer, not synchronisation
        for n in range(3):  # hdfs-style: NAME._COPYING_ then rename
            tmp = f"{src}/r{n}.csv._COPYING_"
            with open(tmp, "w") as f:
                f.write("".join(f"r{n},{j}\n" for j in range(1000)))
            os.replace(tmp, f"{src}/r{n}.csv")
        with open(f"{src}/inplace.csv", "a") as f:  # rows appended after admission
            f.write("".join(f"late,{j}\n" for j in range(100)))

    q = (
        _reader(spark, src, statePath=state, fileStableSeconds="0.3")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ck)
        .start()
    )
    try:
        t = threading.Thread(target=writer)
        t.start()
        t.join()
        total = sum(os.path.getsize(f"{src}/{n}") for n in os.listdir(src))

        def admitted() -> int:
            q.processAllAvailable()
            with open(f"{state}/manifest.jsonl") as f:
                return sum(json.loads(line)["bytes"] for line in f)

        _wait_for(lambda: admitted() == total)
        q.processAllAvailable()
    finally:
        q.stop()
    streamed = _rows(spark.read.parquet(out))
    assert streamed == _batch(spark, src)
    assert len(streamed) == 5000 + 3000 + 100


def test_two_queries_on_one_directory_and_a_torn_manifest_restart_cleanly(spark, tmp_path):
    src = str(tmp_path / "in")
    os.makedirs(src)
    for i in range(3):
        _put(f"{src}/{i}.csv", [f"k{i},{j}" for j in range(4)])

    def start(name: str):
        return (
            _reader(spark, src, fileStableSeconds="0")
            .writeStream.format("parquet")
            .queryName(name)
            .option("path", str(tmp_path / name))
            .option("checkpointLocation", str(tmp_path / f"ck-{name}"))
            .start()
        )

    def run_both() -> None:
        qa, qb = start("qa"), start("qb")
        try:
            qa.processAllAvailable()
            qb.processAllAvailable()
        finally:
            qa.stop()
            qb.stop()

    run_both()
    states = sorted(os.listdir(f"{src}/_adaptstream"))
    assert len(states) == 2  # one state directory per query, found again from each checkpoint
    manifest = f"{src}/_adaptstream/{states[0]}/manifest.jsonl"
    with open(manifest, "a") as f:
        f.write('{"seq": 3, "path": "torn')  # a crash in the middle of a manifest write
    _put(f"{src}/3.csv", ["k3,0"])
    run_both()
    expected = _batch(spark, src)
    assert len(expected) == 13
    assert _rows(spark.read.parquet(str(tmp_path / "qa"))) == expected
    assert _rows(spark.read.parquet(str(tmp_path / "qb"))) == expected


_DRIVER = r"""
import sys
from adaptstream.spark.session import build_spark
src, out, ck, state, mode, fmt = sys.argv[1:7]
spark = build_spark(app_name="kill-test")
r = spark.readStream.format("adaptstream").option("fileFormat", fmt)
r = r if fmt == "parquet" else r.schema("k STRING, v INT")  # Parquet: the schema of the first file
df = (r.option("path", src).option("statePath", state).option("fileStableSeconds", "0")
      .option("maxFilesPerTrigger", "1").load())
w = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
q = (w.trigger(availableNow=True) if mode == "drain" else w).start()
q.awaitTermination()
"""


def _put_parquet(path: str, rows: list[tuple[str, int]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    table = pa.table({"k": [r[0] for r in rows], "v": pa.array([r[1] for r in rows], pa.int32())})
    pq.write_table(table, tmp)
    os.replace(tmp, path)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_kill_9_of_the_driver_mid_stream_then_restart_loses_and_duplicates_nothing(spark, tmp_path, fmt):
    src, out, ck, state = (str(tmp_path / p) for p in ("in", "out", "ck", "state"))
    os.makedirs(src)
    files = 16  # one per batch: killed once the commits directory holds 4 entries (2 commits and their .crc)
    for i in range(files):
        if fmt == "csv":
            _put(f"{src}/{i:03d}.csv", [f"k{i},{j}" for j in range(50)])
        else:
            _put_parquet(f"{src}/{i:03d}.parquet", [(f"k{i}", j) for j in range(50)])
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), src, out, ck, state, "run", fmt],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        commits = os.path.join(ck, "commits")
        _wait_for(lambda: os.path.isdir(commits) and len(os.listdir(commits)) >= 4, timeout=180)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers, mid-batch
        proc.wait()
    assert len([c for c in os.listdir(commits) if c.isdigit()]) < files  # killed mid-stream: the restart has work
    done = subprocess.run(
        [sys.executable, str(script), src, out, ck, state, "drain", fmt],
        env=env,
        timeout=300,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    streamed = _rows(spark.read.parquet(out))
    assert len(streamed) == files * 50
    assert streamed == (_batch(spark, src) if fmt == "csv" else _rows(spark.read.parquet(src)))
