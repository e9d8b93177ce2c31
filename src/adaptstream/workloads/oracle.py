"""Check a workload's streaming result against its batch SQL oracle over the same input files.

The stream runs in output mode append with foreachBatch (each micro-batch passes through the workload's
``finalize_batch`` and is collected on the driver); the batch oracle reads the same directory as one static
DataFrame. Results are compared as multisets: rows are sorted, integers/strings/timestamps must be equal,
doubles equal within a tolerance.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from adaptstream.errors import WorkloadError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from adaptstream.workloads.base import Workload


@dataclass
class OracleResult:
    stream_batches: list[list[tuple[Any, ...]]] = field(default_factory=list)  # per micro-batch (incl. empty)
    batch_rows: list[tuple[Any, ...]] = field(default_factory=list)
    columns: tuple[str, ...] = ()

    @property
    def stream_rows(self) -> list[tuple[Any, ...]]:
        return [r for b in self.stream_batches for r in b]

    @property
    def nonempty_batches(self) -> int:
        return sum(1 for b in self.stream_batches if b)


def read_static(spark: SparkSession, workload: Workload, input_dir: str, fmt: str = "csv") -> DataFrame:
    ddl = workload.generator_class().spark_schema_ddl
    reader = spark.read.schema(ddl)
    return reader.json(str(input_dir)) if fmt == "json" else reader.csv(str(input_dir))


def file_stream_factory(
    spark: SparkSession, workload: Workload, input_dir: str, fmt: str = "csv", max_files_per_trigger: int = 1
) -> Callable[[], DataFrame]:
    """Spark's built-in file source over ``input_dir`` (files in modification-time order, a few per batch)."""
    ddl = workload.generator_class().spark_schema_ddl

    def factory() -> DataFrame:
        reader = spark.readStream.schema(ddl).option("maxFilesPerTrigger", max_files_per_trigger)
        return reader.json(str(input_dir)) if fmt == "json" else reader.csv(str(input_dir))

    return factory


def run_stream(
    spark: SparkSession,
    workload: Workload,
    stream_df_factory: Callable[[], DataFrame],
    checkpoint_dir: str | None = None,
) -> tuple[list[list[tuple]], tuple]:
    """Run the workload's streaming query to the end of the available input; rows per micro-batch."""
    batches: list[list[tuple]] = []
    columns: list[tuple[str, ...]] = []

    def collect(batch_df: DataFrame, _batch_id: int) -> None:
        out = workload.finalize_batch(batch_df)
        if not columns:
            columns.append(tuple(out.columns))
        batches.append([tuple(r) for r in out.collect()])

    own_ckpt = checkpoint_dir is None
    ckpt = checkpoint_dir or tempfile.mkdtemp(prefix=f"adaptstream-oracle-{workload.name.lower()}-")
    query = None
    try:
        stream = workload.stream_query(stream_df_factory())
        query = (
            stream.writeStream.outputMode("append")
            .foreachBatch(collect)
            .option("checkpointLocation", ckpt)
            .queryName(f"oracle_{workload.name.lower()}")
            .start()
        )
        query.processAllAvailable()
        if query.exception() is not None:
            msg = f"{workload.name}: streaming query failed: {query.exception()}"
            raise WorkloadError(msg)
    finally:
        if query is not None:
            query.stop()
        if own_ckpt:
            shutil.rmtree(ckpt, ignore_errors=True)
    return batches, (columns[0] if columns else ())


def _sort_key(row: tuple) -> tuple:
    return tuple((0, 0) if v is None else (1, round(v, 6) if isinstance(v, float) else v) for v in row)


def _same(a: Any, b: Any, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol) or (math.isnan(a) and math.isnan(b))
    return a == b


def compare_multisets(
    stream_rows: list[tuple], batch_rows: list[tuple], rel_tol: float = 1e-9, abs_tol: float = 1e-9
) -> list[str]:
    """Differences between two row multisets (empty list = equal); at most a few are described."""
    problems: list[str] = []
    if len(stream_rows) != len(batch_rows):
        problems.append(f"row counts differ: stream {len(stream_rows)}, batch {len(batch_rows)}")
    s, b = sorted(stream_rows, key=_sort_key), sorted(batch_rows, key=_sort_key)
    for i, (x, y) in enumerate(zip(s, b, strict=False)):
        if len(x) != len(y) or not all(_same(u, v, rel_tol, abs_tol) for u, v in zip(x, y, strict=True)):
            problems.append(f"first difference at sorted row {i}: stream {x} vs batch {y}")
            break
    return problems


def assert_stream_equals_batch(
    spark: SparkSession,
    workload: Workload,
    input_dir: str,
    stream_df_factory: Callable[[], DataFrame] | None = None,
    *,
    fmt: str = "csv",
    rel_tol: float = 1e-9,
    abs_tol: float = 1e-9,
    checkpoint_dir: str | None = None,
) -> OracleResult:
    """Raise AssertionError unless the stream's rows equal the batch oracle's rows (as multisets).

    ``stream_df_factory`` returns the raw streaming DataFrame over ``input_dir`` (default: Spark's file
    source, one file per micro-batch). The input must end with the workload's sentinel so every window closes.
    """
    factory = stream_df_factory or file_stream_factory(spark, workload, input_dir, fmt)
    batches, columns = run_stream(spark, workload, factory, checkpoint_dir)
    oracle = workload.batch_query(read_static(spark, workload, input_dir, fmt))
    if columns and tuple(oracle.columns) != columns:
        msg = f"{workload.name}: stream columns {columns} != batch columns {tuple(oracle.columns)}"
        raise AssertionError(msg)
    result = OracleResult(batches, [tuple(r) for r in oracle.collect()], tuple(oracle.columns))
    problems = compare_multisets(result.stream_rows, result.batch_rows, rel_tol, abs_tol)
    if problems:
        raise AssertionError(f"{workload.name}: stream != batch oracle: " + "; ".join(problems))
    return result
