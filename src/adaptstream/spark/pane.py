"""Pane execution mode: every micro-batch of a windowed aggregation is one Spark job whose map tasks are the
source's input blocks and whose reduce stage is partitioned by a reduce allocator (Prompt Sec. 5, Alg. 3).

Why: Structured Streaming's stateful aggregation hash-partitions its state into a number of shuffle partitions
frozen into the checkpoint, so neither the reduce allocation nor the reduce parallelism can change per batch. Here
the raw stream goes to ``foreachBatch`` and each batch is processed as a plain batch job:

1. reference table: a light pass over the batch's blocks (one summary row per block: its distinct cluster-key
   hashes, its largest event time) tells which clusters are split over several blocks;
2. map stage (one task per input block): data rows get their pane (the slide-aligned interval of their event
   time) and cluster key (pane, group columns); the allocator assigns the block's clusters to R reduce buckets and
   each row carries a column whose Spark hash lands exactly in its bucket, so ``repartition(R, column)`` (Spark's
   own exchange) routes it there;
3. reduce stage (R tasks): per-(pane, key) partial aggregates (sum, count), written as Parquet per batch id under
   the pane directory (kept by Spark on disk, never in driver memory);
4. windows whose end the watermark (largest event time so far minus the workload's delay) passed during this
   batch are combined from their panes' partial aggregates by a Spark SQL job and written per batch id.

Exactly-once: everything a batch writes is keyed by its batch id and overwritten when Spark replays the batch after
a crash (the same offsets, hence the same rows); the watermark a batch starts from is read from the previous
batch's small metadata file, so a replay decides the same windows. Rows older than that watermark are dropped as
late, as Spark's stateful operators drop them, and counted in the metadata.
Elasticity (``elastic``, Prompt Alg. 4): after each batch the policy sees W = batch time / batch interval, rows and
keys, and its plan sets the next batch's reduce buckets and, with an :class:`ExecutorControl` on a cluster, the
executors. The map tasks it plans are recorded but not applied: the source's block count is fixed when the query
starts. Its state is saved per batch id beside the panes, so a replayed batch is not counted twice.
Measurement: per-task input records and durations of every reduce stage come from Spark's status store
(:mod:`adaptstream.spark.taskmetrics`) and go to ``panes.jsonl`` in the metrics directory.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from adaptstream.errors import ConfigError, StateFileError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from adaptstream.elasticity import ElasticityPolicy
    from adaptstream.spark.executors import ExecutorControl
    from adaptstream.workloads.base import Workload


@dataclass(frozen=True)
class PaneSpec:
    """A windowed aggregation as panes: raw-unit time, data rows, groups and decomposable aggregates."""

    name: str
    time_sql: str  # event time in raw units (seconds or microseconds since 1970) over the raw columns
    data_sql: str  # which rows are data (the rest, e.g. the end-of-input sentinel, only move the watermark)
    ts_fn: str  # timestamp_seconds | timestamp_micros: raw units -> TIMESTAMP
    window: int  # raw units
    slide: int
    delay: int
    groups: tuple[str, ...]
    out_groups: tuple[str, ...]
    values: tuple[str, ...]  # each gets a partial sum s_<v> and count n_<v>
    finals: tuple[tuple[str, str], ...]  # (output column, SQL over the combined s_<v>, n_<v>, lo_<v>, hi_<v>)
    having: str | None = None
    extrema: tuple[str, ...] = ()  # values that also get a partial minimum lo_<v> and maximum hi_<v>


def pane_spec(workload: Workload) -> PaneSpec:
    """The pane form of an aggregation workload; a clear error for a workload without a reduce stage to shape."""
    from adaptstream.workloads.lmstream_queries import CategoryCpuWorkload, JobCpuWorkload, SegmentSpeedWorkload

    if not isinstance(workload, SegmentSpeedWorkload | CategoryCpuWorkload | JobCpuWorkload):
        msg = f"--reduce needs a windowed aggregation workload; {workload.name} is not one (valid: {PANE_WORKLOADS})"
        raise ConfigError(msg)
    unit = workload.time_unit_per_s
    common: dict[str, Any] = {
        "name": workload.name,
        "time_sql": workload.abs_time_sql,
        "ts_fn": "timestamp_seconds" if unit == 1 else "timestamp_micros",
        "window": round(workload.window_s * unit),
        "slide": round(workload.effective_slide_s * unit),
        "delay": round(workload.watermark_delay_s * unit),
    }
    if isinstance(workload, SegmentSpeedWorkload):
        return PaneSpec(
            data_sql=workload.data_predicate,
            groups=("XWay", "Dir", "Seg"),
            out_groups=("highway", "direction", "segment"),
            values=("Spd",),
            finals=(("avgSpeed", "CAST(s_Spd AS DOUBLE) / n_Spd"),),
            having=f"avgSpeed < {workload.threshold_mph}",
            **common,
        )
    if isinstance(workload, CategoryCpuWorkload):
        return PaneSpec(
            data_sql=workload.data_predicate,
            groups=("scheduling_class",),
            out_groups=("category",),
            values=("cpu_request",),
            finals=(("totalCpu", "s_cpu_request"),),
            **common,
        )
    return PaneSpec(
        data_sql=f"({workload.data_predicate}) AND event_type = {workload.event_type}",
        groups=("job_id",),
        out_groups=("jobId",),
        values=("cpu_request",),
        finals=(("avgCpu", "CASE WHEN n_cpu_request > 0 THEN s_cpu_request / n_cpu_request END"),),
        **common,
    )


PANE_WORKLOADS = "LR2S, CM1S, CM1T, CM2S"


# ------------------------------------------------------------------------------------------ executor side
def _table(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=schema)


def _data_rows(tbl: pa.Table, spec: PaneSpec, wm_prev: int | None) -> tuple[pa.Table, int]:
    """Data rows not older than the watermark the batch started from, with their pane; and the late count."""
    t = tbl.column("_t")
    data = pc.fill_null(pc.and_(tbl.column("_data"), pc.is_valid(t)), False)
    late = 0
    if wm_prev is not None:
        on_time = pc.fill_null(pc.greater_equal(t, wm_prev), False)
        late = int(pc.sum(pc.and_(data, pc.invert(on_time))).as_py() or 0)
        data = pc.and_(data, on_time)
    rows = tbl.filter(data)
    t = rows.column("_t").to_numpy(zero_copy_only=False).astype(np.int64)
    pane = (np.floor_divide(t, spec.slide) * spec.slide).astype(np.int64)
    return rows.append_column("_pane", pa.array(pane, pa.int64())), late


def _cluster_keys(rows: pa.Table, spec: PaneSpec) -> np.ndarray:
    from adaptstream.partitioning.base import key_hash

    if rows.num_rows == 0:
        return np.zeros(0, np.int64)
    return key_hash(rows, ["_pane", *spec.groups])


def _task_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.partitionId()) if ctx is not None else 0


def summarize_blocks(batches, schema: pa.Schema, spec: PaneSpec, wm_prev: int | None):
    """One row per block: its index, largest event time (all rows), data rows, late rows, data rows without an
    event time, distinct cluster keys."""
    tbl = _table(batches, schema)
    rows, late = _data_rows(tbl, spec, wm_prev)
    _, _, untimed, max_t, max_pane, _ = _tally_block(tbl, rows, late)
    keys = np.unique(_cluster_keys(rows, spec))
    yield pa.RecordBatch.from_pydict(
        {
            "block": [_task_id()],
            "max_t": [max_t],
            "rows": [rows.num_rows],
            "late": [late],
            "untimed": [untimed],
            "keys": [keys.tobytes()],
            "max_pane": [max_pane],
        },
        schema=SUMMARY_ARROW,
    )


SUMMARY_ARROW = pa.schema(
    [
        ("block", pa.int32()),
        ("max_t", pa.int64()),
        ("rows", pa.int64()),
        ("late", pa.int64()),
        ("untimed", pa.int64()),
        ("keys", pa.binary()),
        ("max_pane", pa.int64()),
    ]
)
SUMMARY_DDL = "block INT, max_t BIGINT, rows BIGINT, late BIGINT, untimed BIGINT, keys BINARY, max_pane BIGINT"


class Tally:
    """A batch's statistics gathered by its map and reduce tasks (a Spark accumulator), for allocators that need
    no reference table: rows, late, untimed, largest event time, largest pane, partial rows written. A map stage
    Spark recomputes after a lost shuffle file adds its counts again (the maxima, which decide the windows, are
    unaffected)."""

    @staticmethod
    def zero(_value: Any = None) -> tuple:
        return (0, 0, 0, None, None, 0)

    @staticmethod
    def addInPlace(a: tuple, b: tuple) -> tuple:
        def hi(x: Any, y: Any) -> Any:
            return y if x is None else x if y is None else max(x, y)

        return (a[0] + b[0], a[1] + b[1], a[2] + b[2], hi(a[3], b[3]), hi(a[4], b[4]), a[5] + b[5])


def _tally_block(tbl: pa.Table, rows: pa.Table, late: int) -> tuple:
    untimed = int(pc.sum(pc.and_(pc.fill_null(tbl.column("_data"), False), pc.is_null(tbl.column("_t")))).as_py() or 0)
    max_t = pc.max(tbl.column("_t")).as_py() if tbl.num_rows else None
    max_pane = int(pc.max(rows.column("_pane")).as_py()) if rows.num_rows else None
    return (rows.num_rows, late, untimed, max_t, max_pane, 0)


def map_side(
    batches,
    schema: pa.Schema,
    out_schema: pa.Schema,
    spec: PaneSpec,
    wm_prev: int | None,
    allocator: str,
    buckets: int,
    tasks: int,
    split_bc: Any,
    route: tuple[int, ...],
    seconds: Any,
    tally: Any = None,
):
    """Map task: cluster keys of this block -> reduce bucket (the allocator sees this block only)."""
    from adaptstream.allocation import build_allocator

    tbl = _table(batches, schema)
    rows, late = _data_rows(tbl, spec, wm_prev)
    if tally is not None:
        tally.add(_tally_block(tbl, rows, late))
    if rows.num_rows == 0:
        return
    keys = _cluster_keys(rows, spec)
    split = np.frombuffer(split_bc.value, dtype=np.int64)
    t0 = time.perf_counter()
    bucket = build_allocator(allocator).assign_rows(keys, split, buckets, _task_id(), tasks)
    seconds.add(time.perf_counter() - t0)
    pk = np.asarray(route, np.int64)[bucket]
    out = rows.append_column("_pk", pa.array(pk, pa.int64())).select(out_schema.names)
    yield from out.cast(out_schema).to_batches()


def reduce_side(batches, schema: pa.Schema, out_schema: pa.Schema, spec: PaneSpec, tally: Any = None):
    """Reduce task: partial aggregates per (pane, key) of the clusters routed to this bucket."""
    tbl = _table(batches, schema)
    if tbl.num_rows == 0:
        return
    aggs = [(v, f) for v in spec.values for f in ("sum", "count")] + [
        (v, f) for v in spec.extrema for f in ("min", "max")
    ]
    res = tbl.group_by(["_pane", *spec.groups], use_threads=False).aggregate(aggs)
    names = {f"{v}_{f}": f"{PARTIAL_PREFIX[f]}_{v}" for v, f in aggs}
    res = res.rename_columns([names.get(c, c) for c in res.column_names]).select(out_schema.names)
    if tally is not None:
        tally.add((0, 0, 0, None, None, res.num_rows))
    yield from res.cast(out_schema).to_batches()


#: partial aggregate per (pane, key) -> its column prefix, and how the emit job combines partials of one window
PARTIAL_PREFIX = {"sum": "s", "count": "n", "min": "lo", "max": "hi"}
COMBINE = {"s": "SUM", "n": "SUM", "lo": "MIN", "hi": "MAX"}


def partial_columns(spec: PaneSpec) -> list[str]:
    """The partial-aggregate columns a reduce task writes, in order."""
    return [f"{p}_{v}" for v in spec.values for p in ("s", "n")] + [
        f"{p}_{v}" for v in spec.extrema for p in ("lo", "hi")
    ]


# ------------------------------------------------------------------------------------------ driver side
_ROUTES: dict[int, tuple[int, ...]] = {}


def bucket_route(spark: SparkSession, buckets: int) -> tuple[int, ...]:
    """route[b] = a BIGINT whose Spark hash puts it in partition b of ``repartition(buckets, col)``
    (Murmur3 seed 42, pmod: the same expression as Spark's HashPartitioning), found once per bucket count."""
    if buckets not in _ROUTES:
        rows = (
            spark.range(0, 256 * buckets)
            .selectExpr("id", f"pmod(hash(id), {buckets}) AS b")
            .groupBy("b")
            .agg({"id": "min"})
            .collect()
        )
        found = {int(r[0]): int(r[1]) for r in rows}
        if len(found) != buckets:
            msg = f"no routing value found for every one of {buckets} reduce buckets"
            raise ConfigError(msg)
        _ROUTES[buckets] = tuple(found[b] for b in range(buckets))
    return _ROUTES[buckets]


def elastic_snapshot(path: str, batch_id: int) -> dict | None:
    """The elasticity state to resume batch ``batch_id`` from (``elasticity.json``), or None: none saved, or saved
    for another batch. The file holds no data positions, so a damaged one never stops the query: it is moved to
    ``elasticity.json.bad`` with one warning and the policy starts fresh (the contract of the source's
    policies.json)."""
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        after = saved["after"]
        if after == batch_id - 1:
            return dict(saved["state"])
        return dict(saved["prev"]) if after == batch_id else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        with contextlib.suppress(OSError):
            os.replace(path, path + ".bad")
        warnings.warn(f"{path} is damaged ({e}); moved to {path}.bad, elasticity starts fresh", stacklevel=2)
        return None


STATE_FIX = "Restore the pane state from a backup, or start the query from a new checkpoint (and pane state)."
_META_KEYS = ("batch", "max_t_through", "wm", "max_pane")


def read_batch_meta(meta_dir: str, batch_id: int) -> dict | None:
    """One batch's metadata (watermark, largest event time, counts), None when that batch never ran. Damage stops
    the query with the file named (:class:`StateFileError`): the watermark decides which windows are emitted."""
    path = os.path.join(meta_dir, f"{batch_id}.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or any(k not in doc for k in _META_KEYS):
            raise ValueError(f"not a batch record (needs {', '.join(_META_KEYS)})")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        msg = f"pane state {path} is damaged ({e}): it holds the watermark of batch {batch_id}. {STATE_FIX}"
        raise StateFileError(msg) from None
    return doc


def _write_json_atomic(path: str, doc: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True)
class Seen:
    """What a batch held, from the reference pass or from the map and reduce tasks' :class:`Tally`. ``keys``:
    distinct (pane, key) clusters; from a tally, partial rows written, which counts a split cluster once per bucket
    it reached. ``split_keys``: clusters several blocks hold (None without a reference pass)."""

    rows: int
    late: int
    untimed: int
    keys: int
    split_keys: int | None
    blocks: int
    max_t: int | None
    max_pane: int | None
    reference_s: float
    split: np.ndarray


@dataclass(frozen=True)
class PaneHooks:
    """How a user's windowed aggregation (spark/windowed.py) differs from a built-in workload's.

    ``sink(df, batch_id)`` receives each batch's closed windows instead of the Parquet results directory;
    ``final(batch_id)`` says the batch ends a finite input (every window is then emitted, whatever the watermark);
    ``buckets()`` gives the reduce buckets of the next batch (the application tuner's elasticity plan)."""

    sink: Callable[[DataFrame, int], None] | None = None
    final: Callable[[int], bool] | None = None
    buckets: Callable[[], int] | None = None


def stage_schemas(spec: Any, in_arrow: pa.Schema) -> tuple[pa.Schema, pa.Schema]:
    """Arrow schemas of the map side's output (bucket key, pane, group and value columns) and of the reduce side's
    partials (per value a sum and a count; per extremum column a low and a high)."""
    types = {f.name: f.type for f in in_arrow}
    groups = [(g, types[g]) for g in spec.groups]
    map_out = pa.schema([("_pk", pa.int64()), ("_pane", pa.int64()), *groups, *[(v, types[v]) for v in spec.values]])
    sums = [
        (f"{p}_{v}", pa.int64() if p == "n" or pa.types.is_integer(types[v]) else pa.float64())
        for v in spec.values
        for p in ("s", "n")
    ]
    extrema = [(f"{p}_{v}", types[v]) for v in spec.extrema for p in ("lo", "hi")]
    return map_out, pa.schema([("_pane", pa.int64()), *groups, *sums, *extrema])


class PaneExecutor:
    """The ``foreachBatch`` function of a pane-mode query (see the module docstring)."""

    def __init__(
        self,
        workload: Workload | None,
        allocator: str,
        buckets: int,
        state_dir: str,
        results_dir: str,
        metrics_path: str | None = None,
        on_batch: Callable[[dict], None] | None = None,
        spec: PaneSpec | None = None,
        elastic: ElasticityPolicy | None = None,
        executors: ExecutorControl | None = None,
        batch_interval: float = 1.0,
        blocks_file: str | None = None,
        hooks: PaneHooks | None = None,
    ) -> None:
        from adaptstream.allocation import ALLOCATORS

        ALLOCATORS.get(allocator)
        if buckets < 1:
            msg = f"reduce buckets must be >= 1, got {buckets}"
            raise ConfigError(msg)
        if spec is None and workload is None:
            msg = "PaneExecutor needs a workload or a PaneSpec"
            raise ConfigError(msg)
        self.workload = workload
        self.spec = spec if spec is not None else pane_spec(workload)  # type: ignore[arg-type]
        self.allocator = allocator
        self.buckets = int(buckets)
        self.state_dir = os.path.abspath(state_dir)
        self.panes_dir = os.path.join(self.state_dir, "panes")
        self.meta_dir = os.path.join(self.state_dir, "meta")
        self.results_dir = os.path.abspath(results_dir)
        self.metrics_path = metrics_path
        self.on_batch = on_batch
        self.elastic = elastic
        self.executor_control = executors
        self.batch_interval = float(batch_interval)
        # the source's blocksFile: Alg. 4's map tasks reach the next batch's input partitions through it
        self.blocks_file = os.path.abspath(blocks_file) if blocks_file else None
        self.hooks = hooks or PaneHooks()
        os.makedirs(self.panes_dir, exist_ok=True)
        os.makedirs(self.meta_dir, exist_ok=True)
        if elastic is not None:
            self.buckets = elastic.plan.reduce_buckets
            if self.blocks_file and not os.path.exists(self.blocks_file):  # a restart keeps the last decision
                self._apply_map_tasks(elastic.plan.map_tasks, None)

    def _apply_map_tasks(self, map_tasks: int, after_batch: int | None) -> None:
        if self.blocks_file:
            from adaptstream.spark.planner import write_block_count

            write_block_count(self.blocks_file, map_tasks, after_batch)

    # -- state of earlier batches
    def _meta(self, batch_id: int) -> dict | None:
        return read_batch_meta(self.meta_dir, batch_id)

    def _previous_meta(self, batch_id: int) -> dict | None:
        """The metadata of the batch before ``batch_id``; its absence where earlier batches left theirs is damage
        (metadata is never deleted), and guessing the watermark could emit a window twice."""
        if batch_id <= 0:
            return None
        prev = self._meta(batch_id - 1)
        if prev is None and any(
            n.endswith(".json") and n[:-5].isdigit() and int(n[:-5]) < batch_id - 1 for n in os.listdir(self.meta_dir)
        ):
            path = os.path.join(self.meta_dir, f"{batch_id - 1}.json")
            msg = (
                f"pane state {path} is missing although earlier batches left theirs: it holds the watermark batch "
                f"{batch_id} starts from. {STATE_FIX}"
            )
            raise StateFileError(msg)
        return prev

    def _watermark(self, max_t: int | None, floor: int | None = None) -> int | None:
        """Largest event time so far minus the delay, never below the watermark an earlier batch ended with (a
        finite input's last batch moves it past every window)."""
        wm = None if max_t is None else max_t - self.spec.delay
        return max((x for x in (wm, floor) if x is not None), default=None)

    def _end_watermark(self, batch_id: int, max_t: int | None, wm_prev: int | None) -> int | None:
        wm = self._watermark(max_t, wm_prev)
        if max_t is not None and self.hooks.final is not None and self.hooks.final(batch_id):
            last_end = max_t // self.spec.slide * self.spec.slide + self.spec.window  # the last window's end
            return max(last_end, wm if wm is not None else last_end)
        return wm

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.process(df, int(batch_id))

    def process(self, df: DataFrame, batch_id: int) -> dict:
        from pyspark.sql.pandas.types import to_arrow_schema

        from adaptstream.allocation import build_allocator
        from adaptstream.spark.taskmetrics import reduce_stage_tasks

        spark, sc, spec = df.sparkSession, df.sparkSession.sparkContext, self.spec
        spark.conf.set("spark.sql.adaptive.enabled", "false")  # AQE would coalesce the reduce buckets
        t_start, wall_start = time.perf_counter(), time.time()
        self._restore_elastic(batch_id)
        if self.hooks.buckets is not None:
            self.buckets = max(1, int(self.hooks.buckets()))
        prev = self._previous_meta(batch_id)
        max_t_before = prev["max_t_through"] if prev else None
        wm_prev = self._watermark(max_t_before, prev.get("wm") if prev else None)
        reference = build_allocator(self.allocator).uses_reference
        proj = df.selectExpr(
            f"{spec.time_sql} AS _t",
            f"CASE WHEN ({spec.data_sql}) THEN true ELSE false END AS _data",
            *spec.groups,
            *spec.values,
        )
        proj = proj.persist() if reference else proj  # the reference pass reads the batch a second time
        try:
            in_arrow = to_arrow_schema(proj.schema, timezone="UTC")
            group = f"adaptstream-pane-{spec.name}-{batch_id}"
            sc.setJobGroup(group, f"pane batch {batch_id}", False)
            seen, job = self._map_and_shuffle(proj, in_arrow, wm_prev, batch_id, reference)
            stats = self._close_batch(spark, batch_id, seen, job, max_t_before, wm_prev)
            stats["started"] = wall_start  # wall clock (epoch s): timelines against Spark's executor add/remove
            self._collect_garbage(wm_prev, batch_id)
            stats["batch_s"] = time.perf_counter() - t_start
            if "job_s" in stats:
                stats["reduce_tasks"] = reduce_stage_tasks(
                    sc, sc.statusTracker().getJobIdsForGroup(group), self.buckets
                )
        finally:
            sc.setJobGroup(None, None, False)  # type: ignore[arg-type]
            if reference:
                proj.unpersist()
        if self.elastic is not None:
            stats["elastic"] = self._scale(stats, batch_id)
        stats["ended"] = time.time()
        if self.metrics_path:
            os.makedirs(self.metrics_path, exist_ok=True)
            with open(os.path.join(self.metrics_path, "panes.jsonl"), "a") as f:
                f.write(json.dumps(stats) + "\n")
        if self.on_batch is not None:
            self.on_batch(stats)
        return stats

    def _map_and_shuffle(
        self, proj: DataFrame, in_arrow: pa.Schema, wm_prev: int | None, batch_id: int, reference: bool
    ) -> tuple[Seen, dict]:
        """The batch's map and reduce stages: with a reference pass first when the allocator needs one (Alg. 3),
        else the map tasks count keys as they go (no second pass)."""
        if reference:
            seen = self._reference(proj, in_arrow, wm_prev)
            job = self._shuffle(proj, in_arrow, wm_prev, seen.split, seen.blocks, batch_id) if seen.rows else {}
            return seen, job
        blocks = proj.rdd.getNumPartitions()
        job = self._shuffle(proj, in_arrow, wm_prev, np.zeros(0, np.int64), blocks, batch_id, tally=True)
        return job.pop("seen"), job

    def _close_batch(
        self, spark: Any, batch_id: int, seen: Seen, job: dict, max_t_before: int | None, wm_prev: int | None
    ) -> dict:
        """Emit the windows the batch closed and record its metadata (what a replay and the next batch read)."""
        max_t = max((x for x in (max_t_before, seen.max_t) if x is not None), default=None)
        stats = {
            "batch": batch_id,
            "rows": seen.rows,
            "late": seen.late,
            "untimed": seen.untimed,
            "keys": seen.keys,
            "split_keys": seen.split_keys,
            "map_tasks": seen.blocks,
            "reduce_buckets": self.buckets,
            "allocator": self.allocator,
            "reference_s": seen.reference_s,
            **job,
        }
        t_win = time.perf_counter()
        wm_now = self._end_watermark(batch_id, max_t, wm_prev)
        stats["windows"] = self._emit(spark, batch_id, wm_prev, wm_now)
        stats["emit_s"] = time.perf_counter() - t_win
        stats["watermark"] = wm_now
        meta = {
            "batch": batch_id,
            "max_t_through": max_t,
            "wm": wm_now,
            "max_pane": seen.max_pane,
            **{k: stats[k] for k in ("rows", "late", "untimed", "windows")},
        }
        _write_json_atomic(os.path.join(self.meta_dir, f"{batch_id}.json"), meta)
        return stats

    def _reference(self, proj: DataFrame, in_arrow: pa.Schema, wm_prev: int | None) -> Seen:
        """The reference pass (Prompt Sec. 5): one summary row per block; which clusters several blocks hold."""
        t0 = time.perf_counter()
        summary = proj.mapInArrow(
            functools.partial(summarize_blocks, schema=in_arrow, spec=self.spec, wm_prev=wm_prev), SUMMARY_DDL
        ).collect()
        key_sets = [np.frombuffer(r["keys"], np.int64) for r in summary]
        all_keys, counts = (
            np.unique(np.concatenate(key_sets), return_counts=True)
            if key_sets
            else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        )
        split = all_keys[counts > 1]
        return Seen(
            rows=sum(int(r["rows"]) for r in summary),
            late=sum(int(r["late"]) for r in summary),
            untimed=sum(int(r["untimed"]) for r in summary),
            keys=len(all_keys),
            split_keys=len(split),
            blocks=len(summary),
            max_t=max((r["max_t"] for r in summary if r["max_t"] is not None), default=None),
            max_pane=max((r["max_pane"] for r in summary if r["max_pane"] is not None), default=None),
            reference_s=time.perf_counter() - t0,
            split=split,
        )

    # -- elasticity (Prompt Alg. 4): the next batch's reduce buckets and executors
    def _elastic_path(self) -> str:
        return os.path.join(self.state_dir, "elasticity.json")

    def _restore_elastic(self, batch_id: int) -> None:
        """The policy as it was before this batch (a replayed batch must not be counted twice)."""
        if self.elastic is None:
            return
        state = elastic_snapshot(self._elastic_path(), batch_id)
        if state is None:
            return
        try:
            self.elastic.load_state_dict(state)
        except (ConfigError, KeyError, TypeError, ValueError) as e:  # a damaged snapshot: start fresh, say so
            warnings.warn(f"{self._elastic_path()}: the elasticity snapshot does not load ({e}); fresh", stacklevel=2)
            return
        self.buckets = self.elastic.plan.reduce_buckets

    def _scale(self, stats: dict, batch_id: int) -> dict:
        from adaptstream.elasticity import BatchStats

        assert self.elastic is not None
        before = self.elastic.state_dict()
        plan = self.elastic.on_batch(BatchStats(stats["batch_s"], self.batch_interval, stats["rows"], stats["keys"]))
        _write_json_atomic(
            self._elastic_path(), {"after": batch_id, "state": self.elastic.state_dict(), "prev": before}
        )
        self.buckets = plan.reduce_buckets
        self._apply_map_tasks(plan.map_tasks, batch_id)
        out = {
            "load": stats["batch_s"] / self.batch_interval,
            "map_tasks": plan.map_tasks,
            "reduce_buckets": plan.reduce_buckets,
            "executors": plan.executors,
        }
        if self.executor_control is not None:
            out["live_executors"] = len(self.executor_control.executors())
            out.update(self.executor_control.scale_to(plan.executors))
        return out

    def _shuffle(
        self,
        proj: DataFrame,
        in_arrow: pa.Schema,
        wm_prev: int | None,
        split: np.ndarray,
        blocks: int,
        batch_id: int,
        tally: bool = False,
    ) -> dict:
        from pyspark.sql.pandas.types import from_arrow_schema

        spark, sc, spec = proj.sparkSession, proj.sparkSession.sparkContext, self.spec
        map_out, red_out = stage_schemas(spec, in_arrow)
        split_bc = sc.broadcast(split.astype(np.int64).tobytes())
        seconds = sc.accumulator(0.0)
        acc = sc.accumulator(Tally.zero(), Tally()) if tally else None  # type: ignore[arg-type]
        try:
            mapped = proj.mapInArrow(
                functools.partial(
                    map_side,
                    schema=in_arrow,
                    out_schema=map_out,
                    spec=spec,
                    wm_prev=wm_prev,
                    allocator=self.allocator,
                    buckets=self.buckets,
                    tasks=blocks,
                    split_bc=split_bc,
                    route=bucket_route(spark, self.buckets),
                    seconds=seconds,
                    tally=acc,
                ),
                from_arrow_schema(map_out),
            )
            reduced = mapped.repartition(self.buckets, "_pk").mapInArrow(
                functools.partial(reduce_side, schema=map_out, out_schema=red_out, spec=spec, tally=acc),
                from_arrow_schema(red_out),
            )
            t0 = time.perf_counter()
            reduced.write.mode("overwrite").parquet(self._pane_path(batch_id))
            out: dict[str, Any] = {"job_s": time.perf_counter() - t0, "allocator_s": float(seconds.value)}
            if acc is not None:
                rows, late, untimed, max_t, max_pane, partials = acc.value
                out["seen"] = Seen(rows, late, untimed, partials, None, blocks, max_t, max_pane, 0.0, split)
            return out
        finally:
            split_bc.unpersist()

    def _pane_path(self, batch_id: int) -> str:
        return os.path.join(self.panes_dir, f"batch_id={batch_id}")

    def _emit(self, spark: SparkSession, batch_id: int, wm_prev: int | None, wm_now: int | None) -> int:
        """Windows whose end lies in (wm_prev, wm_now], from their panes' partial aggregates; returns how many."""
        spec = self.spec
        out_path = os.path.join(self.results_dir, f"batch_id={batch_id}")
        live = [
            d
            for d in sorted(os.listdir(self.panes_dir))
            if d.startswith("batch_id=")
            and int(d.split("=")[1]) <= batch_id
            and os.path.exists(os.path.join(self.panes_dir, d, "_SUCCESS"))
        ]
        if wm_now is None or (wm_prev is not None and wm_now <= wm_prev) or not live:
            return 0
        panes = spark.read.parquet(*[os.path.join(self.panes_dir, d) for d in live])
        lo = "" if wm_prev is None else f"AND e > {wm_prev}"
        partials = ", ".join(f"{COMBINE[c.split('_', 1)[0]]}({c}) AS {c}" for c in partial_columns(spec))
        groups = ", ".join(spec.groups)
        view = f"adaptstream_panes_{spec.name.lower()}_{batch_id}"
        panes.createOrReplaceTempView(view)
        combined = spark.sql(
            f"SELECT e - {spec.window} AS ws, e AS we, {groups}, {partials} FROM {view} "
            f"LATERAL VIEW explode(sequence(_pane + {spec.slide}, _pane + {spec.window}, CAST({spec.slide} AS BIGINT)))"
            f" x AS e WHERE e <= {wm_now} {lo} GROUP BY e, {groups}"
        )
        out = combined.selectExpr(
            f"{spec.ts_fn}(ws) AS window_start",
            f"{spec.ts_fn}(we) AS window_end",
            *[f"{g} AS {o}" for g, o in zip(spec.groups, spec.out_groups, strict=True)],
            *[f"{sql} AS {name}" for name, sql in spec.finals],
        )
        if spec.having:
            out = out.where(spec.having)
        out = (self.workload.finalize_batch(out) if self.workload is not None else out).persist()
        try:
            n = out.count()
            if n and self.hooks.sink is not None:
                self.hooks.sink(out, batch_id)
            elif n:
                out.write.mode("overwrite").parquet(out_path)
            elif os.path.exists(out_path):
                shutil.rmtree(out_path)
        finally:
            out.unpersist()
            spark.catalog.dropTempView(view)
        return n

    def _collect_garbage(self, wm_prev: int | None, batch_id: int) -> None:
        """Drop the panes of batches whose every window closed before this batch began (replay-safe: it uses the
        watermark this batch started from, which a replay of the batch starts from too)."""
        if wm_prev is None:
            return
        for d in os.listdir(self.panes_dir):
            if not d.startswith("batch_id="):
                continue
            old = int(d.split("=")[1])
            meta = self._meta(old)
            if (
                old < batch_id
                and meta is not None
                and (meta["max_pane"] is None or meta["max_pane"] + self.spec.window <= wm_prev)
            ):
                shutil.rmtree(os.path.join(self.panes_dir, d), ignore_errors=True)


def read_results(spark: SparkSession, results_dir: str) -> list[tuple]:
    """Every window result a pane-mode query wrote (all batch ids)."""
    if not os.path.isdir(results_dir) or not any(d.startswith("batch_id=") for d in os.listdir(results_dir)):
        return []
    df = spark.read.parquet(results_dir).drop("batch_id")
    return [tuple(r) for r in df.collect()]
