"""Connectors as plugins: the registry, options owned by each connector, and Parquet files through the files
connector (admitted whole once complete; truncated, changed or mismatched files quarantined, counted)."""

from __future__ import annotations

import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adaptstream.connectors import CONNECTORS
from adaptstream.connectors.base import Manifest
from adaptstream.connectors.files import FilesConnector, FilesOptions
from adaptstream.connectors.parsing import FileFormat
from adaptstream.connectors.ranges import FileSlice, parse_slice
from adaptstream.connectors.redis import RedisOptions
from adaptstream.errors import ConfigError, UnknownNameError
from adaptstream.policy import ManualClock
from adaptstream.spark.options import SourceOptions

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32()), ("ts", pa.timestamp("us", tz="UTC"))])


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "k": [f"k{i % 3}" for i in range(start, start + n)],
            "v": pa.array(range(start, start + n), pa.int32()),
            "ts": pa.array([i * 1_000_000 for i in range(start, start + n)], pa.timestamp("us")),
        }
    )


def _parquet_bytes(table: pa.Table, path: pathlib.Path) -> bytes:
    pq.write_table(table, path)
    return path.read_bytes()


def test_the_registry_lists_every_connector_and_refuses_an_unknown_one():
    assert CONNECTORS.names() == ["files", "generator", "redis"]
    with pytest.raises(UnknownNameError, match="valid choices: files, generator, redis"):
        SourceOptions.parse({"connector": "kafka", "path": "/tmp"})


def test_the_spark_glue_names_no_connector():
    spark_dir = pathlib.Path(__file__).parents[2] / "src" / "adaptstream" / "spark"
    for path in spark_dir.glob("*.py"):
        text = path.read_text().lower()
        for name in ("redis", "generator"):
            assert f"{name}connector" not in text and f"connectors.{name}" not in text, (path.name, name)
        assert "redis" not in text, path.name


def test_each_connector_owns_its_options(tmp_path):
    o = SourceOptions.parse({"path": str(tmp_path), "fileStableSeconds": "2s", "ignorePattern": "^skip"})
    assert o.conn == FilesOptions(path=str(tmp_path), file_stable_seconds=2.0, ignore_pattern="^skip")
    r = SourceOptions.parse({"path": "redis://127.0.0.1:6379/s", "statePath": str(tmp_path), "trim": "true"})
    assert isinstance(r.conn, RedisOptions) and r.connector == "redis" and r.conn.trim
    with pytest.raises(ConfigError, match=r"trim \(redis connector\) do not apply to the files connector"):
        SourceOptions.parse({"path": str(tmp_path), "trim": "true"})
    with pytest.raises(ConfigError, match="option maxDatasetEntries must be in"):
        SourceOptions.parse({"path": "redis://h:1/s", "statePath": str(tmp_path), "maxDatasetEntries": "0"})


def _parquet_dir(tmp_path) -> tuple[FilesConnector, ManualClock, list[tuple[str, str]]]:
    """A watched Parquet directory on a manual clock; file events (changed, truncated) land in the list."""
    (tmp_path / "in").mkdir()
    clock = ManualClock(1_000_000.0)
    changed: list[tuple[str, str]] = []
    conn = FilesConnector(
        Manifest(str(tmp_path / "state" / "manifest.jsonl")),
        str(tmp_path / "in"),
        clock=clock,
        stable_seconds=0.5,
        whole_files=True,
        on_changed=lambda p, why: changed.append((p, why)),
    )
    return conn, clock, changed


def test_a_parquet_file_is_admitted_whole_only_once_complete(tmp_path):
    conn, clock, changed = _parquet_dir(tmp_path)
    data = _parquet_bytes(_table(100), tmp_path / "whole.parquet")
    path = tmp_path / "in" / "a.parquet"
    path.write_bytes(data[: len(data) // 2])  # a writer half way through
    os.utime(path, (clock.now, clock.now))
    clock.advance(0.1)
    assert conn.poll() == [] and changed == [] and conn.pending_unstable()
    path.write_bytes(data)  # the writer finished
    os.utime(path, (clock.now, clock.now))
    clock.advance(0.6)
    (ref,) = conn.poll()
    assert (ref.start, ref.bytes) == (0, len(data)) and changed == []
    res = parse_slice(FileSlice.of(ref), SCHEMA, FileFormat("parquet"))
    assert res.bad == [] and res.table.num_rows == 100 and res.table.schema == SCHEMA

    with open(path, "ab") as f:  # Parquet cannot grow: a change after admission is a file event
        f.write(b"more")
    os.utime(path, (clock.now, clock.now))
    clock.advance(0.6)
    assert conn.poll() == []
    assert len(changed) == 1 and "changed after admission" in changed[0][1]


def test_a_truncated_parquet_file_left_alone_is_quarantined_once(tmp_path):
    conn, clock, changed = _parquet_dir(tmp_path)
    data = _parquet_bytes(_table(10), tmp_path / "whole.parquet")
    path = tmp_path / "in" / "cut.parquet"
    path.write_bytes(data[:-7])
    os.utime(path, (clock.now, clock.now))
    clock.advance(1.0)
    assert conn.poll() == [] and conn.poll() == []
    assert len(changed) == 1 and "no Parquet footer" in changed[0][1]


def test_a_parquet_file_with_another_schema_is_one_file_event_naming_both(tmp_path):
    other = pa.table({"k": [1, 2], "w": ["a", "b"]})
    data = _parquet_bytes(other, tmp_path / "o.parquet")
    path = tmp_path / "o.parquet"
    res = parse_slice(FileSlice(0, str(path), 0, len(data), ""), SCHEMA, FileFormat("parquet"))
    assert res.table.num_rows == 0 and len(res.bad) == 1
    reason = res.bad[0]["reason"]
    assert "(k int64, w string)" in reason and "(k string, v int32, ts timestamp[us, tz=UTC])" in reason


def test_parquet_numbers_widen_but_strings_never_become_numbers(tmp_path):
    narrow = pa.table({"k": ["a"], "v": pa.array([7], pa.int8()), "ts": pa.array([0], pa.timestamp("ms"))})
    data = _parquet_bytes(narrow, tmp_path / "n.parquet")
    res = parse_slice(FileSlice(0, str(tmp_path / "n.parquet"), 0, len(data), ""), SCHEMA, FileFormat("parquet"))
    assert res.bad == [] and res.table.column("v").to_pylist() == [7]
    text = pa.table({"k": ["a"], "v": ["7"], "ts": pa.array([0], pa.timestamp("ms"))})
    data = _parquet_bytes(text, tmp_path / "t.parquet")
    res = parse_slice(FileSlice(0, str(tmp_path / "t.parquet"), 0, len(data), ""), SCHEMA, FileFormat("parquet"))
    assert res.table.num_rows == 0 and "['v'] have another type" in res.bad[0]["reason"]
