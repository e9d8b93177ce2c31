"""adaptstream: self-tuning micro-batch stream processing on Apache Spark.

Spark does all data processing; adaptstream decides when a micro-batch is cut (admission), which rows go to
which Spark task (partitioning), which query runs next (scheduling), how many tasks run (elasticity) and where
an operator runs (device mapping, placement).
"""

from typing import Any

from adaptstream.errors import AdaptstreamError, ConfigError, UnknownNameError
from adaptstream.tuner import Tuner, tune

__version__ = "0.1.0"


def register(spark: Any) -> None:
    """Make ``spark.readStream.format("adaptstream")`` available in this SparkSession, without tuning. In a
    session a tuner runs (``adaptstream submit``, or ``tune`` called earlier) the tuned source stays registered, so
    an application that calls this runs unmodified under ``adaptstream submit``."""
    from adaptstream.spark.datasource import register as _register
    from adaptstream.tuner import running_tuner

    if running_tuner(spark) is None:
        _register(spark)


def process_all_available(query: Any, timeout: float | None = None) -> None:
    """``query.processAllAvailable()`` that also waits for data adaptstream's policies hold back (Spark's own call
    returns at the first trigger a source reports nothing new); ``DrainTimeout`` after ``timeout`` seconds. Once
    ``register`` or ``tune`` ran, ``processAllAvailable`` itself does this."""
    from adaptstream.spark.drain import process_all_available as _drain

    _drain(query, timeout)


def windowed_aggregate(df: Any, keys: Any, time: str, window: Any, aggs: Any, sink: Any, **options: Any) -> Any:
    """A windowed aggregation of a streaming DataFrame whose reduce stage adaptstream allocates (Prompt's pane
    mode); returns the started ``StreamingQuery``. Options: ``slide``, ``reduce`` (hash, prompt, split),
    ``reduce_buckets``, ``device``, ``watermark``, ``checkpoint``, ``trigger``, ``name``; see docs/windowed.md."""
    from adaptstream.spark.windowed import windowed_aggregate as _windowed

    return _windowed(df, keys, time, window, aggs, sink, **options)


def windowed_stats(checkpoint: str) -> dict[str, int]:
    """Rows aggregated, late and without an event time, and windows emitted, by the windowed aggregation whose
    checkpoint this is."""
    from adaptstream.spark.windowed import windowed_stats as _stats

    return _stats(checkpoint)


__all__ = [
    "AdaptstreamError",
    "ConfigError",
    "Tuner",
    "UnknownNameError",
    "__version__",
    "process_all_available",
    "register",
    "tune",
    "windowed_aggregate",
    "windowed_stats",
]
