"""Parquet files through ``format("adaptstream")`` (fileFormat=parquet): results equal ``spark.read.parquet`` of the
same files under batch SQL; files of another schema and truncated files are quarantined and counted, never a crashed
query. The kill -9 and restart case is in test_source_faults.py (parametrised over csv and parquet)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.spark

AGG = "SELECT k, window(ts, '10 seconds').start AS w, count(*) AS n, sum(v) AS s, avg(v) AS a FROM {} GROUP BY k, w"


def _put(path: str, table: pa.Table) -> None:
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _table(i: int, n: int = 40) -> pa.Table:
    base = i * n
    return pa.table(
        {
            "k": [f"k{j % 4}" for j in range(base, base + n)],
            "v": pa.array(range(base, base + n), pa.int32()),
            "ts": pa.array([(1_700_000_000 + j) * 1_000_000 for j in range(base, base + n)], pa.timestamp("us", "UTC")),
        }
    )


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_a_parquet_directory_equals_batch_sql_and_bad_files_are_quarantined(spark, tmp_path):
    src, run = str(tmp_path / "in"), str(tmp_path / "run")
    os.makedirs(src)
    for i in range(6):
        _put(f"{src}/{i:02d}.parquet", _table(i))
    good = _rows(spark.sql(AGG.format("parquet.`" + src + "`")))
    _put(f"{src}/90-other.parquet", pa.table({"k": [1, 2], "w": ["x", "y"]}))  # another schema
    whole = tmp_path / "whole.parquet"
    pq.write_table(_table(7), whole)
    with open(f"{src}/91-cut.parquet", "wb") as f:  # a truncated file (no footer)
        f.write(whole.read_bytes()[:-9])

    df = (
        spark.readStream.format("adaptstream")
        .option("fileFormat", "parquet")  # no schema given: the first file's
        .option("path", src)
        .option("metricsPath", os.path.join(run, "metrics"))
        .option("fileStableSeconds", "0")
        .option("maxFilesPerTrigger", "2")
        .load()
    )
    assert [f.name for f in df.schema.fields] == ["k", "v", "ts"]
    out = str(tmp_path / "out")
    q = (
        df.writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(240)
    assert q.exception() is None
    spark.read.parquet(out).createOrReplaceTempView("streamed")
    assert _rows(spark.sql(AGG.format("streamed"))) == good
    with open(f"{run}/metrics/quarantine.jsonl") as f:
        bad = [json.loads(line) for line in f]
    reasons = sorted(b["reason"] for b in bad)
    assert len(bad) == 2
    assert "no Parquet footer" in reasons[0] or "no Parquet footer" in reasons[1]
    mismatch = next(r for r in reasons if "does not match" in r)
    assert "(k int64, w string)" in mismatch and "(k string, v int32, ts timestamp[us, tz=UTC])" in mismatch
