"""DEBS 2015 Grand Challenge taxi rides as a generator workload, with windowed aggregations over them.

Rows are the real rides of the CppStream sample ``debs_frequent_route_compact_ride_10000.csv`` (medallion, trip
distance, pickup and dropoff cell of the 500 m grid, fare, tip; found through ``workloads/data.py``), replayed in
file order from a seed-dependent offset and wrapping around at the end (the sample holds 10,000 rides), so two
queries with different seeds read different stretches. The trace's dropoff times are replaced by the run's clock
with a network delay as in Klink Sec. 6.2 (as the YSB generator does): a ride ingested at ``arrival`` in second
``k`` carries event time ``arrival - d``, ``d`` uniform on ``[0, max_delay]``. The queries' watermark delay equals
``max_delay``, so no ride is late and the streaming result equals the batch oracle.

Queries (DEBS 2015's two queries, with their 30 min / 15 min windows scaled to seconds so that a run of a minute
closes several windows):

* ``DEBS``: frequent routes (query 1): rides and total fare per route (pickup cell -> dropoff cell) in 10 s
  tumbling windows;
* ``DEBSP``: profitable areas (query 2, the median replaced by the mean): rides and mean fare + tip per pickup cell
  in 30 s windows sliding by 10 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from adaptstream.errors import WorkloadError
from adaptstream.workloads.base import GENERATORS, WORKLOADS, DatasetGenerator, Workload
from adaptstream.workloads.data import cppstream_file
from adaptstream.workloads.lmstream_queries import RUN_EPOCH_S

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

SAMPLE = "debs_frequent_route_compact_ride_10000.csv"
SAMPLE_COLUMNS: tuple[str, ...] = ("medallion", "distance", "dropoff_epoch", "pickup_x", "pickup_y", "dropoff_x")
SAMPLE_COLUMNS += ("dropoff_y", "fare", "tip")
COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("medallion", pa.string(), "STRING"),
    ("distance", pa.float64(), "DOUBLE"),
    ("pickup_x", pa.int32(), "INT"),
    ("pickup_y", pa.int32(), "INT"),
    ("dropoff_x", pa.int32(), "INT"),
    ("dropoff_y", pa.int32(), "INT"),
    ("fare", pa.float64(), "DOUBLE"),
    ("tip", pa.float64(), "DOUBLE"),
    ("event_time", pa.int64(), "BIGINT"),  # milliseconds on the run's clock
)
ARROW_SCHEMA = pa.schema([(n, t) for n, t, _ in COLUMNS])
SPARK_DDL = ", ".join(f"{n} {ddl}" for n, _, ddl in COLUMNS)
SENTINEL = "sentinel"


@lru_cache(maxsize=4)
def load_rides(data_dir: str | None = None) -> pa.Table:
    """The sample's rides, typed (the dropoff time column is dropped: the run's clock replaces it)."""
    path = cppstream_file(SAMPLE, data_dir)
    opts = pacsv.ReadOptions(column_names=list(SAMPLE_COLUMNS))
    types = {n: t for n, t, _ in COLUMNS if n != "event_time"}
    table = pacsv.read_csv(path, read_options=opts, convert_options=pacsv.ConvertOptions(column_types=types))
    if table.num_rows == 0:
        msg = f"{path}: no rides"
        raise WorkloadError(msg)
    return table.select([n for n, _, _ in COLUMNS if n != "event_time"]).combine_chunks()


@dataclass(frozen=True)
class DebsGeneratorConfig:
    seed: int = 0
    data_dir: str | None = None  # None: $ADAPTSTREAM_CPPSTREAM_DIR, else the packaged copy
    max_delay: float = 2.0  # seconds of network delay at most; also the queries' watermark delay
    generator_cls: ClassVar[type[DatasetGenerator]]

    def build(self) -> DebsGenerator:
        if self.max_delay < 0:
            msg = f"max_delay must be >= 0 seconds, got {self.max_delay}"
            raise WorkloadError(msg)
        return DebsGenerator(self)


class DebsGenerator(DatasetGenerator):
    """Replays the DEBS 2015 rides on the run's clock with uniform network delays (see the module docstring)."""

    name = "debs_rides"
    arrow_schema = ARROW_SCHEMA
    spark_schema_ddl = SPARK_DDL

    def __init__(self, config: DebsGeneratorConfig) -> None:
        super().__init__(config.seed)
        self.config = config
        self.rides = load_rides(config.data_dir)
        self.offset = (self.seed * 7919) % self.rides.num_rows  # where this seed's replay starts
        self.cursor = 0  # rows emitted so far
        self._newest: dict[int, float] = {}  # dataset -> newest event time (s), for the scheduling controller

    def _state(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def _load_state(self, state: dict[str, Any]) -> None:
        self.cursor = int(state["cursor"])

    def _step(self, second: int, n_rows: int, materialise: bool) -> pa.Table | None:
        start = self.cursor
        self.cursor += n_rows
        if not materialise:
            return None
        idx = (self.offset + start + np.arange(n_rows, dtype=np.int64)) % self.rides.num_rows
        table = self.rides.take(pa.array(idx))
        rng = np.random.default_rng([self.seed, second, 2015])  # not the YSB generator's draws for the same seed
        arrival = second + rng.uniform(0.0, 1.0, n_rows)
        tau = np.maximum(arrival - rng.uniform(0.0, self.config.max_delay, n_rows), 0.0)
        ms = np.floor(tau * 1000).astype(np.int64)
        if n_rows:
            self._newest[second] = float(ms.max()) / 1000.0
            for old in [k for k in self._newest if k < second - 64]:
                del self._newest[old]
        return table.append_column(ARROW_SCHEMA.field("event_time"), pa.array(ms, pa.int64())).combine_chunks()

    def event_stats(self, second: int) -> tuple[float, int, None, None] | None:
        """Newest event time (seconds since the run's start) of dataset ``second``: its progress indicator."""
        newest = self._newest.get(second)
        return None if newest is None else (newest, 1, None, None)

    @classmethod
    def sentinel_table(cls, time_s: int) -> pa.Table:
        row: dict[str, list[Any]] = {n: [0] for n, _, _ in COLUMNS}
        row.update(medallion=[SENTINEL], event_time=[int(time_s) * 1000])
        return pa.table({n: pa.array(row[n], type=t) for n, t, _ in COLUMNS}, schema=ARROW_SCHEMA)


DebsGeneratorConfig.generator_cls = DebsGenerator
GENERATORS.register("debs_rides")(DebsGeneratorConfig)


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)} milliseconds"


@dataclass(frozen=True)
class _DebsWorkload(Workload):
    """Windowed aggregation of the rides: ``groups`` per window, ``aggs`` as (Spark SQL expression, alias)."""

    groups: tuple[str, ...] = ()
    aggs: tuple[tuple[str, str], ...] = ()

    def stream_query(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        wm = df.withColumn("event_ts", F.expr(f"timestamp_millis(event_time + {RUN_EPOCH_S * 1000})")).withWatermark(
            "event_ts", _ms(self.watermark_delay_s)
        )
        # pinned to the event time so the optimizer keeps the sentinel filter above the watermark (docs/workloads.md)
        rides = wm.where(f"CASE WHEN event_ts IS NOT NULL THEN medallion <> '{SENTINEL}' END")
        win: Column = (
            F.window("event_ts", _ms(self.window_s))
            if self.tumbling
            else F.window("event_ts", _ms(self.window_s), _ms(self.slide_s))
        )
        agg = rides.groupBy(win.alias("w"), *self.groups).agg(*(F.expr(e).alias(a) for e, a in self.aggs))
        return agg.select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            *self.groups,
            *(a for _, a in self.aggs),
        )

    def batch_sql(self, view: str) -> str:
        """Windows enumerated with integer arithmetic (no ``window()``), as the LMStream oracles do."""
        size, step = round(self.window_s * 1000), round(self.effective_slide_s * 1000)
        last = f"CAST(floor(t / {step}) * {step} AS BIGINT)"
        starts = f"sequence({last} - {size - step}, {last}, CAST({step} AS BIGINT))"
        groups = ", ".join(self.groups)
        aggs = ", ".join(f"{e} AS {a}" for e, a in self.aggs)
        return f"""
        WITH r AS (SELECT *, event_time + {RUN_EPOCH_S * 1000} AS t FROM {view} WHERE medallion <> '{SENTINEL}'),
        e AS (SELECT * FROM r LATERAL VIEW explode({starts}) w AS ws)
        SELECT timestamp_millis(ws) AS window_start, timestamp_millis(ws + {size}) AS window_end, {groups}, {aggs}
        FROM e GROUP BY ws, {groups}
        """

    def output_columns(self) -> tuple[str, ...]:
        return ("window_start", "window_end", *self.groups, *(a for _, a in self.aggs))

    def event_seconds(self) -> float:
        return 0.001  # event_time is in milliseconds


_DEBS: dict[str, Any] = {
    "generator": "debs_rides",
    "event_time_column": "event_time",
    "watermark_delay_s": 2.0,
}
DEBS = _DebsWorkload(
    name="DEBS",
    window_s=10.0,
    slide_s=10.0,
    key_columns=("pickup_x", "pickup_y", "dropoff_x", "dropoff_y"),
    description="DEBS 2015 frequent routes: rides and fare per route, 10 s tumbling",
    groups=("pickup_x", "pickup_y", "dropoff_x", "dropoff_y"),
    aggs=(("COUNT(1)", "rides"), ("SUM(fare)", "fare")),
    **_DEBS,
)
DEBSP = _DebsWorkload(
    name="DEBSP",
    window_s=30.0,
    slide_s=10.0,
    key_columns=("pickup_x", "pickup_y"),
    description="DEBS 2015 profitable areas: rides and mean fare + tip per pickup cell, 30 s sliding 10 s",
    groups=("pickup_x", "pickup_y"),
    aggs=(("COUNT(1)", "rides"), ("AVG(fare + tip)", "profit")),
    **_DEBS,
)
WORKLOADS.register("DEBS")(DEBS)
WORKLOADS.register("DEBSP")(DEBSP)
