"""Workload registry, window conventions, sentinels and the atomic dataset writer (no Spark)."""

from __future__ import annotations

import json
import os

import pyarrow.csv as pacsv
import pytest

from adaptstream.errors import UnknownNameError, WorkloadError
from adaptstream.workloads import WORKLOADS, build_generator, write_dataset, write_run
from adaptstream.workloads.oracle import compare_multisets

EXPECTED = {  # name: (window, LMStream SlideTime, generator)  -- LMStream Table III
    "LR1S": (30, 5, "linear_road"),
    "LR1T": (30, 0, "linear_road"),
    "LR2S": (30, 10, "linear_road"),
    "CM1S": (60, 10, "task_events"),
    "CM1T": (60, 0, "task_events"),
    "CM2S": (60, 5, "task_events"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_table_iii_parameters(name: str) -> None:
    w = WORKLOADS.get(name)
    window, slide, gen = EXPECTED[name]
    assert (w.window_s, w.lmstream_slide, w.generator) == (window, slide, gen)
    assert w.tumbling == (slide == 0)
    schema = w.generator_class().arrow_schema.names
    assert set(w.key_columns) <= set(schema) and w.event_time_column in schema


def test_unknown_workload_lists_choices() -> None:
    with pytest.raises(UnknownNameError, match="LR1S, LR1T, LR2S"):
        WORKLOADS.get("LR9")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sentinel_closes_every_window(name: str) -> None:
    w = WORKLOADS.get(name)
    table = w.sentinel(after_second=99)
    col = table.column(w.event_time_column)[0].as_py()
    sentinel_s = col if w.generator == "linear_road" else col / 1e6
    last_window_end = (99 // w.effective_slide_s) * w.effective_slide_s + w.window_s
    assert sentinel_s - w.watermark_delay_s >= last_window_end


def test_write_dataset_atomic_csv_without_header(tmp_path) -> None:
    gen = build_generator("linear_road", seed=0)
    table = gen.generate(0, 25)
    path = write_dataset(table, tmp_path / "00000000.csv", "csv", header=gen.csv_header())
    assert os.listdir(tmp_path) == ["00000000.csv"]
    first = path.read_text().splitlines()[0]
    assert not first.startswith("Type") and len(first.split(",")) == 15
    back = pacsv.read_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=table.schema.names),
        convert_options=pacsv.ConvertOptions(column_types=table.schema),
    )
    assert back.cast(table.schema).equals(table)


def test_write_dataset_json_lines_keeps_nulls(tmp_path) -> None:
    table = build_generator("task_events", seed=0).generate(0, 10_000).slice(0, 5)
    path = write_dataset(table, tmp_path / "x.json", "json")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows == table.to_pylist()
    with pytest.raises(WorkloadError, match="valid choices"):
        write_dataset(table, tmp_path / "x.parquet", "parquet")


def test_write_run_orders_files_by_mtime(tmp_path) -> None:
    w = WORKLOADS.get("LR2S")
    paths = write_run(build_generator(w.generator, seed=0), w, tmp_path, [5, 6, 7])
    assert [p.name for p in paths] == ["00000000.csv", "00000001.csv", "00000002.csv", "00000003.csv"]
    mtimes = [p.stat().st_mtime for p in paths]
    assert mtimes == sorted(mtimes) and len(set(mtimes)) == 4
    assert paths[-1].read_text().startswith("-1,")


def test_compare_multisets() -> None:
    assert compare_multisets([(1, "a", 0.5), (2, None, 1.0)], [(2, None, 1.0 + 1e-12), (1, "a", 0.5)]) == []
    assert compare_multisets([(1, 0.5)], [(1, 0.6)])
    assert compare_multisets([(1, 0.5)], [(1, 0.5), (1, 0.5)])
