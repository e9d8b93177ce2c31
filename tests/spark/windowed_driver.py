"""``adaptstream.windowed_aggregate`` in its own process (tests/spark/test_windowed.py kills it with SIGKILL inside
a batch and restarts it on the same checkpoint).

Usage: python windowed_driver.py INPUT_DIR OUT_DIR CHECKPOINT [KILL_AT_BATCH]
The sink writes each batch's windows to OUT_DIR/batch_id=N; with KILL_AT_BATCH the process kills itself right
after that batch's windows are written, before Spark commits the batch."""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    import adaptstream
    from adaptstream.spark.session import build_spark

    input_dir, out, checkpoint = sys.argv[1:4]
    kill_at = int(sys.argv[4]) if len(sys.argv) > 4 else None
    spark = build_spark(app_name="windowed-driver")
    adaptstream.register(spark)

    def sink(df, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(os.path.join(out, f"batch_id={batch_id}"))
        if kill_at is not None and batch_id >= kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    df = (
        spark.readStream.format("adaptstream")
        .schema("k STRING, ts TIMESTAMP, v INT")
        .option("path", input_dir)
        .option("maxFilesPerTrigger", "1")
        .option("fileStableSeconds", "0")
        .load()
    )
    q = adaptstream.windowed_aggregate(
        df,
        keys="k",
        time="ts",
        window="20 seconds",
        slide="10 seconds",
        aggs={"v": ["sum", "count", "max"]},
        reduce="split",
        reduce_buckets=3,
        sink=sink,
        checkpoint=checkpoint,
        trigger={"availableNow": True},
    )
    q.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
