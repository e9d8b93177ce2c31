"""Run a Spark query over a micro-batch whose Spark input partitions are exactly the planned blocks.

Used by benchmarks and tests before/independently of the streaming source: block k of the batch becomes
partition k of a DataFrame (spark.range(P, numPartitions=P) gives one index row per partition; mapInArrow
swaps it for the block's rows, shipped as Arrow IPC bytes in a broadcast). Spark then runs the query as it
would on the source's blocks: partial aggregation per block (so the aggregation cost Gamma is real work),
an exchange, and the final aggregation.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def split_blocks(table: pa.Table, blocks: np.ndarray, num_blocks: int) -> list[pa.Table]:
    """Rows of block k (arrival order kept inside a block)."""
    order = np.argsort(blocks, kind="stable")
    counts = np.bincount(blocks, minlength=num_blocks)
    cuts = np.concatenate([[0], np.cumsum(counts)])
    ordered = table.take(pa.array(order))
    return [ordered.slice(int(cuts[k]), int(counts[k])) for k in range(num_blocks)]


def spark_compatible(table: pa.Table) -> pa.Table:
    """Spark's Arrow readers take microsecond timestamps; pandas produces nanoseconds."""
    fields = [
        pa.field(f.name, pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def blocks_dataframe(spark: Any, table: pa.Table, blocks: np.ndarray, num_blocks: int) -> tuple[Any, Any]:
    """DataFrame with exactly `num_blocks` partitions, partition k = block k. Returns (df, broadcast);
    call broadcast.unpersist() when done."""
    from pyspark.sql.pandas.types import from_arrow_schema

    table = spark_compatible(table)
    payloads = [_ipc(t) for t in split_blocks(table, np.asarray(blocks), num_blocks)]
    bc = spark.sparkContext.broadcast(payloads)
    schema = from_arrow_schema(table.schema)

    def emit(batches):
        for batch in batches:
            for idx in batch.column(0).to_pylist():
                reader = pa.ipc.open_stream(bc.value[int(idx)])
                yield from reader

    index = spark.range(0, num_blocks, 1, numPartitions=num_blocks)
    return index.mapInArrow(emit, schema), bc


def timed_query(spark: Any, table: pa.Table, blocks: np.ndarray, num_blocks: int, query: Any) -> float:
    """Seconds Spark takes to run `query(df)` to completion (noop sink) over the planned blocks."""
    df, bc = blocks_dataframe(spark, table, blocks, num_blocks)
    try:
        t = time.perf_counter()
        query(df).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t
    finally:
        bc.unpersist()
