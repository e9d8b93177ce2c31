"""Spark-timed partitioning benchmarks: every partitioner's blocks run by real Spark, on local[N] or a cluster.

(c) `rate`: Prompt Fig. 11, highest sustainable input rate (processing time <= batch interval) per partitioner.
(d) `blocks`: holistic Fig. 5-7, Spark throughput vs number of blocks, with the aggregation load Gamma / N.

Each run writes one JSON (meta: command, git revision, machine, master, load average per measurement) and the
Markdown and PNG are rendered from that JSON only, so `--report-only` reproduces them. A cluster master (spark://)
writes `<name>_cluster.*` beside the local report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.partitioning import build_partitioner, key_hash
from adaptstream.partitioning.metrics import batch_report
from adaptstream.workloads.partition_workloads import get_workload, synd, to_arrow
from adaptstream_bench.meta import sample_load, start_meta
from adaptstream_bench.partitioning import warm_partitioners, write_json


def stem(bench: str, master: str) -> str:
    return f"partitioning_{bench}" + ("_cluster" if master.startswith("spark://") else "")


def _spark(master: str) -> Any:
    from adaptstream.spark.session import build_spark

    return build_spark(master=master, app_name="adaptstream-partitioning-bench")


def process_batch(
    spark: Any, name: str, table: Any, keys: np.ndarray, num_blocks: int, query: Callable, part: Any = None
) -> dict[str, float]:
    """One micro-batch: buffering statistics (untimed: they happen while tuples arrive), then the timed cut:
    assign() + Spark executing the query over the blocks."""
    from adaptstream.partitioning.spark_blocks import timed_query

    part = part or build_partitioner(name)
    chunk = max(1, len(keys) // 50)
    for lo in range(0, len(keys), chunk):
        part.observe(keys[lo : lo + chunk])
    t = time.perf_counter()
    blocks = part.assign(keys, num_blocks)
    assign_s = time.perf_counter() - t
    spark_s = timed_query(spark, table, blocks, num_blocks, query)
    rep = batch_report(keys, blocks, num_blocks)
    return {
        "assign_s": assign_s,
        "spark_s": spark_s,
        "total_s": assign_s + spark_s,
        "gamma_ratio": rep["aggregation_cost"] / max(len(keys), 1),
        "bsi": rep["bsi"],
    }


def sustainable_rate(
    spark: Any, name: str, interval: float, z: float, cfg: dict[str, Any], meta: dict[str, Any]
) -> tuple[float, list[dict[str, Any]]]:
    """Geometric bisection for the highest rate whose batch processing time <= interval (2 batches per probe)."""
    w = get_workload("synd-wordcount")
    lo, hi = cfg["lo"], cfg["hi"]
    probes: list[dict[str, Any]] = []
    best = 0.0
    part = build_partitioner(name)
    for step in range(cfg["steps"]):
        rate = float(np.sqrt(lo * hi))
        n = int(rate * interval)
        times = []
        for rep in range(2):
            table = to_arrow(synd(n, z=z, num_keys=100_000, rate=rate, seed=step * 10 + rep))
            keys = key_hash(table, ["word"])
            times.append(process_batch(spark, name, table, keys, cfg["blocks"], w.query, part)["total_s"])
        sample_load(meta)
        ok = max(times) <= interval
        probes.append({"rate": rate, "processing_s": max(times), "sustainable": ok, "load": meta["loads"][-1]})
        if ok:
            best, lo = max(best, rate), rate
        else:
            hi = rate
    return best, probes


def bench_rate(
    names: Sequence[str] = ("time", "shuffle", "hash", "pk2", "cam", "prompt"),
    intervals: Sequence[float] = (1.0, 2.0, 3.0),
    zs: Sequence[float] = (0.5, 1.5, 2.0),
    num_blocks: int = 2,
    steps: int = 4,
    lo: float = 20_000,
    hi: float = 2_000_000,
    master: str = "local[2]",
    out_dir: Path = Path("docs/results"),
) -> Path:
    cfg = {"names": list(names), "blocks": num_blocks, "steps": steps, "lo": lo, "hi": hi, "z_interval": 1.0}
    meta = start_meta("partitioning", "bench", "rate", master=master)
    data: dict[str, Any] = {"bench": "rate", "meta": meta, "config": cfg, "max": [], "probes": []}
    spark = _spark(master)
    warm_partitioners(names)
    w = get_workload("synd-wordcount")
    warm = to_arrow(synd(20_000, z=1.0))
    process_batch(spark, "hash", warm, key_hash(warm, ["word"]), num_blocks, w.query)  # JVM/worker warm-up
    out = out_dir / f"{stem('rate', master)}.json"
    for interval, z in [(i, 1.0) for i in intervals] + [(1.0, z) for z in zs]:
        for n in names:
            print(f"  rate: interval {interval:g} s, z={z:g}, {n} ...", flush=True)
            best, pr = sustainable_rate(spark, n, interval, z, cfg, meta)
            data["max"].append({"interval_s": interval, "z": z, "partitioner": n, "max_rate": best})
            data["probes"] += [{"interval_s": interval, "z": z, "partitioner": n, **p} for p in pr]
            write_json(data, out, finished=False)
    return write_json(data, out)


def bench_blocks(
    workloads: Sequence[str] = ("tpch-q1", "tpch-q3", "debs-routes", "gcm-q1", "gcm-q2"),
    names: Sequence[str] = ("shuffle", "hash", "pk2", "pk5", "cm", "am", "cam", "lm", "prompt"),
    blocks: Sequence[int] = (2, 4, 8),
    rows: int = 400_000,
    repeats: int = 2,
    master: str = "local[2]",
    out_dir: Path = Path("docs/results"),
) -> Path:
    cfg = {"rows": rows, "repeats": repeats, "blocks": list(blocks), "names": list(names)}
    meta = start_meta("partitioning", "bench", "blocks", master=master)
    data: dict[str, Any] = {"bench": "blocks", "meta": meta, "config": cfg, "records": []}
    spark = _spark(master)
    warm_partitioners(names)
    out = out_dir / f"{stem('blocks', master)}.json"
    for wl in workloads:
        w = get_workload(wl)
        table = to_arrow(w.generate(rows, rate=rows / 60.0, seed=5))  # one 60 s window's worth of rows
        keys = key_hash(table, list(w.key_columns))
        process_batch(spark, "hash", table, keys, 2, w.query)  # warm-up
        for p in blocks:
            for n in names:
                res = [process_batch(spark, n, table, keys, p, w.query) for _ in range(repeats)]
                sample_load(meta)
                spark_s = float(np.median([r["spark_s"] for r in res]))
                data["records"].append(
                    {
                        "workload": wl,
                        "blocks": p,
                        "partitioner": n,
                        "spark_s": spark_s,
                        "spark_s_min": min(r["spark_s"] for r in res),
                        "spark_s_max": max(r["spark_s"] for r in res),
                        "rows/s": rows / spark_s,
                        "assign_ms": 1e3 * float(np.median([r["assign_s"] for r in res])),
                        "Gamma/N": res[0]["gamma_ratio"],
                        "BSI": res[0]["bsi"],
                        "load": meta["loads"][-1],
                    }
                )
            print(f"  blocks: {wl} P={p} done", flush=True)
        write_json(data, out, finished=False)
    return write_json(data, out)
