"""The Yahoo Streaming Benchmark query (Chintapalli et al. 2016; Klink Sec. 6.1.1) as a generator workload.

Ad events (user, page, ad, ad type, event type view/click/purchase, event time) go through: filter the views,
join each ad with its campaign from a static table, count views per campaign in 10 s tumbling event-time windows.

Network delay (Klink Sec. 6.2): every event is generated at event time ``tau`` and ingested ``d`` seconds later,
``d`` uniform on ``[0, max_delay]`` (generator ``ysb``) or Zipf with constant 0.99 on ``max_delay / 200`` steps
(``ysb_zipf``). Dataset ``k`` holds the events *ingested* during second ``k``, so it carries events generated up to
``max_delay`` earlier, out of order. The watermark delay equals ``max_delay``: no event is ever late, so the
streaming result equals the batch oracle. Each second's events depend only on the seed and the second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from adaptstream.errors import WorkloadError
from adaptstream.workloads.base import GENERATORS, WORKLOADS, DatasetGenerator, Workload
from adaptstream.workloads.lmstream_queries import RUN_EPOCH_S

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

N_ADS = 1000
N_CAMPAIGNS = 100
AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")
SENTINEL = "sentinel"
ARROW_SCHEMA = pa.schema(
    [
        ("user_id", pa.int64()),
        ("page_id", pa.int64()),
        ("ad_id", pa.int32()),
        ("ad_type", pa.string()),
        ("event_type", pa.string()),
        ("event_time", pa.int64()),
    ]
)
SPARK_DDL = "user_id BIGINT, page_id BIGINT, ad_id INT, ad_type STRING, event_type STRING, event_time BIGINT"
ZIPF_STEPS = 200


def campaign_of(ad_id: int) -> int:
    """The static ad -> campaign table (the oracle computes the same mapping in SQL: pmod(ad_id * 7919, 100))."""
    return (ad_id * 7919) % N_CAMPAIGNS


@dataclass(frozen=True)
class YsbGeneratorConfig:
    seed: int = 0
    delay: str = "uniform"  # uniform | zipf
    max_delay: float = 2.0  # seconds; also the queries' watermark delay
    zipf_s: float = 0.99
    generator_cls: ClassVar[type[DatasetGenerator]]

    def build(self) -> YsbGenerator:
        if self.delay not in ("uniform", "zipf") or self.max_delay < 0:
            msg = f"bad YSB generator options: {self}"
            raise WorkloadError(msg)
        return YsbGenerator(self)


@dataclass(frozen=True)
class YsbZipfGeneratorConfig(YsbGeneratorConfig):
    delay: str = "zipf"


class YsbGenerator(DatasetGenerator):
    name = "ysb"
    arrow_schema = ARROW_SCHEMA
    spark_schema_ddl = SPARK_DDL

    def __init__(self, config: YsbGeneratorConfig) -> None:
        super().__init__(config.seed)
        self.config = config
        self.name = "ysb" if config.delay == "uniform" else "ysb_zipf"
        k = np.arange(1, ZIPF_STEPS + 1, dtype=float)
        w = k**-config.zipf_s
        self._zipf_p = w / w.sum()
        self._newest: dict[int, float] = {}  # dataset -> newest event time (s), for the scheduling controller

    def delays(self, rng: np.random.Generator, n: int) -> np.ndarray:
        c = self.config
        if c.delay == "uniform":
            return rng.uniform(0.0, c.max_delay, n)
        return rng.choice(np.arange(1, ZIPF_STEPS + 1), size=n, p=self._zipf_p) * (c.max_delay / ZIPF_STEPS)

    def _step(self, second: int, n_rows: int, materialise: bool) -> pa.Table | None:
        if not materialise:
            return None
        rng = self.rng(second)
        arrival = second + rng.uniform(0.0, 1.0, n_rows)
        tau = np.maximum(arrival - self.delays(rng, n_rows), 0.0)
        ms = np.floor(tau * 1000).astype(np.int64)
        if n_rows:
            self._newest[second] = float(ms.max()) / 1000.0
            for old in [k for k in self._newest if k < second - 64]:
                del self._newest[old]
        return pa.table(
            {
                "user_id": rng.integers(0, 1 << 40, n_rows),
                "page_id": rng.integers(0, 1 << 40, n_rows),
                "ad_id": rng.integers(0, N_ADS, n_rows).astype(np.int32),
                "ad_type": pa.array(np.asarray(AD_TYPES)[rng.integers(0, len(AD_TYPES), n_rows)]),
                "event_type": pa.array(np.asarray(EVENT_TYPES)[rng.choice(3, n_rows, p=[0.7, 0.2, 0.1])]),
                "event_time": ms,
            },
            schema=ARROW_SCHEMA,
        )

    def event_stats(self, second: int) -> tuple[float, int, None, None] | None:
        """Newest event time (seconds since the run's start) of dataset ``second``: its progress indicator."""
        newest = self._newest.get(second)
        return None if newest is None else (newest, 1, None, None)

    def _state(self) -> dict[str, Any]:
        return {}

    def _load_state(self, state: dict[str, Any]) -> None:
        pass

    @classmethod
    def sentinel_table(cls, time_s: int) -> pa.Table:
        return pa.table(
            {
                "user_id": [0],
                "page_id": [0],
                "ad_id": pa.array([0], pa.int32()),
                "ad_type": ["-"],
                "event_type": [SENTINEL],
                "event_time": [int(time_s) * 1000],
            },
            schema=ARROW_SCHEMA,
        )


YsbGeneratorConfig.generator_cls = YsbGenerator
YsbZipfGeneratorConfig.generator_cls = YsbGenerator
GENERATORS.register("ysb")(YsbGeneratorConfig)
GENERATORS.register("ysb_zipf")(YsbZipfGeneratorConfig)


@dataclass(frozen=True)
class YsbWorkload(Workload):
    """Views per campaign in tumbling event-time windows (the YSB query)."""

    def stream_query(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        wm = df.withColumn("event_ts", F.expr(f"timestamp_millis(event_time + {RUN_EPOCH_S * 1000})")).withWatermark(
            "event_ts", f"{round(self.watermark_delay_s * 1000)} milliseconds"
        )
        # pinned to the event time so the optimizer keeps the filter above the watermark (docs/workloads.md)
        views = wm.where("CASE WHEN event_ts IS NOT NULL THEN event_type = 'view' END")
        campaigns = df.sparkSession.createDataFrame(
            [(a, campaign_of(a)) for a in range(N_ADS)], "ad_id INT, campaign_id INT"
        )
        joined = views.join(F.broadcast(campaigns), "ad_id")
        agg = joined.groupBy(
            F.window("event_ts", f"{round(self.window_s * 1000)} milliseconds").alias("w"), "campaign_id"
        ).agg(F.count(F.lit(1)).alias("views"))
        return agg.select(
            F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "campaign_id", "views"
        )

    def batch_sql(self, view: str) -> str:
        size = round(self.window_s * 1000)
        return f"""
        WITH r AS (SELECT ad_id, event_time + {RUN_EPOCH_S * 1000} AS t FROM {view} WHERE event_type = 'view')
        SELECT timestamp_millis(CAST(floor(t / {size}) * {size} AS BIGINT)) AS window_start,
               timestamp_millis(CAST(floor(t / {size}) * {size} + {size} AS BIGINT)) AS window_end,
               CAST(pmod(ad_id * 7919, {N_CAMPAIGNS}) AS INT) AS campaign_id, COUNT(*) AS views
        FROM r GROUP BY 1, 2, 3
        """

    def output_columns(self) -> tuple[str, ...]:
        return ("window_start", "window_end", "campaign_id", "views")

    def event_seconds(self) -> float:
        return 0.001  # event_time is in milliseconds


_YSB: dict[str, Any] = {
    "window_s": 10.0,
    "slide_s": 10.0,
    "key_columns": ("ad_id",),
    "event_time_column": "event_time",
    "watermark_delay_s": 2.0,
}
YSB = YsbWorkload(
    name="YSB", generator="ysb", description="Yahoo Streaming Benchmark, 10 s tumbling, uniform network delay", **_YSB
)
YSBZ = YsbWorkload(
    name="YSBZ",
    generator="ysb_zipf",
    description="Yahoo Streaming Benchmark, 10 s tumbling, Zipf (0.99) network delay",
    **_YSB,
)
WORKLOADS.register("YSB")(YSB)
WORKLOADS.register("YSBZ")(YSBZ)
