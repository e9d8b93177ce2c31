"""An application of one's own: three streaming queries over one's own schemas, two CSV directories and a Redis
stream, each written to Parquet. Runs as a plain PySpark program, tuned by one line, or unmodified under
``adaptstream submit``:

    python examples/app/app.py DATA OUT redis://127.0.0.1:6379/events              # untuned
    python examples/app/app.py DATA OUT redis://127.0.0.1:6379/events --tune klink # adaptstream.tune(spark, ...)
    adaptstream submit examples/app/app.py DATA OUT redis://127.0.0.1:6379/events --scheduler klink --metrics M

Queries: the average reading per sensor and 10 s window (complete mode), orders over 10 (append), page events
per action and 10 s window from Redis (complete mode). Each runs until all input present is processed, then stops.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import adaptstream

READINGS = "sensor STRING, reading DOUBLE, ts TIMESTAMP"
ORDERS = "order_id INT, customer STRING, amount DOUBLE, ts TIMESTAMP"
EVENTS = "user STRING, action STRING, ts TIMESTAMP"


def overwrite(path: str):
    """A complete-mode sink: each batch's full result replaces the last (idempotent per batch)."""

    def write(df, _batch_id: int) -> None:
        df.write.mode("overwrite").parquet(path)

    return write


def source(spark, schema: str, path: str, **options: str):
    reader = spark.readStream.format("adaptstream").schema(schema).option("path", path)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def start_queries(spark, data: str, out: str, redis_url: str) -> list:
    windowed = {"windowPeriod": "10 seconds", "watermarkDelay": "5 seconds"}  # Klink's deadlines
    files = {"fileStableSeconds": "0", "maxFilesPerTrigger": "2"}  # files renamed into place; 2 per batch
    readings = source(spark, READINGS, os.path.join(data, "readings"), **files, **windowed)
    avg = readings.groupBy("sensor", F.window("ts", "10 seconds")).agg(F.avg("reading").alias("avg_reading"))
    orders = source(spark, ORDERS, os.path.join(data, "orders"), **files)
    big = orders.where("amount > 10").select("order_id", "customer", "amount")
    events = source(spark, EVENTS, redis_url, statePath=os.path.join(out, "events-source"), **windowed)
    per_action = events.groupBy("action", F.window("ts", "10 seconds")).count()
    ck = os.path.join(out, "checkpoints")
    return [
        avg.writeStream.queryName("sensor_avg")
        .outputMode("complete")
        .foreachBatch(overwrite(os.path.join(out, "sensor_avg")))
        .option("checkpointLocation", os.path.join(ck, "sensor_avg"))
        .start(),
        big.writeStream.queryName("big_orders")
        .format("parquet")
        .option("path", os.path.join(out, "big_orders"))
        .option("checkpointLocation", os.path.join(ck, "big_orders"))
        .start(),
        per_action.writeStream.queryName("actions")
        .outputMode("complete")
        .foreachBatch(overwrite(os.path.join(out, "actions")))
        .option("checkpointLocation", os.path.join(ck, "actions"))
        .start(),
    ]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="three streaming queries over CSV files and a Redis stream")
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("redis_url")
    ap.add_argument("--tune", metavar="SCHEDULER", help="tune the application with this scheduler (e.g. klink)")
    args = ap.parse_args(argv)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("adaptstream-example")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    tuner = adaptstream.tune(spark, scheduler=args.tune) if args.tune else None
    adaptstream.register(spark)  # a no-op where a tuner registered the source already
    queries = start_queries(spark, args.data, args.out, args.redis_url)
    try:
        for q in queries:
            q.processAllAvailable()
    finally:
        for q in queries:
            q.stop()
    if tuner is not None:
        for name, q in sorted(tuner.status()["queries"].items()):
            print(f"{name}: {q['batches']} batches, {q['decisions']} scheduler decisions")
        tuner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
