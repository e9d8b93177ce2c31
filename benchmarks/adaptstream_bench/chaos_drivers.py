"""The driver programs ``bench chaos`` runs (each as ``python driver.py WHERE OUT CHECKPOINT MASTER``), kept apart
from the benchmark's own code: each is what a user's application would be."""

FILES_DRIVER = r"""
import sys
from adaptstream.spark.session import build_spark
src, out, ck, master = sys.argv[1:5]
spark = build_spark(master=master, app_name="chaos-files")
df = (spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", src)
      .option("fileStableSeconds", "0").option("maxFilesPerTrigger", "1").load())
q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
"""

PANE_DRIVER = r"""
import os, sys
import adaptstream
from adaptstream.spark.session import build_spark
src, out, ck, master = sys.argv[1:5]
spark = build_spark(master=master, app_name="chaos-pane")
adaptstream.register(spark)
def sink(df, batch_id):
    df.write.mode("overwrite").parquet(os.path.join(out, f"batch_id={batch_id}"))
df = (spark.readStream.format("adaptstream").schema("k STRING, ts TIMESTAMP, v INT").option("path", src)
      .option("maxFilesPerTrigger", "1").option("fileStableSeconds", "0").load())
q = adaptstream.windowed_aggregate(df, keys="k", time="ts", window="20 seconds", slide="10 seconds",
                                   aggs={"v": ["sum", "count", "max"]}, reduce="split", reduce_buckets=3,
                                   sink=sink, checkpoint=ck, trigger={"availableNow": True})
q.awaitTermination()
spark.stop()
"""

REDIS_DRIVER = r"""
import sys
from adaptstream.spark.session import build_spark
url, out, ck, master = sys.argv[1:5]
spark = build_spark(master=master, app_name="chaos-redis")
df = (spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", url)
      .option("statePath", ck + "-state").option("datasetSeconds", "0.1").option("maxDatasetsPerBatch", "1")
      .option("redisTimeout", "60").load())
q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
"""

CONTROLLER_DRIVER = r"""
import os, sys
import adaptstream
from adaptstream.spark.session import build_spark
src, out, ck, master = sys.argv[1:5]
spark = build_spark(master=master, app_name="chaos-controller")
with adaptstream.tune(spark, scheduler="klink", state_path=ck + "-tuner") as tuner:
    with open(ck + "-restored", "w") as f:  # what this start restored of the scheduler's state
        f.write(str(tuner.restored))
    qs = []
    for name in ("a", "b"):
        df = (spark.readStream.format("adaptstream").schema("k STRING, v INT").option("path", os.path.join(src, name))
              .option("fileStableSeconds", "0").option("maxFilesPerTrigger", "1").option("windowPeriod", "2 seconds")
              .load())
        qs.append(df.writeStream.queryName(name).format("parquet").option("path", os.path.join(out, name))
                  .option("checkpointLocation", os.path.join(ck, name)).trigger(availableNow=True).start())
    for q in qs:
        q.awaitTermination()
spark.stop()
"""

SCRIPTS = {
    "driver-files": FILES_DRIVER,
    "worker-files": FILES_DRIVER,
    "executor-worker": FILES_DRIVER,
    "driver-pane": PANE_DRIVER,
    "driver-redis": REDIS_DRIVER,
    "redis-server": REDIS_DRIVER,
    "controller": CONTROLLER_DRIVER,
}
