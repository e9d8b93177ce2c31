"""``adaptstream produce``: write a generator workload into Redis streams at a rate, with the generator's traffic
shapes, so any workload or benchmark can run over the broker.

Second ``k`` of the run carries ``traffic.rows_at(k)`` rows of the workload's generator (the same rows the generator
connector writes as dataset ``k``), added with automatic IDs in ``slices`` pipelined chunks spread over that second,
so entry IDs (arrival times) spread over the second as live traffic does. With ``pace=False`` every row is written
as fast as the server takes it (the producer's own ceiling). Rows alternate over the streams of the URL.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv

from adaptstream.connectors.redis import RedisAddress, check_reachable, client, retrying


@dataclass(frozen=True)
class ProduceStats:
    entries: int
    seconds: float  # wall time, generating the rows included
    write_seconds: float  # time spent in the pipelined XADD round trips only
    streams: tuple[str, ...]

    @property
    def rate(self) -> float:
        return self.entries / self.seconds if self.seconds > 0 else 0.0

    @property
    def write_rate(self) -> float:
        return self.entries / self.write_seconds if self.write_seconds > 0 else 0.0


def csv_lines(table: pa.Table) -> list[bytes]:
    """One CSV line per row, in the table's column order (nulls as empty fields), without a header."""
    if table.num_rows == 0:
        return []
    buf = io.BytesIO()
    pacsv.write_csv(table, buf, write_options=pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    lines = buf.getvalue().rstrip(b"\n").split(b"\n")
    if len(lines) == table.num_rows:
        return lines
    out = []  # a value holds a newline: quote row by row
    for row in table.to_pylist():
        s = io.StringIO()
        csv.writer(s, lineterminator="").writerow(["" if v is None else v for v in row.values()])
        out.append(s.getvalue().encode())
    return out


def entries_of(table: pa.Table, entry_format: str = "row", field: str = "row") -> list[dict[str, bytes | str]]:
    """Stream entries for a table: ``row`` puts one CSV line in one field; ``fields`` one field per column."""
    lines = csv_lines(table)
    if entry_format == "row":
        return [{field: line} for line in lines]
    names = table.column_names
    out: list[dict[str, bytes | str]] = []
    for values in csv.reader(x.decode() for x in lines):
        out.append(dict(zip(names, values, strict=True)))
    return out


def write_entries(r, streams: tuple[str, ...], entries: Iterable[dict], offset: int = 0) -> int:
    pipe = r.pipeline(transaction=False)
    n = 0
    for i, e in enumerate(entries, start=offset):
        pipe.xadd(streams[i % len(streams)], e)
        n += 1
    if n:
        pipe.execute()
    return n


def produce(
    addr: RedisAddress,
    seconds: int,
    rows_of_second: Callable[[int], pa.Table],
    *,
    entry_format: str = "row",
    field: str = "row",
    pace: bool = True,
    slices: int = 10,
    timeout: float = 30.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> ProduceStats:
    """Write ``seconds`` seconds of rows; with ``pace`` second k is spread over [start + k, start + k + 1)."""
    check_reachable(addr)
    r = client(addr, timeout)
    written = 0
    writing = 0.0
    t0 = clock()
    try:
        for k in range(seconds):
            entries = entries_of(rows_of_second(k), entry_format, field)
            n = len(entries)
            for j in range(slices):
                chunk = entries[j * n // slices : (j + 1) * n // slices]
                if pace:
                    wait = t0 + k + j / slices - clock()
                    if wait > 0:
                        sleep(wait)
                w0 = clock()

                def write(c: list = chunk, o: int = written) -> int:
                    return write_entries(r, addr.streams, c, o)

                written += retrying(addr, timeout, "writing entries", write)
                writing += clock() - w0
    finally:
        r.close()
    return ProduceStats(written, clock() - t0, writing, addr.streams)
