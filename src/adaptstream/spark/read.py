"""Executor side: turn an input partition into Arrow record batches.

A ``TaskPartition`` carries one read task a connector planned (connectors/base.py ``ReadTask``: file ranges, stream
entry ranges, ...); the executor's Python worker runs its ``read``, so the driver never touches the rows and the
work scales with the executors.

A ``BlockPartition`` carries rows the driver already parsed and planned (partitioners that must see every key
before planning, see spark/planner.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from adaptstream.connectors.base import ReadTask
from adaptstream.connectors.parsing import FileFormat
from adaptstream.errors import ConnectorError


class TaskPartition(InputPartition):
    """One connector read task, as Spark's input partition ``index``."""

    def __init__(self, index: int, task: ReadTask) -> None:
        super().__init__(index)
        self.task = task


class BlockPartition(InputPartition):
    """One block of rows planned on the driver, carried as Arrow IPC bytes."""

    def __init__(self, index: int, payload: bytes) -> None:
        super().__init__(index)
        self.payload = payload


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_block(partition: BlockPartition) -> Iterator[pa.RecordBatch]:
    yield from pa.ipc.open_stream(partition.payload)


def read_partition(partition: InputPartition, schema: pa.Schema, fmt: FileFormat) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, TaskPartition):
        return partition.task.read(schema, fmt)
    if isinstance(partition, BlockPartition):
        return read_block(partition)
    msg = f"unexpected input partition {type(partition).__name__}"
    raise ConnectorError(msg)
