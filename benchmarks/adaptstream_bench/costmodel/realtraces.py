"""REAL traces: generated queries run as Spark Structured Streaming queries on this machine, measured.

Every query runs in local mode on one machine, so the trace has one host (this machine, described with the
Table I hardware features: cpu = 100% x local cores, ram = driver memory; bandwidth and latency are nominal
loopback values because nothing crosses a network) and every operator is placed on it. Queries use Spark's
built-in `rate` source (`timestamp` = generation time of the row, `value` = counter) and a fixed 1 s
processing-time trigger. What is measured, per output row, in a foreachBatch sink:

* Le = output time - event time of the OLDEST input row involved (min(timestamp) per window/group, the
  older side of a join; Costream Def. 3 with the rate source standing in for the broker);
* Lp = output time - ingestion time of the oldest input row involved, where a row's ingestion time is
  `current_timestamp()` of the micro-batch that read it (Spark evaluates it once per micro-batch);
* T = output rows per second after a warm-up; success = at least one output row and no query failure;
* backpressure = the median micro-batch duration in the second half exceeds the 1 s trigger interval (the
  engine falls behind and rows wait in the source; Spark itself warns "falling behind" in this case).

Configurations (master local[1]/local[2], driver memory, rates, window sizes, selectivities) are drawn from
the query generator and recorded in `meta`; so is the machine's load average, because other processes share
this machine. Each (master, memory) group runs in its own Python process (a new JVM). Labels origin="real".
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from adaptstream.costmodel.generate import EVENT_RATE, FILTER_SELECTIVITY
from adaptstream.costmodel.model import Host, Labels, Operator, QueryGraph, Trace, write_traces
from adaptstream.errors import CostModelError

TRIGGER_S = 1.0


@dataclass(frozen=True)
class RealQuery:
    """One runnable query configuration (a subset of the generator's space that Spark can express)."""

    query_id: str
    shape: str  # "linear" | "2-way-join"
    master: str
    driver_memory_mb: int
    rate: int
    n_filters: int
    selectivities: tuple[float, ...]
    agg: bool
    window_s: float
    slide_s: float
    groups: int  # distinct group-by keys (agg) / join keys (join)
    width: int


def draw_queries(n: int, seed: int = 0) -> list[RealQuery]:
    """n configurations: shapes, masters and memories alternate; rates and windows drawn from Table II."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        shape = ("linear", "2-way-join")[i % 2]
        master = ("local[1]", "local[2]")[(i // 2) % 2]
        mem = (1024, 2048)[(i // 4) % 2]
        rates = [r for r in EVENT_RATE[shape] if r <= 6400]  # a local machine, not a cluster
        nf = int(rng.integers(0 if shape != "linear" else 1, 3))
        sels = tuple(
            round(float(np.exp(rng.uniform(np.log(max(FILTER_SELECTIVITY[0], 0.1)), 0.0))), 3) for _ in range(nf)
        )
        agg = bool(rng.random() < 0.5) or (shape == "linear" and nf == 0)
        window = float(rng.choice([1.0, 2.0, 4.0]))
        sliding = bool(rng.random() < 0.5)
        out.append(
            RealQuery(
                query_id=f"real-{seed}-{i:03d}",
                shape=shape,
                master=master,
                driver_memory_mb=mem,
                rate=int(rng.choice(rates)),
                n_filters=nf,
                selectivities=sels,
                agg=agg,
                window_s=window,
                slide_s=window / 2 if sliding else window,
                groups=int(rng.choice([1, 10, 100])),
                width=int(rng.integers(3, 11)),
            )
        )
    return out


def query_graph(rq: RealQuery) -> QueryGraph:
    """The trace's QueryGraph for what `run_query` executes (features = the configuration)."""
    ops: list[Operator] = []
    edges: list[tuple[str, str]] = []
    dtypes = ",".join(["timestamp", "int"] + ["double"] * (rq.width - 2))
    n_src = 1 if rq.shape == "linear" else 2
    tails = []
    for s in range(n_src):
        sid = f"src{s}"
        ops.append(
            Operator(
                sid,
                "source",
                {"event_rate": float(rq.rate), "tuple_width_out": rq.width, "data_types": dtypes},
            )
        )
        tails.append(sid)
    for k, sel in enumerate(rq.selectivities):
        fid = f"flt{k}"
        ops.append(
            Operator(
                fid,
                "filter",
                {
                    "filter_function": "<",
                    "literal_type": "int",
                    "selectivity": sel,
                    "tuple_width_in": rq.width,
                    "tuple_width_out": rq.width,
                },
            )
        )
        edges.append((tails[0], fid))
        tails[0] = fid
    width = rq.width
    win = {
        "window_type": "sliding" if rq.slide_s < rq.window_s else "tumbling",
        "window_policy": "time",
        "window_size": rq.window_s,
        "window_slide": rq.slide_s,
    }
    tail = tails[0]
    if n_src == 2:
        ops.append(
            Operator(
                "join",
                "window_join",
                {
                    "join_key_type": "int",
                    "selectivity": 1.0 / rq.groups,
                    "tuple_width_in": rq.width,
                    "tuple_width_out": 2 * rq.width,
                    **win,
                },
            )
        )
        edges += [(tails[0], "join"), (tails[1], "join")]
        tail, width = "join", 2 * rq.width
    if rq.agg:
        ops.append(
            Operator(
                "agg",
                "window_agg",
                {
                    "agg_function": "avg",
                    "agg_type": "int",
                    "group_by_type": "int" if rq.groups > 1 else "none",
                    "selectivity": 0.0,
                    "tuple_width_in": width,
                    "tuple_width_out": 2 if rq.groups > 1 else 1,
                    **win,
                },
            )
        )
        edges.append((tail, "agg"))
        tail = "agg"
    ops.append(Operator("sink", "sink", {"tuple_width_in": width}))
    edges.append((tail, "sink"))
    return QueryGraph(rq.query_id, tuple(ops), tuple(edges))


def _source(spark, rq: RealQuery, tag: str):
    from pyspark.sql import functions as F

    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rq.rate)
        .option("numPartitions", 2)
        .load()
        .withColumn("ingest", F.current_timestamp())
    )
    for c in range(rq.width - 2):
        df = df.withColumn(f"{tag}c{c}", (F.col("value") * (c + 3)).cast("double"))
    return df.withColumn("key", F.col("value") % F.lit(rq.groups))


def _build(spark, rq: RealQuery):
    from pyspark.sql import functions as F

    df = _source(spark, rq, "a")
    for k, sel in enumerate(rq.selectivities):  # a pseudo-random predicate with the wanted selectivity
        df = df.filter(((F.col("value") * (7919 + 104729 * k)) % 1000) < int(sel * 1000))
    win = f"{rq.window_s} seconds"
    slide = f"{rq.slide_s} seconds"
    # oldest event/ingest times travel as plain doubles: a stream may carry only one event-time column
    df = df.withColumn("oldest_ev", F.col("timestamp").cast("double")).withColumn(
        "oldest_in", F.col("ingest").cast("double")
    )
    if rq.shape == "2-way-join":
        left = (
            df.withWatermark("timestamp", "1 second")
            .withColumn("w", F.window("timestamp", win, slide))
            .select("key", "w", "oldest_ev", "oldest_in")
        )
        r = _source(spark, rq, "b").withWatermark("timestamp", "1 second")
        r = r.withColumn("w", F.window("timestamp", win, slide)).select(
            F.col("key").alias("rkey"),
            F.col("w").alias("rw"),
            F.col("timestamp").cast("double").alias("rts"),
            F.col("ingest").cast("double").alias("ring"),
        )
        df = left.join(r, (left.key == r.rkey) & (left.w == r.rw)).select(
            "w",
            "key",
            F.least("oldest_ev", "rts").alias("oldest_ev"),
            F.least("oldest_in", "ring").alias("oldest_in"),
        )
        if rq.agg:
            df = df.groupBy("w", "key").agg(
                F.avg("key").alias("v"),
                F.min("oldest_ev").alias("oldest_ev"),
                F.min("oldest_in").alias("oldest_in"),
            )
    elif rq.agg:
        df = (
            df.withWatermark("timestamp", "1 second")
            .groupBy(F.window("timestamp", win, slide), "key")
            .agg(
                F.avg("key").alias("v"),
                F.min("oldest_ev").alias("oldest_ev"),
                F.min("oldest_in").alias("oldest_in"),
            )
        )
    return df.select("oldest_ev", "oldest_in")


def run_query(spark, rq: RealQuery, duration_s: float, warmup_s: float, workdir: Path) -> Labels:
    """Run one query for duration_s and measure its labels."""
    from pyspark.sql import functions as F

    acc = {"rows": 0, "rows_meas": 0, "le": 0.0, "lp": 0.0}
    start = time.time()

    def sink(batch_df, _batch_id) -> None:
        row = batch_df.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.col("oldest_ev").cast("double")).alias("ev"),
            F.sum(F.col("oldest_in").cast("double")).alias("ing"),
        ).collect()[0]
        now = time.time()
        n = int(row["n"] or 0)
        if n == 0:
            return
        acc["rows"] += n
        if now - start >= warmup_s:
            acc["rows_meas"] += n
            acc["le"] += n * now - float(row["ev"])
            acc["lp"] += n * now - float(row["ing"])

    q = (
        _build(spark, rq)
        .writeStream.foreachBatch(sink)
        .outputMode("append")
        .trigger(processingTime=f"{TRIGGER_S} seconds")
        .option("checkpointLocation", str(workdir / rq.query_id))
        .start()
    )
    failed = False
    try:
        q.awaitTermination(duration_s)
        failed = q.exception() is not None
    finally:
        progress = list(q.recentProgress)
        q.stop()
    elapsed = max(time.time() - start - warmup_s, 1e-3)
    half = [p for p in progress if p.get("timestamp") and _ts(p["timestamp"]) >= start + duration_s / 2]
    durs = [p["durationMs"].get("triggerExecution", 0) / 1000.0 for p in half]
    bp = bool(durs) and statistics.median(durs) > TRIGGER_S
    n = acc["rows_meas"]
    return Labels(
        throughput=n / elapsed,
        e2e_latency_ms=acc["le"] / n * 1000.0 if n else None,
        proc_latency_ms=acc["lp"] / n * 1000.0 if n else None,
        backpressure=bp,
        success=acc["rows"] > 0 and not failed,
        origin="real",
    )


def _ts(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def run_group(queries: list[RealQuery], duration_s: float, warmup_s: float, workdir: Path) -> list[dict]:
    """Run queries sharing one (master, memory) in this process's SparkSession; returns trace dicts."""
    from adaptstream.spark.session import build_spark

    rq0 = queries[0]
    spark = build_spark(
        rq0.master,
        app_name="adaptstream-realtraces",
        conf={"spark.driver.memory": f"{rq0.driver_memory_mb}m"},
    )
    cores = int(rq0.master.split("[")[1].rstrip("]"))
    host = Host(
        "this-machine",
        cpu=100.0 * cores,
        ram_mb=float(rq0.driver_memory_mb),
        bandwidth_mbits=10000.0,
        latency_ms=0.0,
        category="small" if cores == 1 else "medium",
    )
    out = []
    try:
        for rq in queries:
            load_before = os.getloadavg()[0]
            t0 = time.time()
            labels = run_query(spark, rq, duration_s, warmup_s, workdir)
            q = query_graph(rq)
            trace = Trace(
                rq.query_id,
                q,
                (host,),
                {op.id: host.id for op in q.operators},
                labels,
                {
                    "config": asdict(rq),
                    "duration_s": duration_s,
                    "warmup_s": warmup_s,
                    "trigger_s": TRIGGER_S,
                    "loadavg_1m_before": round(load_before, 2),
                    "loadavg_1m_after": round(os.getloadavg()[0], 2),
                    "wall_s": round(time.time() - t0, 1),
                    "spark_version": spark.version,
                    "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
            )
            out.append(trace.to_dict())
            print(
                f"{rq.query_id} {q.query_type} {rq.master} {rq.driver_memory_mb}MB rate={rq.rate}: {labels}",
                flush=True,
            )
    finally:
        spark.stop()
    return out


def record_real(
    out_path: str | Path,
    n: int = 24,
    seed: int = 0,
    duration_s: float = 18.0,
    warmup_s: float = 5.0,
    workdir: str | Path = "/tmp/adaptstream-realtraces",
) -> int:
    """Record n real traces (one subprocess per (master, memory) group) into a JSON-lines file."""
    queries = draw_queries(n, seed)
    groups: dict[tuple[str, int], list[RealQuery]] = {}
    for rq in queries:
        groups.setdefault((rq.master, rq.driver_memory_mb), []).append(rq)
    traces = []
    for qs in groups.values():
        payload = json.dumps(
            {
                "queries": [asdict(q) for q in qs],
                "duration_s": duration_s,
                "warmup_s": warmup_s,
                "workdir": str(workdir),
            }
        )
        proc = subprocess.run(
            [sys.executable, "-m", "adaptstream_bench.costmodel.realtraces"],
            input=payload,
            capture_output=True,
            text=True,
            check=False,
        )
        sys.stderr.write("\n".join(line for line in proc.stdout.splitlines() if not line.startswith("{")) + "\n")
        if proc.returncode != 0:
            msg = f"real-trace group {qs[0].master}/{qs[0].driver_memory_mb}MB failed: {proc.stderr[-2000:]}"
            raise CostModelError(msg)
        last = [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
        traces += [Trace.from_dict(d) for d in json.loads(last)["traces"]]
    traces.sort(key=lambda t: t.trace_id)
    return write_traces(out_path, traces)


def _main() -> None:
    req = json.loads(sys.stdin.read())
    qs = [RealQuery(**{**q, "selectivities": tuple(q["selectivities"])}) for q in req["queries"]]
    traces = run_group(qs, req["duration_s"], req["warmup_s"], Path(req["workdir"]))
    print(json.dumps({"traces": traces}), flush=True)


if __name__ == "__main__":
    _main()
