"""A pane-mode query in its own process (tests/spark/test_pane.py kills it with SIGKILL mid-run and restarts it).

Usage: python pane_driver.py WORKLOAD ALLOCATOR INPUT_DIR WORK_DIR [KILL_AFTER_BATCH]
With KILL_AFTER_BATCH the process kills itself (SIGKILL) inside foreachBatch once that batch's panes, windows and
metadata are written but before Spark commits the batch: the worst moment for exactly-once."""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    from adaptstream.spark.pane import PaneExecutor
    from adaptstream.spark.session import build_spark
    from adaptstream.workloads import WORKLOADS

    name, allocator, input_dir, work = sys.argv[1:5]
    kill_after = int(sys.argv[5]) if len(sys.argv) > 5 else None
    spark = build_spark(app_name="pane-driver")
    w = WORKLOADS.get(name)

    def maybe_die(stats: dict) -> None:
        if kill_after is not None and stats["batch"] >= kill_after and stats["rows"] > 0:
            os.kill(os.getpid(), signal.SIGKILL)

    ex = PaneExecutor(
        w,
        allocator,
        3,
        os.path.join(work, "state"),
        os.path.join(work, "results"),
        os.path.join(work, "metrics"),
        on_batch=maybe_die,
    )
    df = (
        spark.readStream.format("adaptstream")
        .schema(w.generator_class().spark_schema_ddl)
        .option("path", input_dir)
        .option("admission", "asap")
        .option("maxDatasetsPerBatch", "6")
        .option("metricsPath", os.path.join(work, "source-metrics"))
        .option("fileStableSeconds", "0")
        .load()
    )
    q = df.writeStream.foreachBatch(ex).option("checkpointLocation", os.path.join(work, "checkpoint")).start()
    q.processAllAvailable()
    q.stop()
    spark.stop()


if __name__ == "__main__":
    main()
