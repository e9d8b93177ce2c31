"""Windowed aggregation over blocks built by every partitioner equals batch SQL over the same rows, both
through the block harness (partition k = block k) and through the streaming source."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from adaptstream.partitioning import MAIN_NAMES, PARTITIONERS, build_partitioner, key_hash
from adaptstream.partitioning.spark_blocks import blocks_dataframe
from adaptstream.workloads.partition_workloads import get_workload, synd, to_arrow

pytestmark = pytest.mark.spark


def _rows(df) -> list[tuple]:
    return sorted(
        tuple(None if v is None else round(v, 6) if isinstance(v, float) else v for v in r) for r in df.collect()
    )


@pytest.mark.parametrize("workload", ["synd-wordcount", "gcm-q2"])
def test_block_harness_equals_batch_sql_for_every_partitioner(spark, workload):
    w = get_workload(workload)
    pdf = synd(3000, z=1.2, num_keys=400, rate=50.0, seed=3) if workload == "synd-wordcount" else w.generate(3000)
    table = to_arrow(pdf)
    keys = key_hash(table, list(w.key_columns))
    spark.createDataFrame(pdf).createOrReplaceTempView("batch_rows")
    want = _rows(spark.sql(w.oracle_sql("batch_rows")))
    assert len(want) > 3
    for name in PARTITIONERS.names():
        blocks = build_partitioner(name).assign(keys, 3)
        df, bc = blocks_dataframe(spark, table, blocks, 3)
        try:
            assert df.rdd.getNumPartitions() == 3
            sizes = df.rdd.glom().map(len).collect()
            assert sizes == np.bincount(blocks, minlength=3).tolist(), name
            assert _rows(w.query(df)) == want, name
        finally:
            bc.unpersist()


# epoch seconds: the source cannot yet take TIMESTAMP columns (arrow_schema() without a timezone)
SCHEMA = "ts_s BIGINT, word STRING, v INT"


def _write_csv(path: str, frame: pd.DataFrame) -> None:
    """Atomic (hidden temporary file, then rename). No pause is needed between files: the connector orders
    new files by modification time, then by name, and the names here sort in write order."""
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
    frame.to_csv(tmp, header=False, index=False)
    os.replace(tmp, path)


def test_streaming_source_equals_batch_sql_for_every_partitioner(spark, tmp_path):
    from pyspark.sql import functions as F

    from adaptstream.spark.datasource import register

    register(spark)
    rng = np.random.default_rng(7)
    n = 1200
    frame = pd.DataFrame(
        {
            "ts_s": 1_704_067_200 + np.arange(n) // 5,
            "word": [f"w{k}" for k in rng.zipf(1.4, n) % 150],
            "v": rng.integers(0, 10, n),
        }
    )
    batch = spark.createDataFrame(frame)
    want = _rows(
        batch.groupBy(F.window(F.timestamp_seconds("ts_s"), "30 seconds", "10 seconds"), "word").agg(
            F.count("*").alias("n"), F.sum("v").alias("s")
        )
    )
    assert len(want) > 50
    for name in [*MAIN_NAMES, "am-hll"]:
        src = str(tmp_path / f"in-{name}")
        os.makedirs(src)
        for i in range(2):
            _write_csv(f"{src}/{i:03d}.csv", frame.iloc[i * 300 : (i + 1) * 300])
        run = str(tmp_path / name)
        stream = (
            spark.readStream.format("adaptstream")
            .schema(SCHEMA)
            .option("path", src)
            .option("metricsPath", os.path.join(run, "metrics"))
            .option("partitioner", name)
            .option("numBlocks", "3")
            .option("partitionKey", "word")
            .option("fileStableSeconds", "0")  # files are renamed into place: no wait needed
            .load()
        )
        agg = stream.groupBy(F.window(F.timestamp_seconds("ts_s"), "30 seconds", "10 seconds"), "word").agg(
            F.count("*").alias("n"), F.sum("v").alias("s")
        )
        table = f"part_{name.replace('-', '_')}"
        q = (
            agg.writeStream.outputMode("complete")
            .format("memory")
            .queryName(table)
            .option("checkpointLocation", os.path.join(run, "ck"))
            .start()
        )
        try:
            q.processAllAvailable()
            for i in range(2, 4):  # a second micro-batch
                _write_csv(f"{src}/{i:03d}.csv", frame.iloc[i * 300 : (i + 1) * 300])
            q.processAllAvailable()
        finally:
            q.stop()
        assert _rows(spark.table(table)) == want, name
        with open(os.path.join(run, "metrics", "batches.jsonl")) as f:
            batches = [json.loads(line) for line in f]
        assert sum(b["rows"] for b in batches) == n and len(batches) >= 2
        for b in batches:
            # "time" reads on the executors, whole datasets per partition: no more partitions than datasets
            blocks = min(3, b["datasets"]) if name == "time" else 3
            assert len(b["block_rows"]) == blocks and sum(b["block_rows"]) == b["rows"]
            if name in ("prompt", "shuffle"):
                assert max(b["block_rows"]) - min(b["block_rows"]) <= 1, (name, b["block_rows"])
