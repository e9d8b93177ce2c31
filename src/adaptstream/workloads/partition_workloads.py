"""Workloads of the partitioning papers: real-data readers, generators for scale, Spark queries, SQL oracles.

- SynD (Prompt Sec. 7.1): Zipf keys, z in {0.1, 0.5, 1.0, 1.5, 2.0}, up to 1e6 distinct keys; 30 s
  sliding-window word count and top-k.
- TPC-H (holistic Sec. 5.2): lineitem stream; Q1-like groups by (returnflag, linestatus) = 4 groups;
  Q3-like groups by orderkey = many groups.
- DEBS 2015 (holistic Sec. 5.2): frequent routes = count per (pickup cell, dropoff cell) in a 30 min window.
- GCM (holistic Sec. 5.2): Q1 total CPU requested per scheduling class over a 60 s window; Q2 average CPU
  requested per job id.

Real rows come from the CppStream samples (10k rows each, MIT; `workloads/data.py` says where they are found).
The generators resample those rows (bootstrap of the real columns) and stamp arrival times at a given rate, so
benchmarks can run at any scale; generated orderkeys / job ids are fresh so group counts grow with the stream
(Q3, GCM Q2). Each query is a DataFrame transformation that works on streaming DataFrames too
(groupBy(window(ts, ...), key)); `oracle_sql` is the batch SQL the tests compare against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from adaptstream.errors import WorkloadError
from adaptstream.workloads.data import cppstream_file

T0 = pd.Timestamp("2024-01-01T00:00:00", tz="UTC")
ZIPF_EXPONENTS = (0.1, 0.5, 1.0, 1.5, 2.0)

LINEITEM_COLS = [
    "orderkey",
    "partkey",
    "suppkey",
    "linenumber",
    "quantity",
    "extendedprice",
    "discount",
    "tax",
    "returnflag",
    "linestatus",
    "shipdate",
    "commitdate",
    "receiptdate",
    "shipinstruct",
    "shipmode",
    "comment",
]
RIDE_COLS = [
    "medallion",
    "distance",
    "dropoff_epoch",
    "pickup_x",
    "pickup_y",
    "dropoff_x",
    "dropoff_y",
    "fare",
    "tip",
]
TASK_EVENT_COLS = [
    "timestamp",
    "missing_info",
    "job_id",
    "task_index",
    "machine_id",
    "event_type",
    "user",
    "scheduling_class",
    "priority",
    "cpu_request",
    "memory_request",
    "disk_request",
    "different_machine",
]


def _path(name: str) -> Path:
    return cppstream_file(name)


# ----------------------------------------------------------------------------------------- readers
@lru_cache(maxsize=1)
def read_lineitem() -> pd.DataFrame:
    df = pd.read_csv(_path("lineitem_10000.tbl"), sep="|", header=None, usecols=range(16), names=LINEITEM_COLS)
    return df


@lru_cache(maxsize=1)
def read_rides() -> pd.DataFrame:
    return pd.read_csv(_path("debs_frequent_route_compact_ride_10000.csv"), header=None, names=RIDE_COLS)


@lru_cache(maxsize=1)
def read_task_events() -> pd.DataFrame:
    parts = [pd.read_csv(_path(f"task_event_{i}_10000.csv"), header=None, names=TASK_EVENT_COLS) for i in (1, 2)]
    df = pd.concat(parts, ignore_index=True)
    df["cpu_request"] = df["cpu_request"].fillna(0.0)
    return df


# ----------------------------------------------------------------------------------------- generators
def arrival_times(n: int, rate: float, start: pd.Timestamp = T0) -> pd.Series:
    """Event time of row i = start + i / rate (tuples arrive in timestamp order, Prompt Sec. 2.1)."""
    if rate <= 0:
        msg = f"rate must be > 0 rows/s, got {rate}"
        raise WorkloadError(msg)
    micros = (np.arange(n, dtype=np.float64) / rate * 1e6).astype(np.int64)
    return pd.Series(start + pd.to_timedelta(micros, unit="us"), name="ts")


def zipf_keys(n: int, z: float, num_keys: int, seed: int = 0) -> np.ndarray:
    """n keys in [0, num_keys) with P(rank i) proportional to 1 / (i+1)**z (finite-support Zipf)."""
    if num_keys < 1 or n < 0:
        msg = f"need num_keys >= 1 and n >= 0, got {num_keys}, {n}"
        raise WorkloadError(msg)
    w = 1.0 / np.power(np.arange(1, num_keys + 1, dtype=np.float64), z)
    cdf = np.cumsum(w)
    u = np.random.default_rng(seed).random(n) * cdf[-1]
    return np.minimum(np.searchsorted(cdf, u, side="right"), num_keys - 1).astype(np.int64)


def synd(n: int, z: float = 1.0, num_keys: int = 100_000, rate: float = 100_000.0, seed: int = 0) -> pd.DataFrame:
    """SynD rows: ts, word (int key), one."""
    return pd.DataFrame({"ts": arrival_times(n, rate), "word": zipf_keys(n, z, num_keys, seed)})


def _resample(df: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    idx = np.random.default_rng(seed).integers(0, len(df), n)
    return df.iloc[idx].reset_index(drop=True)


def lineitem(n: int | None = None, rate: float = 100_000.0, seed: int = 0) -> pd.DataFrame:
    """lineitem rows (real 10k rows when n is None or <= 10k, else bootstrap with fresh orderkeys)."""
    real = read_lineitem()
    if n is None or n <= len(real):
        df = real.head(n if n is not None else len(real)).copy()
    else:
        df = _resample(real, n, seed)
        lines = np.random.default_rng(seed + 1).integers(1, 8, n // 2 + 2)  # 1-7 lines/order as TPC-H
        df["orderkey"] = np.repeat(np.arange(1, len(lines) + 1), lines)[:n]
    cols = ["orderkey", "quantity", "extendedprice", "discount", "tax", "returnflag", "linestatus"]
    out = df[cols].reset_index(drop=True)
    out.insert(0, "ts", arrival_times(len(out), rate))
    return out


def rides(n: int | None = None, rate: float = 100_000.0, seed: int = 0) -> pd.DataFrame:
    """DEBS 2015 rides with a `route` key column "px.py>dx.dy"; real rows or a bootstrap."""
    real = read_rides()
    df = real.copy() if n is None or n <= len(real) else _resample(real, n, seed)
    if n is not None:
        df = df.head(n)
    df = df.reset_index(drop=True)
    route = (
        df["pickup_x"].astype(str)
        + "."
        + df["pickup_y"].astype(str)
        + ">"
        + df["dropoff_x"].astype(str)
        + "."
        + df["dropoff_y"].astype(str)
    )
    out = pd.DataFrame(
        {
            "ts": arrival_times(len(df), rate),
            "route": route,
            "medallion": df["medallion"],
            "fare": df["fare"],
            "distance": df["distance"],
        }
    )
    return out


def task_events(n: int | None = None, rate: float = 100_000.0, seed: int = 0) -> pd.DataFrame:
    """Google cluster task_events: scheduling_class, job_id, cpu_request; real rows or a bootstrap whose
    job ids are spread over n/20 fresh ids (the real sample has few jobs; the paper's trace has 600k+)."""
    real = read_task_events()
    df = real.copy() if n is None or n <= len(real) else _resample(real, n, seed)
    if n is not None:
        df = df.head(n)
    df = df.reset_index(drop=True)
    if n is not None and n > len(real):
        rng = np.random.default_rng(seed + 2)
        df["job_id"] = df["job_id"].astype(np.int64) * 1000 + rng.integers(0, max(1, n // 20 // 100), len(df))
    out = pd.DataFrame(
        {
            "ts": arrival_times(len(df), rate),
            "scheduling_class": df["scheduling_class"].astype(np.int64),
            "job_id": df["job_id"].astype(np.int64),
            "cpu_request": df["cpu_request"].astype(float),
        }
    )
    return out


# ----------------------------------------------------------------------------------------- queries
@dataclass(frozen=True)
class PartitionWorkload:
    """One query of the partitioning papers over one stream."""

    name: str
    description: str
    key_columns: tuple[str, ...]
    generate: Callable[..., pd.DataFrame]
    group_columns: tuple[str, ...]
    aggs: tuple[tuple[str, str, str], ...]  # (function, column, alias)
    window: str
    slide: str

    def query(self, df: Any) -> Any:
        """Spark DataFrame transformation (streaming-capable): groupBy(window(ts), keys).agg(...)."""
        from pyspark.sql import functions as F

        exprs = [getattr(F, fn)(col if col != "*" else F.lit(1)).alias(alias) for fn, col, alias in self.aggs]
        grouped = df.groupBy(F.window("ts", self.window, self.slide).alias("window"), *self.group_columns)
        return grouped.agg(*exprs)

    def oracle_sql(self, view: str) -> str:
        """Batch SQL computing the same result over a temp view."""
        aggs = ", ".join(f"{fn}({'1' if col == '*' else col}) AS {alias}" for fn, col, alias in self.aggs)
        keys = ", ".join(self.group_columns)
        return (
            f"SELECT window(ts, '{self.window}', '{self.slide}') AS window, {keys}, {aggs} FROM {view} "
            f"GROUP BY window(ts, '{self.window}', '{self.slide}'), {keys}"
        )


def top_k(counts_df: Any, k: int, count_col: str = "count") -> Any:
    """Top-k keys per window (batch DataFrame, or inside foreachBatch for streams: Spark streaming cannot
    rank in append mode)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("window").orderBy(F.col(count_col).desc())
    return counts_df.withColumn("rank", F.row_number().over(w)).where(F.col("rank") <= k)


def _synd_gen(n: int, rate: float = 100_000.0, seed: int = 0, z: float = 1.0, num_keys: int = 100_000) -> pd.DataFrame:
    return synd(n, z=z, num_keys=num_keys, rate=rate, seed=seed)


WORKLOADS: dict[str, PartitionWorkload] = {
    w.name: w
    for w in [
        PartitionWorkload(
            "synd-wordcount",
            "SynD Zipf word count, 30 s window sliding 10 s (Prompt Sec. 7.1)",
            ("word",),
            _synd_gen,
            ("word",),
            (("count", "*", "count"),),
            "30 seconds",
            "10 seconds",
        ),
        PartitionWorkload(
            "tpch-q1",
            "lineitem sum(quantity), sum(extendedprice), count per (returnflag, "
            "linestatus): 4 groups (holistic Sec. 5.2)",
            ("returnflag", "linestatus"),
            lineitem,
            ("returnflag", "linestatus"),
            (
                ("sum", "quantity", "sum_qty"),
                ("sum", "extendedprice", "sum_price"),
                ("count", "*", "count_order"),
            ),
            "60 seconds",
            "60 seconds",
        ),
        PartitionWorkload(
            "tpch-q3",
            "lineitem revenue per orderkey: many groups (holistic Sec. 5.2)",
            ("orderkey",),
            lineitem,
            ("orderkey",),
            (("sum", "extendedprice", "revenue"), ("count", "*", "lines")),
            "60 seconds",
            "60 seconds",
        ),
        PartitionWorkload(
            "debs-routes",
            "DEBS 2015 frequent routes: rides per route, 30 min window sliding 1 min (holistic Sec. 5.2)",
            ("route",),
            rides,
            ("route",),
            (("count", "*", "rides"),),
            "30 minutes",
            "1 minute",
        ),
        PartitionWorkload(
            "gcm-q1",
            "GCM Q1: total CPU requested per scheduling class, 60 s window (holistic Sec. 5.2)",
            ("scheduling_class",),
            task_events,
            ("scheduling_class",),
            (("sum", "cpu_request", "cpu"),),
            "60 seconds",
            "10 seconds",
        ),
        PartitionWorkload(
            "gcm-q2",
            "GCM Q2: average CPU requested per job id (holistic Sec. 5.2)",
            ("job_id",),
            task_events,
            ("job_id",),
            (("avg", "cpu_request", "avg_cpu"),),
            "60 seconds",
            "60 seconds",
        ),
    ]
}


def get_workload(name: str) -> PartitionWorkload:
    if name not in WORKLOADS:
        msg = f"unknown partitioning workload {name!r}; valid choices: {', '.join(sorted(WORKLOADS))}"
        raise WorkloadError(msg)
    return WORKLOADS[name]


def to_arrow(df: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(df, preserve_index=False)
