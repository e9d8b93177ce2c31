"""Executor side: turn an input partition into Arrow record batches.

A ``SlicePartition`` carries references only (file, byte range, fingerprint); the executor's Python worker reads and
parses the bytes, so the driver never touches the rows and the work scales with the executors. Each dataset's row
count and malformed rows go to a small part file in the query's state directory (written atomically, so a retried
task or a replay rewrites the same file); the source reads it when the batch completes, for accounting and the
quarantine. Executors therefore need the input and state directories on a filesystem they all see, as Spark's own
file source needs its input.

A ``RedisPartition`` carries entry-ID ranges of Redis streams (connectors/redis.py): the executor reads exactly
those entries with XRANGE, refuses a range that lost entries, parses them and writes the same part files.

A ``BlockPartition`` carries rows the driver already parsed and planned (partitioners that must see every key
before planning, see spark/planner.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from adaptstream.connectors.base import DatasetRef, fingerprint_of, write_atomic
from adaptstream.connectors.parsing import FileFormat, ParseResult, parse_bytes, read_range
from adaptstream.errors import ConnectorError

MAX_BATCH_ROWS = 65536  # rows per Arrow batch handed to Spark: bounds the worker's memory per step


@dataclass(frozen=True)
class FileSlice:
    seq: int
    path: str
    start: int
    length: int
    fingerprint: str

    @classmethod
    def of(cls, ref: DatasetRef) -> FileSlice:
        return cls(ref.seq, ref.path, ref.start, ref.bytes, ref.fingerprint)


class SlicePartition(InputPartition):
    """Datasets (byte ranges of files) one Spark task reads."""

    def __init__(self, index: int, slices: list[FileSlice], parts_dir: str) -> None:
        super().__init__(index)
        self.slices = slices
        self.parts_dir = parts_dir


@dataclass(frozen=True)
class EntryRange:
    seq: int
    stream: str
    first: str
    last: str
    entries: int

    @classmethod
    def of(cls, ref: DatasetRef) -> EntryRange:
        return cls(ref.seq, ref.path, ref.first_id, ref.last_id, ref.entries)


class RedisPartition(InputPartition):
    """Entry-ID ranges of Redis streams one Spark task reads."""

    def __init__(self, index: int, addr, ranges: list[EntryRange], parts_dir: str, fmt, timeout: float) -> None:
        super().__init__(index)
        self.addr = addr
        self.ranges = ranges
        self.parts_dir = parts_dir
        self.fmt = fmt
        self.timeout = timeout


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


def part_path(parts_dir: str, seq: int) -> str:
    return os.path.join(parts_dir, f"{seq:010d}.json")


def write_part(parts_dir: str, sl: FileSlice, res: ParseResult) -> None:
    """What the source's accounting needs about one parsed dataset; byte offsets made absolute in the file."""
    bad = [{**b, "offset": None if b.get("offset") is None else b["offset"] + sl.start} for b in res.bad]
    write_atomic(part_path(parts_dir, sl.seq), json.dumps({"seq": sl.seq, "rows": res.table.num_rows, "bad": bad}))


def write_part_result(parts_dir: str, seq: int, res: ParseResult) -> None:
    write_atomic(part_path(parts_dir, seq), json.dumps({"seq": seq, "rows": res.table.num_rows, "bad": res.bad}))


def read_part(parts_dir: str, seq: int) -> dict | None:
    try:
        with open(part_path(parts_dir, seq), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def parse_slice(sl: FileSlice, schema: pa.Schema, fmt: FileFormat) -> ParseResult:
    """Read exactly the admitted bytes; refuse them if they are not what was admitted."""
    data = read_range(sl.path, sl.start, sl.length)
    if sl.fingerprint and fingerprint_of(data) != sl.fingerprint:
        msg = (
            f"dataset {sl.seq} ({sl.path}, bytes {sl.start}-{sl.start + sl.length}) changed after it was "
            "admitted; adaptstream never reads different data for an admitted offset. Restore the file, or "
            "start the query from a new checkpoint and state directory"
        )
        raise ConnectorError(msg)
    return parse_bytes(data, schema, fmt, header=fmt.header and sl.start == 0)


def read_slices(partition: SlicePartition, schema: pa.Schema, fmt: FileFormat) -> Iterator[pa.RecordBatch]:
    for sl in partition.slices:
        res = parse_slice(sl, schema, fmt)
        write_part(partition.parts_dir, sl, res)
        yield from res.table.to_batches(max_chunksize=MAX_BATCH_ROWS)


def read_redis(partition: RedisPartition, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    from adaptstream.connectors.redis import client, read_piece

    r = client(partition.addr, partition.timeout)
    try:
        for rng in partition.ranges:
            res = read_piece(
                r,
                partition.addr,
                rng.seq,
                rng.stream,
                rng.first,
                rng.last,
                rng.entries,
                schema,
                partition.fmt,
                partition.timeout,
            )
            write_part_result(partition.parts_dir, rng.seq, res)
            yield from res.table.to_batches(max_chunksize=MAX_BATCH_ROWS)
    finally:
        r.close()


def read_block(partition: BlockPartition) -> Iterator[pa.RecordBatch]:
    yield from pa.ipc.open_stream(partition.payload)


def read_partition(partition: InputPartition, schema: pa.Schema, fmt: FileFormat) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, SlicePartition):
        return read_slices(partition, schema, fmt)
    if isinstance(partition, BlockPartition):
        return read_block(partition)
    if isinstance(partition, RedisPartition):
        return read_redis(partition, schema)
    msg = f"unexpected input partition {type(partition).__name__}"
    raise ConnectorError(msg)
