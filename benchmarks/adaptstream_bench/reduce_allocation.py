"""``adaptstream bench reduce-allocation``: reduce-input balance of hashing, Prompt's Alg. 3 and the splitting
allocator per Zipf z, key count and reduce buckets R, with Spark's own aggregation on the same rows (issue #53).

One invocation, one SparkSession. Each configuration runs a few one-second SynD batches (Zipf words) through the
pane execution mode (the executor of ``adaptstream.windowed_aggregate`` and ``adaptstream run --reduce``), time-
ordered input cut into P map tasks (Spark's default input shape). Recorded per batch: max/mean of the reduce
tasks' shuffle records and their stage span (Spark's status store), the allocator's full cost (its time in the
map tasks plus, for Alg. 3, the reference pass it needs; ``split`` and ``hash`` gather the batch statistics in the
map tasks and run no such pass), and the largest key's share. Reference: Spark's own ``groupBy(window, word)
.count()`` over the same rows as a *batch* job with R shuffle partitions (the shuffle shape of its streaming
aggregation: partial aggregation in the map tasks, hash exchange), its reduce stage measured the same way.
Writes reduce_allocation.json / .md / .png to ``--out`` (default runs/bench-reduce-allocation-<time>/;
``--update-docs`` writes docs/results/).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from adaptstream_bench.prompt_processing import batch_table, executor_count, stage_span_ms, synd_spec

ALLOCATORS = ("hash", "prompt", "split")


def _ints(text: str, what: str) -> list[int]:
    from adaptstream.errors import ConfigError

    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        msg = f"--{what} takes a comma-separated list of positive integers, got {text!r}"
        raise ConfigError(msg)
    return out


def _batch_figures(stats: dict, table, buckets: int) -> dict:
    records = np.array([t["shuffle_records"] for t in stats["reduce_tasks"]], float)
    largest = int(np.unique(table.column("word").to_numpy(), return_counts=True)[1].max())
    return {
        "rows": stats["rows"],
        "records_max_mean": float(records.max() / records.mean()) if records.mean() > 0 else None,
        "bound_max_mean": largest * buckets / stats["rows"],
        "largest_share": largest / stats["rows"],
        "stage_span_ms": stage_span_ms(stats["reduce_tasks"]),
        "allocator_s": stats["allocator_s"],
        "reference_s": stats["reference_s"],
        "full_cost_s": stats["allocator_s"] + stats["reference_s"],
        "job_s": stats["job_s"],
        "batch_s": stats["batch_s"],
    }


def run_pane(spark, z: float, keys: int, buckets: int, alloc: str, a: dict, work: Path) -> list[dict]:
    from adaptstream.partitioning import build_partitioner, key_hash
    from adaptstream.partitioning.spark_blocks import blocks_dataframe
    from adaptstream.spark.pane import PaneExecutor

    ex = PaneExecutor(None, alloc, buckets, str(work / "state"), str(work / "results"), spec=synd_spec())
    part = build_partitioner("time")
    out = []
    for b in range(a["batches"]):
        table = batch_table(a["rows"], z, keys, b, a["seed"])
        blocks = np.asarray(part.assign(key_hash(table, ["word"]), a["map_tasks"]))
        df, bc = blocks_dataframe(spark, table, blocks, a["map_tasks"])
        try:
            out.append({"batch": b, **_batch_figures(ex.process(df, b), table, buckets)})
        finally:
            bc.unpersist()
    return out


def run_spark(spark, z: float, keys: int, buckets: int, a: dict) -> list[dict]:
    """Spark's own windowed count over the same batches (batch job, R shuffle partitions, AQE off)."""
    from pyspark.sql import functions as F

    from adaptstream.partitioning import build_partitioner, key_hash
    from adaptstream.partitioning.spark_blocks import blocks_dataframe
    from adaptstream.spark.taskmetrics import reduce_stage_tasks

    sc, part, out = spark.sparkContext, build_partitioner("time"), []
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.set("spark.sql.shuffle.partitions", str(buckets))
    for b in range(a["batches"]):
        table = batch_table(a["rows"], z, keys, b, a["seed"])
        blocks = np.asarray(part.assign(key_hash(table, ["word"]), a["map_tasks"]))
        df, bc = blocks_dataframe(spark, table, blocks, a["map_tasks"])
        group = f"bench-reduce-spark-{z}-{keys}-{buckets}-{b}"
        sc.setJobGroup(group, group, False)
        try:
            t0 = time.perf_counter()
            agg = df.groupBy(F.window("ts", "30 seconds", "10 seconds"), "word").count()
            agg.write.format("noop").mode("overwrite").save()
            job_s = time.perf_counter() - t0
            tasks = reduce_stage_tasks(sc, sc.statusTracker().getJobIdsForGroup(group), buckets)
        finally:
            sc.setJobGroup(None, None, False)
            bc.unpersist()
        records = np.array([t["shuffle_records"] for t in tasks], float)
        out.append(
            {
                "batch": b,
                "records_max_mean": float(records.max() / records.mean()) if records.mean() > 0 else None,
                "reduce_records": float(records.sum()),
                "stage_span_ms": stage_span_ms(tasks),
                "job_s": job_s,
            }
        )
    return out


def reduce_allocation_command(
    out: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="where the report goes [default: runs/bench-reduce-allocation-<time>]"),
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    zipf: Annotated[str, typer.Option(help="Zipf exponents")] = "0.5,1.0,1.5,2.0",
    keys: Annotated[str, typer.Option(help="distinct words (Zipf support), comma-separated")] = "10000,1000000",
    buckets: Annotated[str, typer.Option(help="reduce buckets R, comma-separated")] = "8,16",
    rows: Annotated[int, typer.Option(min=1000, help="rows per one-second batch")] = 40_000,
    batches: Annotated[int, typer.Option(min=1, help="batches per configuration")] = 3,
    map_tasks: Annotated[int, typer.Option(min=1, help="map tasks (input blocks) per batch")] = 4,
    master: Annotated[str, typer.Option(help="Spark master URL")] = "local[2]",
) -> None:
    """Reduce balance of hash, prompt and split (and Spark's own aggregation) per z, keys and R; allocator cost."""
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark
    from adaptstream_bench.meta import start_meta
    from adaptstream_bench.reduce_allocation_report import write_report

    try:
        zs = [float(x) for x in zipf.split(",") if x.strip()]
    except ValueError:
        zs = []
    if not zs:
        msg = f"--zipf takes a comma-separated list of numbers, got {zipf!r}"
        raise ConfigError(msg)
    ks, rs = _ints(keys, "keys"), _ints(buckets, "buckets")
    target = report_dir("bench-reduce-allocation", out, update_docs, report="reduce_allocation.json")
    a = {"rows": rows, "batches": batches, "map_tasks": map_tasks, "seed": 7, "batch_interval_s": 1.0}
    meta = {**start_meta("bench", "reduce-allocation"), "config": {**a, "master": master, "zipf": zs, "keys": ks}}
    meta["config"]["buckets"] = rs
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-ra-"))
    spark = build_spark(master=master, app_name="bench-reduce-allocation")
    results = []
    try:
        for alloc in ALLOCATORS:  # warm-up: workers start, numba compiles the allocators once per worker
            run_pane(spark, 1.0, 1000, rs[0], alloc, {**a, "batches": 1}, work / f"warm-{alloc}")
        meta["executors"] = executor_count(spark)
        for z in zs:
            for k in ks:
                for r in rs:
                    t0 = time.perf_counter()
                    cell: dict[str, Any] = {"z": z, "keys": k, "buckets": r, "spark": run_spark(spark, z, k, r, a)}
                    for alloc in ALLOCATORS:
                        cell[alloc] = run_pane(spark, z, k, r, alloc, a, work / f"{z}-{k}-{r}-{alloc}")
                    results.append(cell)
                    mm = {n: np.mean([b["records_max_mean"] or np.nan for b in cell[n]]) for n in ALLOCATORS}
                    typer.echo(
                        f"  z={z:<4} keys={k:<8} R={r:<3} records max/mean hash {mm['hash']:.2f} "
                        f"prompt {mm['prompt']:.2f} split {mm['split']:.2f} ({time.perf_counter() - t0:.0f} s)"
                    )
    finally:
        spark.stop()
    meta.update(load_after=os.getloadavg(), finished=time.time())
    write_report({"meta": meta, "results": results}, target)
    typer.echo(f"bench reduce-allocation: report in {target / 'reduce_allocation.md'}")
