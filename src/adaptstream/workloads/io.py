"""Writing datasets as files a directory-watching reader (Spark's file source, adaptstream's files connector)
can pick up safely: each file is written under a hidden temporary name and renamed into place, so a reader
never sees a half-written dataset (Spark ignores names starting with '.' or '_')."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.csv as pacsv

from adaptstream.errors import WorkloadError

if TYPE_CHECKING:  # pragma: no cover
    from adaptstream.workloads.base import DatasetGenerator, Workload

FORMATS = ("csv", "json")


def dataset_file_name(second: int, fmt: str = "csv") -> str:
    """File name of dataset ``second``: zero-padded so that name order is time order."""
    return f"{int(second):08d}.{'json' if fmt == 'json' else 'csv'}"


def write_dataset(
    table: pa.Table, path: str | os.PathLike[str], fmt: str = "csv", header: bool = False, mtime: float | None = None
) -> Path:
    """Write ``table`` to ``path`` atomically (hidden temp file + rename). CSV nulls are empty fields;
    JSON is one object per line with nulls as ``null``. ``mtime`` sets the file's modification time."""
    if fmt not in FORMATS:
        msg = f"unknown dataset format {fmt!r}; valid choices: {', '.join(FORMATS)}"
        raise WorkloadError(msg)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    if fmt == "csv":
        opts = pacsv.WriteOptions(include_header=header, quoting_style="needed")
        pacsv.write_csv(table, tmp, write_options=opts)
    else:
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in table.to_pylist():
                fh.write(json.dumps(row, separators=(",", ":")))
                fh.write("\n")
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.replace(tmp, path)
    return path


def write_run(
    generator: DatasetGenerator,
    workload: Workload | None,
    out_dir: str | os.PathLike[str],
    rows_per_second: Sequence[int],
    fmt: str = "csv",
) -> list[Path]:
    """Write datasets 0..n-1 (``rows_per_second`` rows each) and, given a workload, its sentinel as dataset n.

    Modification times increase by one second per dataset (in the past), so readers that order files by
    modification time, as Spark's file source does, see them in time order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = len(rows_per_second)
    base = time.time() - n - 120
    paths = []
    for second, rows in enumerate(rows_per_second):
        table = generator.generate(generator.next_second, int(rows))
        paths.append(
            write_dataset(table, out / dataset_file_name(second, fmt), fmt, generator.csv_header(), mtime=base + second)
        )
    if workload is not None:
        sentinel = workload.sentinel(after_second=n - 1)
        paths.append(
            write_dataset(sentinel, out / dataset_file_name(n, fmt), fmt, generator.csv_header(), mtime=base + n)
        )
    return paths
