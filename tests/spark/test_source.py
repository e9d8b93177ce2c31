"""The adaptstream source against real Spark: rows delivered exactly, quarantine, metrics, restart."""

from __future__ import annotations

import json
import os
import time

import pytest

pytestmark = pytest.mark.spark

SCHEMA = "k STRING, v INT"


def _write(path: str, lines: list[str]) -> None:
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    time.sleep(0.01)  # distinct modification times keep the arrival order explicit


def _stream(spark, src: str, run: str, **opts):
    reader = (spark.readStream.format("adaptstream").schema(SCHEMA).option("path", src)
              .option("metricsPath", os.path.join(run, "metrics")))
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
    q = (_stream(spark, src, run, admission="asap").writeStream
         .foreachBatch(lambda df, _id: got.extend(tuple(r) for r in df.collect()))
         .option("checkpointLocation", str(tmp_path / "ck")).start())
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
        return (_stream(spark, src, run, admission="asap").writeStream.format("parquet")
                .option("path", out).option("checkpointLocation", ck).start())

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
