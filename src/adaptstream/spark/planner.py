"""Driver side: which datasets (or rows) go into which Spark input partition.

Default (partitioner ``time``, Spark's own shape): the micro-batch's datasets, in arrival order, are cut into
contiguous groups of about equal bytes, one group per partition; the driver plans with metadata only and executors
read and parse (spark/read.py).

Skew-aware partitioners (Prompt, the holistic ones) must see every row's key before they can place it, so for them
the driver parses each dataset when it arrives (counting keys while it waits, Prompt Alg. 1), plans the rows and
ships them inside the partitions. That path costs driver CPU per row and does not scale out; docs/source.md gives
the measured cost.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from adaptstream.connectors.base import DatasetRef, write_atomic
from adaptstream.connectors.parsing import FileFormat, ParseResult
from adaptstream.connectors.ranges import FileSlice, parse_slice, write_part, write_part_result
from adaptstream.spark.read import BlockPartition, to_ipc


def read_block_count(path: str | None, default: int) -> int:
    """The map-task count an elasticity policy asked for (``blocksFile``), else ``default``.

    The pane executor writes the file in the driver after each batch; the source reads it when it plans the next
    one, so Prompt Alg. 4's map-task decision reaches Spark's input partitions without restarting the query. A
    missing or unreadable file keeps the configured count: the query never stops over a tuning hint."""
    if not path:
        return default
    try:
        with open(path) as f:
            n = int(json.load(f)["map_tasks"])
    except (OSError, ValueError, KeyError, TypeError):
        return default
    return n if n >= 1 else default


def write_block_count(path: str, map_tasks: int, after_batch: int | None) -> None:
    """Atomically (rename) record the map tasks for the batches after ``after_batch``."""
    write_atomic(path, json.dumps({"map_tasks": int(map_tasks), "after_batch": after_batch}))


class DriverPlanner:
    """Parses datasets on the driver as they arrive and places rows with a skew-aware partitioner (or, with no
    partitioner, in contiguous arrival-order blocks: the ``readOn=driver`` path, for executors that cannot see the
    input files and as the baseline of ``adaptstream bench source``)."""

    def __init__(
        self,
        partitioner,
        key_columns: tuple[str, ...],
        schema: pa.Schema,
        fmt: FileFormat,
        parts_dir: str,
        partition_window: float = 0.0,
        clock: Callable[[], float] = time.time,
        load: Callable[[DatasetRef], ParseResult | None] | None = None,
    ) -> None:
        self.partitioner = partitioner
        self.key_columns = key_columns
        self.schema = schema
        self.fmt = fmt
        self.parts_dir = parts_dir
        self.partition_window = partition_window
        self.clock = clock
        self.load = load  # the connector's driver-side read of a dataset that is not a file range (None: it is one)
        self._window_started = clock()
        self._parsed: dict[int, ParseResult] = {}

    def _keys(self, table: pa.Table) -> np.ndarray:
        from adaptstream.partitioning import key_hash

        return key_hash(table, self.key_columns)

    def parse(self, ref: DatasetRef) -> ParseResult:
        res = self._parsed.get(ref.seq)
        if res is None and self.load is not None:
            res = self.load(ref)
            if res is not None:
                write_part_result(self.parts_dir, ref.seq, res)
        if res is None:
            sl = FileSlice.of(ref)
            res = parse_slice(sl, self.schema, self.fmt)
            write_part(self.parts_dir, sl, res)
        if ref.seq not in self._parsed:
            self._parsed[ref.seq] = res
            if res.table.num_rows and self.partitioner is not None:
                self.partitioner.observe(self._keys(res.table))  # Prompt Alg. 1: count keys while buffering
        return res

    def rows(self, ref: DatasetRef) -> int:
        return self.parse(ref).table.num_rows

    def release(self, num_blocks: int) -> None:
        release = getattr(self.partitioner, "release", None)
        if release is not None:  # Prompt's early batch release: plan from the statistics gathered while buffering
            release(num_blocks)

    def plan(self, refs: list[DatasetRef], num_blocks: int) -> tuple[list[InputPartition], list[int]]:
        tables = [self.parse(r).table for r in refs]
        table = pa.concat_tables(tables) if tables else self.schema.empty_table()
        blocks = self._blocks(table, num_blocks)
        return [BlockPartition(k, to_ipc(b)) for k, b in enumerate(blocks)], [b.num_rows for b in blocks]

    def _blocks(self, table: pa.Table, n: int) -> list[pa.Table]:
        if self.partitioner is None:  # Spark's default shape: contiguous arrival-order blocks
            bounds = np.linspace(0, table.num_rows, n + 1).astype(int)
            return [table.slice(int(a), int(b - a)) for a, b in itertools.pairwise(bounds)]
        if self.partition_window > 0 and self.clock() - self._window_started >= self.partition_window:
            self.partitioner.on_window_boundary()
            self._window_started = self.clock()
        ids = np.asarray(self.partitioner.assign(self._keys(table), n))
        if self.partition_window <= 0:
            self.partitioner.on_window_boundary()  # state covers one micro-batch
        order = np.argsort(ids, kind="stable")
        counts = np.bincount(ids, minlength=n)
        cuts = np.concatenate([[0], np.cumsum(counts)])
        ordered = table.take(pa.array(order))
        return [ordered.slice(int(cuts[k]), int(counts[k])) for k in range(n)]

    def forget(self, below: int) -> None:
        """Drop parsed datasets with seq < below (their batch is done)."""
        for seq in [k for k in self._parsed if k < below]:
            del self._parsed[seq]
