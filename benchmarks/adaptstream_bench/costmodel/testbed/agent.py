"""A long-lived driver pinned to one testbed host: runs the pieces of placed queries placed on that host.

One process per host and corpus job (a pinned SparkSession costs 40-55 s to start on a small host, so it is
kept). Protocol: one JSON command per stdin line, one JSON reply per stdout line prefixed ``AGENT ``:
``{"cmd": "start", "trace": id, "pieces": [...], "params": {...}, "upstream": {...}, "redis": [host, port],
"dir": checkpoint_dir}``, ``{"cmd": "stop", "trace": id}`` (replies with each piece's progress and the sink's
per-batch latency figures), ``{"cmd": "exit"}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from adaptstream_bench.costmodel.testbed.placement import FILTER_MOD, edge_key
from adaptstream_bench.costmodel.testbed.redisedge import RedisEdgeSource, push_partition

TRIGGER = "1 second"
WATERMARK = "500 milliseconds"


def _reply(obj: dict[str, Any]) -> None:
    sys.stdout.write("AGENT " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def build_piece(spark: Any, cmd: dict[str, Any], piece: dict[str, Any]) -> Any:
    """The streaming DataFrame of a piece's tail operator."""
    from pyspark.sql import functions as F

    params, upstream, members = cmd["params"], cmd["upstream"], set(piece["ops"])
    rhost, rport = cmd["redis"]

    def has_watermark(op_id: str) -> bool:
        """A join inside this piece (possibly behind filters) already defines the event-time watermark; Spark
        refuses a second `withWatermark` on its output."""
        while op_id in members and params[op_id]["kind"] == "filter":
            op_id = upstream[op_id][0]
        return op_id in members and params[op_id]["kind"] == "window_join"

    def timed(d: Any, up: str) -> Any:
        if has_watermark(up):
            return d
        return d.withColumn("ts", F.timestamp_seconds("ev")).withWatermark("ts", WATERMARK)

    def df_of(op_id: str) -> Any:
        if op_id not in members:
            return (
                spark.readStream.format("tbredis")
                .option("host", rhost)
                .option("port", str(rport))
                .option("key", edge_key(cmd["trace"], op_id))
                .load()
            )
        p = params[op_id]
        ups = [df_of(u) for u in upstream[op_id]]
        kind = p["kind"]
        if kind == "source":
            raw = spark.readStream.format("rate").option("rowsPerSecond", max(1, int(p["rate"])))
            return (
                raw.option("numPartitions", 1)
                .load()
                .select(
                    (F.unix_micros("timestamp") / 1e6).alias("ev"),
                    (F.unix_micros(F.current_timestamp()) / 1e6).alias("ing"),
                    (F.col("value") % 1000).alias("k"),
                    F.col("value").alias("v"),
                    F.repeat(F.lit("x"), 8 * int(p["width"])).alias("pl"),
                )
            )
        if kind == "filter":
            return ups[0].where(F.pmod(F.col("v") * int(p["mult"]), F.lit(FILTER_MOD)) < int(p["threshold"]))
        if kind == "sink":
            return ups[0]
        ms = max(1, round(p["window_s"] * 1000))
        if kind == "window_agg":
            d = timed(ups[0], upstream[op_id][0])
            slide = max(1, round(p["slide_s"] * 1000))
            w = F.window("ts", f"{ms} milliseconds", f"{slide} milliseconds")
            g = d.groupBy(w, F.pmod(F.col("v"), F.lit(int(p["groups"]))).alias("k")).agg(
                F.min("ev").alias("ev"), F.min("ing").alias("ing"), F.expr(f"{p['fn']}(v)").alias("a")
            )
            return g.select("ev", "ing", "k", F.col("a").cast("long").alias("v"), F.lit("").alias("pl"))
        # window_join: an interval join on a key with round(1/selectivity) values
        keys = int(p["keys"])
        sides = []
        for name, d, u in zip(("a", "b"), ups, upstream[op_id], strict=True):
            d = timed(d, u).withColumn("jk", F.pmod(F.col("v") * 31, F.lit(keys)))
            sides.append(d.alias(name))
        cond = F.expr(
            f"a.jk = b.jk AND b.ts >= a.ts - interval {ms} milliseconds AND b.ts <= a.ts + interval {ms} milliseconds"
        )
        j = sides[0].join(sides[1], cond)
        return j.select(
            F.least("a.ev", "b.ev").alias("ev"),
            F.least("a.ing", "b.ing").alias("ing"),
            F.col("a.jk").alias("k"),
            F.col("a.v").alias("v"),
            F.concat("a.pl", "b.pl").alias("pl"),
            F.col("a.ts").alias("ts"),  # keeps the watermark for a later join or aggregation in this piece
        )

    return df_of(piece["tail"])


class Agent:
    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.queries: dict[str, list[tuple[str, Any]]] = {}
        self.sink_batches: dict[str, list[dict[str, float]]] = {}
        self.lock = threading.Lock()

    def start(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from pyspark.sql import functions as F

        trace = cmd["trace"]
        rhost, rport = cmd["redis"]
        started = []
        batches: list[dict[str, float]] = []
        self.sink_batches[trace] = batches
        for piece in cmd["pieces"]:
            df = build_piece(self.spark, cmd, piece)
            if piece["sink"]:

                def sink(bdf: Any, bid: int, _b: list = batches) -> None:
                    r = bdf.agg(
                        F.count(F.lit(1)).alias("n"),
                        F.percentile_approx("ev", 0.5).alias("ev50"),
                        F.percentile_approx("ing", 0.5).alias("ing50"),
                    ).collect()[0]
                    t = time.time()
                    if r["n"]:
                        _b.append({"t": t, "n": int(r["n"]), "le": t - r["ev50"], "lp": t - r["ing50"]})

                fn: Callable[..., None] = sink
            else:
                push = push_partition(rhost, int(rport), edge_key(trace, piece["tail"]))

                def forward(bdf: Any, bid: int, _p: Any = push) -> None:
                    bdf.foreachPartition(_p)

                fn = forward

            q = (
                df.writeStream.foreachBatch(fn)
                .trigger(processingTime=TRIGGER)
                .option("checkpointLocation", f"{cmd['dir']}/{piece['piece']}")
                .queryName(f"{trace}-{piece['piece']}")
                .start()
            )
            started.append((piece["piece"], q))
        self.queries[trace] = started
        return {"ok": True, "started": [p for p, _ in started]}

    def stop(self, cmd: dict[str, Any]) -> dict[str, Any]:
        trace = cmd["trace"]
        out: dict[str, Any] = {"ok": True, "pieces": {}}
        for name, q in self.queries.pop(trace, []):
            progress = [p if isinstance(p, dict) else json.loads(p.json) for p in q.recentProgress]
            exc = q.exception()
            q.stop()
            out["pieces"][name] = {
                "exception": str(exc)[:500] if exc else None,
                "batches": [
                    {
                        "ts": p.get("timestamp"),
                        "ms": p.get("durationMs", {}).get("triggerExecution"),
                        "rows": p.get("numInputRows"),
                    }
                    for p in progress
                ],
            }
        out["sink"] = self.sink_batches.pop(trace, [])
        return out


def main() -> None:
    import os

    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", "120")  # the driver-side Python source runners
    conf = json.loads(sys.argv[2])
    from adaptstream.spark.session import build_spark

    spark = build_spark(master=sys.argv[1], app_name=sys.argv[3], conf=conf, driver_memory="768m", log_file=sys.argv[4])
    spark.dataSource.register(RedisEdgeSource)
    agent = Agent(spark)
    _reply({"ok": True, "ready": True})
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "exit":
                break
            _reply(agent.start(cmd) if cmd["cmd"] == "start" else agent.stop(cmd))
        except Exception as exc:  # reported to the orchestrator, which records a failed run
            _reply({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:800]}"})
    spark.stop()


if __name__ == "__main__":
    main()
