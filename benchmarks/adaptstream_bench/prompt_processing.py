"""``adaptstream bench prompt-processing``: reduce-side balance of Prompt's Alg. 3 against hashing (Prompt Fig. 13).

One invocation, one SparkSession. For each Zipf exponent z, each input partitioning (time-based, hash, PK-2, cAM:
how the batch's rows are cut into P map tasks) and each reduce allocator (hash, prompt), a few one-second micro-
batches of SynD rows (Zipf words, Prompt Sec. 7.1) run through the pane execution mode (:mod:`adaptstream.spark.
pane`) exactly as a streaming query's batches do: map tasks = the planned blocks, R reduce buckets filled by the
allocator, per-(pane, word) counts. Spark's status store reports every reduce task's input records and run time;
per batch we record max/mean of both, and the bound no key-atomic allocation can beat (the largest cluster's share
times R). The allocator's own time is measured inside the map tasks. Writes prompt_processing.json / .md / .png to
``--out`` (default runs/bench-prompt-processing-<time>/; ``--update-docs`` writes docs/results/).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

ALLOCATORS = ("hash", "prompt")
INPUTS = ("time", "hash", "pk2", "cam")


def synd_spec(window_s: int = 30, slide_s: int = 10):
    """SynD word count (30 s window sliding 10 s) as a pane spec."""
    from adaptstream.spark.pane import PaneSpec

    return PaneSpec(
        name="synd",
        time_sql="unix_micros(ts)",
        data_sql="true",
        ts_fn="timestamp_micros",
        window=window_s * 1_000_000,
        slide=slide_s * 1_000_000,
        delay=0,
        groups=("word",),
        out_groups=("word",),
        values=("one",),
        finals=(("count", "n_one"),),
    )


def batch_table(rows: int, z: float, keys: int, batch: int, seed: int):
    """Rows of one-second batch ``batch``: ts spread over that second, a Zipf word, a constant 1."""
    import pyarrow as pa

    from adaptstream.workloads.partition_workloads import T0, zipf_keys

    words = zipf_keys(rows, z, keys, seed=seed * 1000 + batch)
    micros = (batch * 1_000_000 + np.arange(rows) * (1_000_000 // rows)).astype(np.int64)
    ts = pa.array(micros + int(T0.value // 1000), pa.timestamp("us", tz="UTC"))
    return pa.table({"ts": ts, "word": pa.array(words, pa.int64()), "one": pa.array(np.ones(rows, np.int32))})


def stage_span_ms(tasks: list[dict]) -> float | None:
    """Wall time of a stage from its tasks: first launch to last finish (what the stage took on this cluster)."""
    spans = [(t["launch_ms"], t["launch_ms"] + t["duration_ms"]) for t in tasks if t.get("duration_ms") is not None]
    return float(max(e for _, e in spans) - min(s for s, _ in spans)) if spans else None


def executor_count(spark) -> int:
    """Executors registered with the application (the driver's own entry excluded, except in local mode)."""
    infos = spark.sparkContext.statusTracker().getExecutorInfos()
    return max(1, len(infos) - 1) if not spark.sparkContext.master.startswith("local") else 1


def run_config(spark, z: float, inp: str, alloc: str, a: dict, work: Path) -> list[dict]:
    """``a['batches']`` batches of one configuration; per batch the figures the report uses."""
    from adaptstream.partitioning import build_partitioner, key_hash
    from adaptstream.partitioning.spark_blocks import blocks_dataframe
    from adaptstream.spark.pane import PaneExecutor

    ex = PaneExecutor(None, alloc, a["buckets"], str(work / "state"), str(work / "results"), spec=synd_spec())
    part = build_partitioner(inp)
    out = []
    for b in range(a["batches"]):
        table = batch_table(a["rows"], z, a["keys"], b, a["seed"])
        blocks = np.asarray(part.assign(key_hash(table, ["word"]), a["map_tasks"]))
        df, bc = blocks_dataframe(spark, table, blocks, a["map_tasks"])
        try:
            stats = ex.process(df, b)
        finally:
            bc.unpersist()
        records = np.array([t["shuffle_records"] for t in stats["reduce_tasks"]], float)
        run_ms = np.array([t["run_ms"] for t in stats["reduce_tasks"]], float)
        largest = int(np.bincount(table.column("word").to_numpy()).max())
        out.append(
            {
                "batch": b,
                "rows": stats["rows"],
                "keys": stats["keys"],
                "split_keys": stats["split_keys"],
                "records": records.tolist(),
                "run_ms": run_ms.tolist(),
                "records_max_mean": float(records.max() / records.mean()),
                "run_max_mean": float(run_ms.max() / run_ms.mean()) if run_ms.mean() > 0 else None,
                "bound_max_mean": largest * a["buckets"] / stats["rows"],
                "makespan_ms": float(run_ms.max()),
                "stage_span_ms": stage_span_ms(stats["reduce_tasks"]),
                "allocator_s": stats["allocator_s"],
                "reference_s": stats["reference_s"],
                "job_s": stats["job_s"],
                "batch_s": stats["batch_s"],
            }
        )
    return out


def prompt_processing_command(
    out: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="where the report goes [default: runs/bench-prompt-processing-<time>]"),
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    zipf: Annotated[str, typer.Option(help="Zipf exponents")] = "0.5,1.0,1.5,2.0",
    inputs: Annotated[str, typer.Option(help="input partitionings (map tasks)")] = ",".join(INPUTS),
    rows: Annotated[int, typer.Option(min=1000, help="rows per one-second batch")] = 40_000,
    keys: Annotated[int, typer.Option(min=10, help="distinct words (Zipf support)")] = 10_000,
    batches: Annotated[int, typer.Option(min=1, help="batches per configuration")] = 3,
    map_tasks: Annotated[int, typer.Option(min=1, help="map tasks (input blocks) per batch")] = 4,
    buckets: Annotated[int, typer.Option(min=1, help="reduce buckets per batch")] = 8,
    master: Annotated[str, typer.Option(help="Spark master URL")] = "local[2]",
) -> None:
    """Reduce balance (max/mean reduce-task records and run time), hash vs Prompt Alg. 3, per z and input."""
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.partitioning import PARTITIONERS
    from adaptstream.spark.session import build_spark
    from adaptstream_bench.meta import start_meta
    from adaptstream_bench.prompt_processing_report import write_report

    target = report_dir("bench-prompt-processing", out, update_docs, report="prompt_processing.json")
    zs = [float(x) for x in zipf.split(",") if x.strip()]
    ins = [x.strip() for x in inputs.split(",") if x.strip()]
    for name in ins:
        PARTITIONERS.get(name)
    if not zs or not ins:
        msg = "--zipf and --inputs need at least one value each"
        raise ConfigError(msg)
    a = {
        "rows": rows,
        "keys": keys,
        "batches": batches,
        "map_tasks": map_tasks,
        "buckets": buckets,
        "seed": 7,
        "batch_interval_s": 1.0,
        "master": master,
    }
    meta = {
        **start_meta("bench", "prompt-processing"),
        "config": a,
    }
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-pp-"))
    spark = build_spark(master=master, app_name="bench-prompt-processing")
    results = []
    try:
        for alloc in ALLOCATORS:  # warm-up: workers start, numba compiles Alg. 3 once per worker
            run_config(spark, 1.0, "hash", alloc, {**a, "batches": 1}, work / f"warm-{alloc}")
        meta["executors"] = executor_count(spark)
        for z in zs:
            for inp in ins:
                for alloc in ALLOCATORS:
                    t0 = time.perf_counter()
                    per_batch = run_config(spark, z, inp, alloc, a, work / f"{z}-{inp}-{alloc}")
                    results.append({"z": z, "input": inp, "allocator": alloc, "batches": per_batch})
                    mean = np.mean([b["records_max_mean"] for b in per_batch])
                    typer.echo(
                        f"  z={z:<4} input={inp:5s} reduce={alloc:6s} records max/mean {mean:5.2f} "
                        f"({time.perf_counter() - t0:.0f} s)"
                    )
    finally:
        spark.stop()
    meta.update(load_after=os.getloadavg(), finished=time.time())
    write_report({"meta": meta, "results": results}, target)
    typer.echo(f"bench prompt-processing: report in {target / 'prompt_processing.md'}")
