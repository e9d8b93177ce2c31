"""The six workloads of LMStream's Table III (LR1S, LR1T, LR2S, CM1S, CM1T, CM2S) as Structured Streaming
queries in output mode append, each with an independent batch Spark SQL oracle (semantics in
docs/workloads.md).

Event time: second ``t`` of the run is ``RUN_EPOCH + t`` with ``RUN_EPOCH`` = 2024-01-01 00:00:00 UTC, i.e.
``timestamp_seconds(CAST(Time AS BIGINT) + 1704067200)`` for Linear Road and
``timestamp_micros(timestamp + 1704067200000000)`` for task_events. The epoch is a whole number of days, so
windows still start at multiples of the slide from the start of the run; it is not 0 because a stream-stream
join drops rows whose event time is <= the initial watermark (0 = 1970-01-01) in the first micro-batch.

The watermark is declared on the event time *before* the sentinel rows are filtered out, so the end-of-stream
sentinel moves the watermark past every open window. The oracles do not call ``window()``: they enumerate the
windows of each row with integer arithmetic (``sequence`` + ``explode``), so a misuse of the streaming window
function would show up as a mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adaptstream.workloads.base import WORKLOADS, Workload

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

RUN_EPOCH_S = 1_704_067_200  # 2024-01-01T00:00:00Z; a multiple of 86400 s
LR_DATA = "Type = 0"  # position reports only; sentinel rows have Type = -1
CM_DATA = "event_type >= 0"  # sentinel rows have event_type = -1


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)} milliseconds"


@dataclass(frozen=True)
class _LMStreamWorkload(Workload):
    event_time_expr: str = ""
    data_predicate: str = ""
    time_unit_per_s: int = 1  # units of the raw time column per second (1 for LR Time, 1e6 for trace micros)

    def _events(self, df: DataFrame, extra_predicate: str | None = None) -> DataFrame:
        """Raw stream -> data rows with ``event_time``; watermark first, then the sentinel filter (and the
        query's own row filter ``extra_predicate``, which must be pinned the same way)."""
        from pyspark.sql import functions as F

        wm = df.withColumn("event_time", F.expr(self.event_time_expr)).withWatermark(
            "event_time", _ms(self.watermark_delay_s)
        )
        # Spark's optimizer pushes filter conjuncts that do not reference the event-time column below
        # EventTimeWatermark (PushPredicateThroughNonJoin), and even into the file scan: a plain `Type = 0`
        # would drop the sentinel before it can move the watermark. Tying it to event_time keeps it above.
        return wm.where(self.pinned_predicate(extra_predicate))

    def pinned_predicate(self, extra_predicate: str | None = None) -> str:
        pred = self.data_predicate
        if extra_predicate:
            pred = f"({pred}) AND ({extra_predicate})"
        return f"CASE WHEN event_time IS NOT NULL THEN ({pred}) END"

    def _window(self):
        from pyspark.sql import functions as F

        if self.tumbling:
            return F.window("event_time", _ms(self.window_s))
        return F.window("event_time", _ms(self.window_s), _ms(self.slide_s))

    @property
    def abs_time_sql(self) -> str:
        """SQL: the raw time column shifted to the run epoch, in raw units (seconds or microseconds)."""
        col = "Time" if self.time_unit_per_s == 1 else "`timestamp`"
        return f"(CAST({col} AS BIGINT) + {RUN_EPOCH_S * self.time_unit_per_s})"

    def _window_starts_sql(self, time_col: str) -> str:
        """SQL array of the start times (raw units since 1970) of every window that contains ``time_col``."""
        size = round(self.window_s * self.time_unit_per_s)
        step = round(self.effective_slide_s * self.time_unit_per_s)
        last = f"CAST(floor({time_col} / {step}) * {step} AS BIGINT)"
        return f"sequence({last} - {size - step}, {last}, CAST({step} AS BIGINT))"


@dataclass(frozen=True)
class SegmentJoinWorkload(_LMStreamWorkload):
    """LR1: each position report joined with the vehicles of the windowed stream A (Table III, LR1)."""

    def stream_query(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        reports = self._events(df)
        # A: one row per (report, window containing it). Only a_ts may carry the event-time marker into the
        # join (Spark allows one per side), so the window is copied into a plain struct.
        a = reports.select(
            F.col("VID").alias("a_vid"), F.col("event_time").alias("a_ts"), self._window().alias("w")
        ).select("a_vid", "a_ts", F.struct(F.col("w.start").alias("start"), F.col("w.end").alias("end")).alias("a_win"))
        lr = reports.select(
            F.col("Time").alias("timestamp"),
            F.col("VID").alias("vehicle"),
            F.col("Spd").alias("speed"),
            F.col("XWay").alias("highway"),
            F.col("Lane").alias("lane"),
            F.col("Dir").alias("direction"),
            F.col("Seg").alias("segment"),
            F.col("event_time").alias("l_ts"),
        )
        bound = _ms(self.window_s)
        cond = F.expr(
            f"a_vid = vehicle AND l_ts >= a_win.start AND l_ts < a_win.end "
            f"AND l_ts >= a_ts - INTERVAL {bound} AND l_ts <= a_ts + INTERVAL {bound}"
        )
        return a.join(lr, cond, "inner").select(
            F.col("a_win.start").alias("window_start"),
            F.col("a_win.end").alias("window_end"),
            "timestamp",
            "vehicle",
            "speed",
            "highway",
            "lane",
            "direction",
            "segment",
        )

    def batch_sql(self, view: str) -> str:
        size = round(self.window_s)
        return f"""
        WITH r AS (SELECT *, {self.abs_time_sql} AS t FROM {view} WHERE {LR_DATA}),
        a AS (SELECT VID AS a_vid, ws FROM r LATERAL VIEW explode({self._window_starts_sql("t")}) w AS ws)
        SELECT timestamp_seconds(a.ws) AS window_start, timestamp_seconds(a.ws + {size}) AS window_end,
               l.Time AS timestamp, l.VID AS vehicle, l.Spd AS speed, l.XWay AS highway, l.Lane AS lane,
               l.Dir AS direction, l.Seg AS segment
        FROM a JOIN r AS l ON a.a_vid = l.VID AND l.t >= a.ws AND l.t < a.ws + {size}
        """

    def output_columns(self) -> tuple[str, ...]:
        return (
            "window_start",
            "window_end",
            "timestamp",
            "vehicle",
            "speed",
            "highway",
            "lane",
            "direction",
            "segment",
        )


@dataclass(frozen=True)
class SegmentSpeedWorkload(_LMStreamWorkload):
    """LR2: average speed per (expressway, direction, segment) and window, kept when below 40 mph."""

    threshold_mph: float = 40.0

    def stream_query(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        agg = (
            self._events(df)
            .groupBy(self._window().alias("w"), "XWay", "Dir", "Seg")
            .agg(F.avg("Spd").alias("avgSpeed"))
        )
        return agg.where(F.col("avgSpeed") < self.threshold_mph).select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            F.col("XWay").alias("highway"),
            F.col("Dir").alias("direction"),
            F.col("Seg").alias("segment"),
            "avgSpeed",
        )

    def batch_sql(self, view: str) -> str:
        size = round(self.window_s)
        return f"""
        WITH r AS (SELECT *, {self.abs_time_sql} AS t FROM {view} WHERE {LR_DATA}),
        e AS (SELECT ws, XWay, Dir, Seg, Spd FROM r
              LATERAL VIEW explode({self._window_starts_sql("t")}) w AS ws)
        SELECT timestamp_seconds(ws) AS window_start, timestamp_seconds(ws + {size}) AS window_end,
               XWay AS highway, Dir AS direction, Seg AS segment, AVG(Spd) AS avgSpeed
        FROM e GROUP BY ws, XWay, Dir, Seg HAVING AVG(Spd) < {self.threshold_mph}
        """

    def output_columns(self) -> tuple[str, ...]:
        return ("window_start", "window_end", "highway", "direction", "segment", "avgSpeed")


@dataclass(frozen=True)
class CategoryCpuWorkload(_LMStreamWorkload):
    """CM1: total requested CPU per scheduling class and window, each micro-batch's output sorted by it."""

    def stream_query(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        agg = (
            self._events(df)
            .groupBy(self._window().alias("w"), "scheduling_class")
            .agg(F.sum("cpu_request").alias("totalCpu"))
        )
        return agg.select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            F.col("scheduling_class").alias("category"),
            "totalCpu",
        )

    def finalize_batch(self, df: DataFrame) -> DataFrame:
        # ORDER BY SUM(cpu): Structured Streaming cannot sort in append mode, so each micro-batch is sorted
        return df.orderBy("totalCpu", "window_start", "category")

    def batch_sql(self, view: str) -> str:
        size = round(self.window_s * self.time_unit_per_s)
        return f"""
        WITH r AS (SELECT *, {self.abs_time_sql} AS t FROM {view} WHERE {CM_DATA}),
        e AS (SELECT ws, scheduling_class, cpu_request FROM r
              LATERAL VIEW explode({self._window_starts_sql("t")}) w AS ws)
        SELECT timestamp_micros(ws) AS window_start, timestamp_micros(ws + {size}) AS window_end,
               scheduling_class AS category, SUM(cpu_request) AS totalCpu
        FROM e GROUP BY ws, scheduling_class ORDER BY totalCpu, window_start, category
        """

    def output_columns(self) -> tuple[str, ...]:
        return ("window_start", "window_end", "category", "totalCpu")


@dataclass(frozen=True)
class JobCpuWorkload(_LMStreamWorkload):
    """CM2: average requested CPU of SCHEDULE events (event type 1) per job and window."""

    event_type: int = 1

    def stream_query(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        agg = (
            self._events(df, f"event_type = {self.event_type}")
            .groupBy(self._window().alias("w"), "job_id")
            .agg(F.avg("cpu_request").alias("avgCpu"))
        )
        return agg.select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            F.col("job_id").alias("jobId"),
            "avgCpu",
        )

    def batch_sql(self, view: str) -> str:
        size = round(self.window_s * self.time_unit_per_s)
        return f"""
        WITH r AS (SELECT *, {self.abs_time_sql} AS t FROM {view}
                   WHERE {CM_DATA} AND event_type = {self.event_type}),
        e AS (SELECT ws, job_id, cpu_request FROM r
              LATERAL VIEW explode({self._window_starts_sql("t")}) w AS ws)
        SELECT timestamp_micros(ws) AS window_start, timestamp_micros(ws + {size}) AS window_end,
               job_id AS jobId, AVG(cpu_request) AS avgCpu
        FROM e GROUP BY ws, job_id
        """

    def output_columns(self) -> tuple[str, ...]:
        return ("window_start", "window_end", "jobId", "avgCpu")


_LR: dict[str, Any] = {
    "generator": "linear_road",
    "event_time_column": "Time",
    "event_time_expr": f"timestamp_seconds(CAST(Time AS BIGINT) + {RUN_EPOCH_S})",
    "data_predicate": LR_DATA,
    "time_unit_per_s": 1,
}
_CM: dict[str, Any] = {
    "generator": "task_events",
    "event_time_column": "timestamp",
    "event_time_expr": f"timestamp_micros(`timestamp` + {RUN_EPOCH_S * 1_000_000})",
    "data_predicate": CM_DATA,
    "time_unit_per_s": 1_000_000,
}

LR1S = SegmentJoinWorkload(
    name="LR1S",
    window_s=30.0,
    slide_s=5.0,
    key_columns=("VID",),
    description="Table III LR1, sliding 30 s / 5 s: reports x windowed vehicles",
    **_LR,
)
LR1T = SegmentJoinWorkload(
    name="LR1T", window_s=30.0, slide_s=30.0, key_columns=("VID",), description="Table III LR1, tumbling 30 s", **_LR
)
LR2S = SegmentSpeedWorkload(
    name="LR2S",
    window_s=30.0,
    slide_s=10.0,
    key_columns=("XWay", "Dir", "Seg"),
    description="Table III LR2, sliding 30 s / 10 s: slow segments",
    **_LR,
)
CM1S = CategoryCpuWorkload(
    name="CM1S",
    window_s=60.0,
    slide_s=10.0,
    key_columns=("scheduling_class",),
    description="Table III CM1, sliding 60 s / 10 s: CPU per scheduling class",
    **_CM,
)
CM1T = CategoryCpuWorkload(
    name="CM1T",
    window_s=60.0,
    slide_s=60.0,
    key_columns=("scheduling_class",),
    description="Table III CM1, tumbling 60 s",
    **_CM,
)
CM2S = JobCpuWorkload(
    name="CM2S",
    window_s=60.0,
    slide_s=5.0,
    key_columns=("job_id",),
    description="Table III CM2, sliding 60 s / 5 s: mean CPU of scheduled tasks per job",
    **_CM,
)

for _w in (LR1S, LR1T, LR2S, CM1S, CM1T, CM2S):
    WORKLOADS.register(_w.name)(_w)
