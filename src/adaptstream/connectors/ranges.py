"""File ranges: the read tasks of every connector whose datasets are byte ranges of files (files, generator, and the
end-of-input marker of any connector), and the part files executors leave for the source's accounting.

A ``SliceTask`` carries references only (file, byte range, fingerprint); the executor's Python worker reads and
parses the bytes, so the driver never touches the rows and the work scales with the executors. Each dataset's row
count and malformed rows go to a small part file in the query's state directory (written atomically, so a retried
task or a replay rewrites the same file); the source reads it when the batch completes, for accounting and the
quarantine. Executors therefore need the input and state directories on a filesystem they all see, as Spark's own
file source needs its input.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from adaptstream.connectors.base import DatasetRef, ReadTask, fingerprint_of, write_atomic
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


class SliceTask(ReadTask):
    """Datasets (byte ranges of files) one Spark task reads."""

    def __init__(self, slices: list[FileSlice], parts_dir: str) -> None:
        self.slices = slices
        self.parts_dir = parts_dir

    def seqs(self) -> list[int]:
        return [s.seq for s in self.slices]

    def read(self, schema: pa.Schema, fmt: FileFormat) -> Iterator[pa.RecordBatch]:
        for sl in self.slices:
            res = parse_slice(sl, schema, fmt)
            write_part(self.parts_dir, sl, res)
            yield from res.table.to_batches(max_chunksize=MAX_BATCH_ROWS)


def group_by_bytes(sizes: list[int], n: int) -> list[tuple[int, int]]:
    """Contiguous [a, b) index ranges of ``sizes`` into at most ``n`` groups of about equal total size."""
    if not sizes:
        return []
    n = max(1, min(n, len(sizes)))
    cum = np.cumsum(np.asarray(sizes, dtype=np.float64))
    total = float(cum[-1]) or float(len(sizes))
    if not cum[-1]:
        cum = np.arange(1, len(sizes) + 1, dtype=np.float64)
    cuts = [0]
    for k in range(1, n):
        c = int(np.searchsorted(cum, total * k / n, side="left")) + 1
        cuts.append(min(max(c, cuts[-1] + 1), len(sizes) - (n - k)))
    cuts.append(len(sizes))
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def task_count(total_bytes: int, num_blocks: int, max_task_bytes: int) -> int:
    """``num_blocks`` tasks, more when one would read more than ``max_task_bytes`` (0: no bound)."""
    return max(num_blocks, math.ceil(total_bytes / max_task_bytes)) if max_task_bytes > 0 else num_blocks


def plan_slices(refs: list[DatasetRef], num_blocks: int, max_task_bytes: int, parts_dir: str) -> list[ReadTask]:
    """Executor reads: whole datasets per task, more tasks when one would exceed the byte bound."""
    groups = group_by_bytes([r.bytes for r in refs], task_count(sum(r.bytes for r in refs), num_blocks, max_task_bytes))
    return [SliceTask([FileSlice.of(r) for r in refs[a:b]], parts_dir) for a, b in groups]


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


# -- part files ---------------------------------------------------------------------------------------------
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
