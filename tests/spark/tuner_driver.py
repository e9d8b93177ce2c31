"""An application under ``adaptstream.tune(scheduler="klink", state_path=...)`` in its own process
(tests/spark/test_tuner.py kills it with SIGKILL inside a batch and restarts it on the same checkpoint and state).

Usage: python tuner_driver.py INPUT_DIR OUT_DIR CHECKPOINT STATE [KILL_AT_BATCH]
The query's sink writes each batch to OUT_DIR/batch_id=N (overwriting a replayed batch); with KILL_AT_BATCH the
process kills itself right after that batch is written, before Spark commits it. At start it prints one line,
``RESTORED <json>``: the scheduler's state as the tuner restored it, before any query registered.

On a cluster (tests/cluster/test_elastic_cluster.py): environment ``TUNER_MASTER`` (a standalone master URL) adds
``elastic="prompt"`` with ``TUNER_ELASTIC_PARAMS`` and ``TUNER_LATENCY_TARGET``, the elasticity policy's restored
state in the ``RESTORED`` line, and ``TUNER_METRICS`` the tuner's report directory."""

from __future__ import annotations

import json
import os
import signal
import sys


def main() -> None:
    import adaptstream
    from adaptstream.spark.session import build_spark

    input_dir, out, checkpoint, state = sys.argv[1:5]
    kill_at = int(sys.argv[5]) if len(sys.argv) > 5 else None
    master = os.environ.get("TUNER_MASTER")
    elastic: dict = {}
    if master:
        conf = {"spark.executor.memory": "512m", "spark.executor.cores": "1",
                "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # fmt: skip
        spark = build_spark(master=master, app_name="tuner-driver", conf=conf)
        elastic = {"elastic": "prompt", "elastic_params": os.environ.get("TUNER_ELASTIC_PARAMS", ""),
                   "latency_target": float(os.environ.get("TUNER_LATENCY_TARGET", "10")),
                   "metrics_path": os.environ.get("TUNER_METRICS")}  # fmt: skip
    else:
        spark = build_spark(app_name="tuner-driver")
    with adaptstream.tune(spark, scheduler="klink", state_path=state, **elastic) as tuner:
        restored = {"offset": tuner.restored, "scheduler": tuner.controller.policy.state_dict()}
        if tuner.elasticity is not None:
            restored["elasticity"] = tuner.elasticity.state_dict()
        print("RESTORED", json.dumps(restored))
        sys.stdout.flush()

        def sink(df, batch_id: int) -> None:
            df.write.mode("overwrite").parquet(os.path.join(out, f"batch_id={batch_id}"))
            if kill_at is not None and batch_id >= kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        df = (
            spark.readStream.format("adaptstream")
            .schema("k STRING, v INT")
            .option("path", input_dir)
            .option("maxFilesPerTrigger", "1")
            .option("fileStableSeconds", "0")
            .option("windowPeriod", "2 seconds")
            .load()
        )
        q = df.writeStream.queryName("killed").foreachBatch(sink).option("checkpointLocation", checkpoint).start()
        try:
            q.processAllAvailable()  # waits for every dataset the source recorded (adaptstream's drain)
        finally:
            q.stop()
    spark.stop()


if __name__ == "__main__":
    main()
