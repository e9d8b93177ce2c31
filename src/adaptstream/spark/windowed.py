"""``adaptstream.windowed_aggregate``: a windowed aggregation of the user's own stream in the pane mode.

Why: Spark's own streaming aggregation hash-partitions its state into shuffle partitions frozen into the
checkpoint, so the reduce stage can neither be balanced per batch (Prompt's Alg. 3, hot-key splitting) nor resized
by the application's elasticity policy. This module turns the user's parameters into a :class:`PaneSpec` and runs
:class:`PaneExecutor` (spark/pane.py) as the query's ``foreachBatch``: per-(pane, key) partial aggregates, reduce
buckets chosen by the allocator, each window written once when the watermark passes its end.

End of a finite input: under ``trigger={"availableNow": True}`` an adaptstream source marks the offset of its last
batch (``availableNowEnd``), and a source with ``drain`` the offset of the batch that reads its end-of-input entry
(``inputEnd``); the batch whose offsets (the checkpoint's ``offsets/<batch id>``, written by Spark before the batch
runs) carry such a mark for every adaptstream source emits every window, and the query stops (Spark stops an
``availableNow`` query; :class:`StopAtInputEnd` a drained one once that batch committed).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

from adaptstream.errors import ConfigError
from adaptstream.spark.pane import PaneExecutor, PaneHooks, PaneSpec, read_batch_meta
from adaptstream.timeparse import parse_duration

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

#: aggregates computed from per-pane partials (sum and count; min and max), so a key may be split over buckets
AGGREGATES = ("avg", "count", "sum", "min", "max")
DEVICES = ("cpu", "auto", "gpu")
_NUMERIC = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType")
_UNHASHABLE = ("ArrayType", "MapType", "StructType", "VariantType")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_TRIGGERS = ("processingTime", "availableNow")
STATE_DIR = "adaptstream"  # the pane state's folder inside the query's checkpoint


def _listed(names: str | Sequence[str], what: str) -> tuple[str, ...]:
    out = (names,) if isinstance(names, str) else tuple(names)
    if not out or not all(isinstance(n, str) for n in out):
        msg = f"{what} must be a column name or a non-empty list of column names, got {names!r}"
        raise ConfigError(msg)
    return out


def _micros(text: str | float, what: str) -> int:
    try:
        return round(parse_duration(text) * 1_000_000)
    except ConfigError as e:
        msg = f"{what}: {e}"
        raise ConfigError(msg) from None


@dataclass(frozen=True)
class WindowedConfig:
    """The user's windowed aggregation, checked against the stream's schema by :meth:`spec`."""

    keys: tuple[str, ...]
    time: str
    window_us: int
    slide_us: int
    watermark_us: int
    aggs: tuple[tuple[str, tuple[str, ...]], ...]  # (column, functions) in the order given

    @classmethod
    def of(
        cls,
        keys: str | Sequence[str],
        time: str,
        window: str | float,
        slide: str | float | None,
        aggs: Mapping[str, str | Sequence[str]],
        watermark: str | float,
    ) -> WindowedConfig:
        w = _micros(window, "window")
        s = w if slide is None else _micros(slide, "slide")
        if w <= 0 or s <= 0:
            msg = f"window and slide must be positive durations, got window={window!r} slide={slide!r}"
            raise ConfigError(msg)
        if s > w or w % s:
            msg = f"window ({window}) must be a multiple of slide ({slide}): a window is a whole number of panes"
            raise ConfigError(msg)
        if not isinstance(aggs, Mapping) or not aggs:
            msg = f"aggs must map a column to its aggregates, e.g. {{'v': ['avg', 'count']}}; got {aggs!r}"
            raise ConfigError(msg)
        listed = tuple((c, tuple(f.lower() for f in _listed(fs, f"aggs[{c!r}]"))) for c, fs in aggs.items())
        for col, fns in listed:
            bad = [f for f in fns if f not in AGGREGATES]
            if bad:
                msg = (
                    f"aggregate(s) {bad} of column {col!r} cannot be computed from partial aggregates per pane "
                    f"(they are not decomposable); valid: {', '.join(AGGREGATES)}"
                )
                raise ConfigError(msg)
        return cls(_listed(keys, "keys"), time, w, s, _micros(watermark, "watermark"), listed)

    def output_columns(self) -> list[str]:
        return ["window_start", "window_end", *self.keys, *[f"{c}_{f}" for c, fns in self.aggs for f in fns]]

    def _check_names(self, schema: StructType) -> dict[str, str]:
        types = {f.name: type(f.dataType).__name__ for f in schema.fields}
        used = [*self.keys, self.time, *(c for c, _ in self.aggs)]
        missing = [c for c in used if c not in types]
        if missing:
            msg = f"column(s) {missing} not in the stream; its columns: {sorted(types)}"
            raise ConfigError(msg)
        odd = [c for c in used if not _NAME.match(c)]
        if odd:
            msg = f"column name(s) {odd} are not plain identifiers (letters, digits, _): rename them first"
            raise ConfigError(msg)
        outs = self.output_columns()
        clash = sorted({c for c in outs if outs.count(c) > 1})
        if clash:
            msg = f"output column(s) {clash} would appear twice: rename the key or value columns"
            raise ConfigError(msg)
        return types

    def spec(self, schema: StructType, name: str = "windowed") -> PaneSpec:
        """The pane form of this aggregation over ``schema``; a ConfigError for what the pane mode cannot do."""
        types = self._check_names(schema)
        if types[self.time] != "TimestampType":
            msg = f"time column {self.time!r} is {types[self.time]}, not TIMESTAMP (convert it with to_timestamp)"
            raise ConfigError(msg)
        bad_keys = [k for k in self.keys if types[k] in _UNHASHABLE]
        if bad_keys:
            msg = f"key column(s) {bad_keys} are arrays, maps or structs; group by plain columns"
            raise ConfigError(msg)
        bad_values = [f"{c} ({types[c]})" for c, _ in self.aggs if types[c] not in _NUMERIC]
        if bad_values:
            msg = f"aggregated column(s) {bad_values} are not numeric (byte, short, int, long, float, double)"
            raise ConfigError(msg)
        return PaneSpec(
            name=name,
            time_sql=f"unix_micros(`{self.time}`)",
            data_sql="true",
            ts_fn="timestamp_micros",
            window=self.window_us,
            slide=self.slide_us,
            delay=self.watermark_us,
            groups=self.keys,
            out_groups=self.keys,
            values=tuple(c for c, _ in self.aggs),
            extrema=tuple(c for c, fns in self.aggs if "min" in fns or "max" in fns),
            finals=tuple((f"{c}_{f}", _final_sql(c, f)) for c, fns in self.aggs for f in fns),
        )


def _final_sql(col: str, fn: str) -> str:
    return {
        "sum": f"s_{col}",
        "count": f"n_{col}",
        "avg": f"CASE WHEN n_{col} > 0 THEN CAST(s_{col} AS DOUBLE) / n_{col} END",
        "min": f"lo_{col}",
        "max": f"hi_{col}",
    }[fn]


def check_device(device: str) -> str:
    """The device the pane operators run on, and why; the operators inside Spark tasks run on the CPU only."""
    if device not in DEVICES:
        msg = f"unknown device {device!r}; valid: {', '.join(DEVICES)}"
        raise ConfigError(msg)
    if device == "gpu":
        msg = (
            "device='gpu': the pane operators do not run on a GPU inside Spark tasks yet (MapDevice runs outside "
            "Spark only, in `adaptstream bench mapdevice`); use device='cpu' or 'auto'"
        )
        raise ConfigError(msg)
    return "cpu"


def check_trigger(trigger: Mapping[str, Any] | None) -> dict[str, Any]:
    if trigger is None:
        return {}
    if not isinstance(trigger, Mapping) or len(trigger) != 1:
        msg = f"trigger takes one keyword of DataStreamWriter.trigger, e.g. {{'availableNow': True}}; got {trigger!r}"
        raise ConfigError(msg)
    key = next(iter(trigger))
    if key == "once":
        msg = "trigger once is deprecated in Spark; use {'availableNow': True}: it emits every window at the end"
        raise ConfigError(msg)
    if key not in _TRIGGERS:
        msg = f"trigger {key!r} is not supported here (foreachBatch); valid: {', '.join(_TRIGGERS)}"
        raise ConfigError(msg)
    return dict(trigger)


def ends_input(checkpoint: str, batch_id: int) -> bool:
    """Whether batch ``batch_id`` reads the last data of every adaptstream source: under ``availableNow``, or of a
    source whose ``drain`` sealed its input (the batch that reads the end-of-input entry)."""
    try:
        with open(os.path.join(checkpoint, "offsets", str(batch_id)), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    return last_offsets(lines[2:])


def last_offsets(offsets: Sequence[Any]) -> bool:
    """Whether these end offsets (JSON strings or dicts, one per source) end the input of every adaptstream source
    among them (other sources' offsets are ignored; none of ours: False)."""
    from adaptstream.spark.drain import _doc

    ours = [d for d in (_doc(x) for x in offsets) if "state" in d]
    return bool(ours) and all(d.get("availableNowEnd") is True or d.get("inputEnd") is True for d in ours)


class StopAtInputEnd(StreamingQueryListener):
    """Stops a windowed query once the batch that read a drained input's end has committed. Spark stops an
    ``availableNow`` query itself; a source whose ``drain`` sealed its input only stops offering data. The stop runs
    in a thread of its own (a listener must not block Spark's listener bus), and the listener removes itself when
    its query terminates, deleting the query's temporary checkpoint (none given) if it ended without an error, as
    Spark does with its own."""

    def __init__(self, spark: Any, temp_checkpoint: str | None = None) -> None:
        self._session = spark
        self._temp_checkpoint = temp_checkpoint
        self.query: StreamingQuery | None = None
        self._ended: set[str] = set()  # ids of queries whose input ended (before attach, too)
        self._lock = threading.Lock()
        self._stopping = False

    def attach(self, query: StreamingQuery) -> None:
        with self._lock:
            self.query = query
            ended = str(query.id) in self._ended
        if ended:
            self._stop()

    def onQueryStarted(self, event: Any) -> None:
        return None

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        if not last_offsets([s.endOffset for s in (p.sources or ())]):
            return
        with self._lock:
            self._ended.add(str(p.id))
            ours = self.query is not None and str(self.query.id) == str(p.id)
        if ours:
            self._stop()

    def onQueryIdle(self, event: Any) -> None:
        return None

    def onQueryTerminated(self, event: Any) -> None:
        with self._lock:
            ours = self.query is not None and str(self.query.id) == str(event.id)
        if not ours:
            return
        if self._temp_checkpoint and not getattr(event, "exception", None):
            shutil.rmtree(self._temp_checkpoint, ignore_errors=True)  # small and local: no need to leave the bus
        threading.Thread(target=self._remove, daemon=True, name="adaptstream-windowed-listener").start()

    def _stop(self) -> None:
        with self._lock:
            if self._stopping or self.query is None:
                return
            self._stopping = True
            query = self.query
        threading.Thread(target=query.stop, daemon=True, name="adaptstream-windowed-drain").start()

    def _remove(self) -> None:
        with contextlib.suppress(Exception):  # a stopped session has nothing to remove from
            self._session.streams.removeListener(self)


def _sink_hook(sink: Callable[..., Any]) -> Callable[[DataFrame, int], None]:
    try:
        arity = len(inspect.signature(sink).parameters)
    except (TypeError, ValueError):
        arity = 1
    if arity >= 2:
        return lambda df, batch_id: sink(df, batch_id)
    return lambda df, _batch_id: sink(df)


def _buckets_hook(spark: Any, reduce_buckets: int | None) -> tuple[int, Callable[[], int] | None]:
    """Fixed buckets when given; else the application tuner's elasticity plan, else spark.sql.shuffle.partitions."""
    from adaptstream.tuner import running_tuner

    if reduce_buckets is not None:
        if isinstance(reduce_buckets, bool) or not isinstance(reduce_buckets, int) or reduce_buckets < 1:
            msg = f"reduce_buckets must be a positive integer, got {reduce_buckets!r}"
            raise ConfigError(msg)
        return reduce_buckets, None
    tuner = running_tuner(spark)
    if tuner is not None and tuner.elasticity is not None:
        policy = tuner.elasticity
        return int(policy.plan.reduce_buckets), lambda: int(policy.plan.reduce_buckets)
    return int(spark.conf.get("spark.sql.shuffle.partitions")), None


def windowed_aggregate(
    df: DataFrame,
    keys: str | Sequence[str],
    time: str,
    window: str | float,
    aggs: Mapping[str, str | Sequence[str]],
    sink: str | Callable[..., Any],
    slide: str | float | None = None,
    reduce: str = "hash",
    reduce_buckets: int | None = None,
    device: str = "cpu",
    watermark: str | float = "0 seconds",
    checkpoint: str | None = None,
    trigger: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> StreamingQuery:
    """Start a query that writes each closed window of ``df`` grouped by ``keys`` once to ``sink``.

    ``sink`` is a Parquet directory (one folder ``batch_id=N`` per micro-batch that closed windows) or a function
    called with each batch's closed windows as a DataFrame (and the batch id, if it takes two arguments; a replayed
    batch calls it again with the same id and rows). Columns: ``window_start``, ``window_end``, the keys, then
    ``<column>_<function>`` per aggregate. ``reduce`` names the reduce allocator (``hash``, ``prompt``,
    ``split``); rows older than the watermark are counted as late (:func:`windowed_stats`)."""
    if not getattr(df, "isStreaming", False):
        msg = "windowed_aggregate needs a streaming DataFrame (spark.readStream.format('adaptstream')...load())"
        raise ConfigError(msg)
    config = WindowedConfig.of(keys, time, window, slide, aggs, watermark)
    trig = check_trigger(trigger)
    ck = os.path.abspath(checkpoint) if checkpoint else tempfile.mkdtemp(prefix="adaptstream-windowed-")
    temp_checkpoint = None if checkpoint else ck
    try:
        executor = _executor(df, config.spec(df.schema, name or "windowed"), sink, reduce, reduce_buckets, device, ck)
        return _start(df, executor, ck, trig, name, temp_checkpoint)
    except BaseException:
        if temp_checkpoint:  # nothing ran on it: a refused argument or a failed start leaves no directory behind
            shutil.rmtree(temp_checkpoint, ignore_errors=True)
        raise


def _start(
    df: DataFrame, executor: PaneExecutor, ck: str, trig: dict[str, Any], name: str | None, temp_checkpoint: str | None
) -> StreamingQuery:
    writer = df.writeStream.foreachBatch(executor).option("checkpointLocation", ck)
    if name:
        writer = writer.queryName(name)
    if trig:
        writer = writer.trigger(**trig)
    spark: Any = df.sparkSession
    stopper = StopAtInputEnd(spark, temp_checkpoint)
    spark.streams.addListener(stopper)
    try:
        query = writer.start()
    except BaseException:
        spark.streams.removeListener(stopper)
        raise
    stopper.attach(query)
    return query


def _executor(
    df: DataFrame,
    spec: PaneSpec,
    sink: str | Callable[..., Any],
    reduce: str,
    reduce_buckets: int | None,
    device: str,
    ck: str,
) -> PaneExecutor:
    from adaptstream.allocation import ALLOCATORS

    ALLOCATORS.get(reduce)
    check_device(device)
    if not (isinstance(sink, str) and sink) and not callable(sink):
        msg = f"sink must be a Parquet directory path or a function of a DataFrame, got {sink!r}"
        raise ConfigError(msg)
    buckets, follow = _buckets_hook(df.sparkSession, reduce_buckets)
    state = os.path.join(ck, STATE_DIR)
    hooks = PaneHooks(
        sink=_sink_hook(sink) if callable(sink) else None,
        final=lambda b: ends_input(ck, b),
        buckets=follow,
    )
    results = os.path.abspath(sink) if isinstance(sink, str) else os.path.join(state, "results")
    metrics = os.path.join(state, "metrics")
    return PaneExecutor(None, reduce, buckets, state, results, metrics, spec=spec, hooks=hooks)


def windowed_stats(checkpoint: str) -> dict[str, int]:
    """Totals over the batches a windowed aggregation committed so far (replays counted once): batches, rows
    aggregated, late rows (older than the watermark, not aggregated), rows without an event time (not aggregated)
    and windows emitted."""
    meta_dir = os.path.join(os.path.abspath(checkpoint), STATE_DIR, "meta")
    out = {"batches": 0, "rows": 0, "late": 0, "untimed": 0, "windows": 0}
    for name in sorted(os.listdir(meta_dir)) if os.path.isdir(meta_dir) else ():
        if not (name.endswith(".json") and name[:-5].isdigit()):
            continue
        meta = read_batch_meta(meta_dir, int(name[:-5]))
        if meta is None:  # removed since the listing
            continue
        out["batches"] += 1
        for k in ("rows", "late", "untimed", "windows"):
            out[k] += int(meta.get(k) or 0)
    return out
