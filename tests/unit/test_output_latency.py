"""Output latency (Klink Sec. 6.1.2) from a run directory, without Spark: hand-built run directories with known
write times, on the generator clock (generated input) and on the ingestion clock (``--input`` files)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adaptstream.connectors.base import Manifest
from adaptstream.metrics.output_latency import output_latency, window_latencies
from adaptstream.workloads import WORKLOADS, build_generator, write_run
from adaptstream.workloads.lmstream_queries import RUN_EPOCH_S


def _result(run_dir, batch_id: int, window_ends_s: list[int], written: float) -> None:
    folder = run_dir / "results" / f"batch_id={batch_id}"
    folder.mkdir(parents=True)
    ends = pa.array([(RUN_EPOCH_S + e) * 1_000_000 for e in window_ends_s], pa.timestamp("us"))
    pq.write_table(pa.table({"window_end": ends}), folder / "part-0.parquet")
    (folder / "_SUCCESS").write_text("")
    os.utime(folder / "_SUCCESS", (written, written))


def _run_json(run_dir, workload: str) -> None:
    (run_dir / "run.json").write_text(json.dumps({"spec": {"workload": workload}}))


def _generated_run(run_dir, workload: str, origin: float):
    """A generated run's directory: dataset 0 (the generator clock's mark) was written at origin + 1."""
    (run_dir / "input").mkdir()
    first = run_dir / "input" / "00000000.csv"
    first.write_text("")
    os.utime(first, (origin + 1, origin + 1))
    _run_json(run_dir, workload)
    return first


def test_generator_clock_is_write_time_minus_the_windows_end_on_the_generators_clock(tmp_path):
    origin = 1_700_000_000.0
    (tmp_path / "input").mkdir()
    first = tmp_path / "input" / "00000000.csv"
    first.write_text("")
    os.utime(first, (origin + 1, origin + 1))  # dataset 0 is due at origin + 1
    _run_json(tmp_path, "YSB")
    _result(tmp_path, 3, [10, 10], origin + 13.5)  # a window's rows (one per key) count once
    _result(tmp_path, 5, [20, 30], origin + 34.0)
    assert sorted(window_latencies(str(tmp_path))) == pytest.approx([3.5, 4.0, 14.0])
    got = output_latency(str(tmp_path))
    assert got["clock"] == "generator" and got["windows"] == 3 and got["mean_s"] == pytest.approx(21.5 / 3)


@pytest.mark.parametrize("workload", ["YSB", "CM1S", "DEBS"])
def test_ingestion_clock_uses_the_arrival_of_the_dataset_that_reached_the_windows_end(tmp_path, workload):
    w = WORKLOADS.get(workload)
    data = tmp_path / "in"
    paths = write_run(build_generator(w.generator, seed=2), w, data, [50] * 25)  # 25 s of data, then the sentinel
    run = tmp_path / "run"
    (run / "metrics" / "source").mkdir(parents=True)
    _run_json(run, workload)
    manifest = Manifest(str(run / "metrics" / "source" / "manifest.jsonl"))
    t0 = 1_800_000_000.0
    manifest.append([(str(p), t0 + 2.0 * k, p.stat().st_size, k == len(paths) - 1) for k, p in enumerate(paths)])
    # event second 10 is first reached by dataset 10 (YSB/DEBS: events of second k come with dataset k or later,
    # CM: dataset k holds [k, k+1)); 30 lies beyond the data: only the end-of-input marker (dataset 25) closes it
    _result(run, 1, [10], t0 + 30.0)
    _result(run, 2, [30], t0 + 55.0)
    lat = sorted(window_latencies(str(run)))
    reach10 = next(k for k in range(25) if _max_event_s(w, paths[k]) >= 10)
    assert lat == pytest.approx(sorted([30.0 - 2.0 * reach10, 55.0 - 2.0 * 25]))
    assert output_latency(str(run))["clock"] == "ingestion"


def _max_event_s(w, path) -> float:
    import pyarrow.csv as pacsv

    gen = build_generator(w.generator)
    t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=gen.arrow_schema.names))
    return max(t.column(w.event_time_column).to_pylist()) * w.event_seconds()


def test_no_clock_no_latency(tmp_path):
    _result(tmp_path, 1, [10], 0.0)
    assert output_latency(str(tmp_path)) == {
        "windows": 0,
        "mean_s": None,
        "p50_s": None,
        "p99_s": None,
        "clock": None,
    }


def test_drained_generator_run_windows_past_the_data_count_from_the_end_of_input_marker(tmp_path):
    origin = 1_700_000_000.0
    first = _generated_run(tmp_path, "CM1S", origin)
    (tmp_path / "metrics" / "source").mkdir(parents=True)
    manifest = Manifest(str(tmp_path / "metrics" / "source" / "manifest.jsonl"))
    manifest.append([(str(first), origin + 1, 0, False), (str(tmp_path / "sentinel.csv"), origin + 20.5, 0, True)])
    # 60 s sliding windows ending at 10 (a real watermark) and at 70 (past 20 s of data: the marker closed it)
    _result(tmp_path, 2, [10, 70], origin + 21.0)
    assert sorted(window_latencies(str(tmp_path))) == pytest.approx([0.5, 11.0])


def test_breakdown_splits_a_windows_latency_at_its_sweeping_watermarks_dataset(tmp_path):
    """YSB (watermark delay 2 s): the window ending at event second 10 is closed by dataset 12, which arrives at
    origin + 13; admitted 0.4 s later, its batch runs 0.6 s, the window is written 0.5 s after that."""
    from adaptstream.metrics.output_latency import latency_breakdown, summarize_breakdown

    origin = 1_700_000_000.0
    _generated_run(tmp_path, "YSB", origin)
    (tmp_path / "metrics").mkdir()
    rows = [
        {"path": str(tmp_path / "input" / f"{k:08d}.csv"), "arrival": origin + k + 1, "sentinel": False}
        | ({"admitted_at": origin + 13.4, "completed_at": origin + 14.0} if k == 12 else {})
        for k in range(11, 14)
    ]
    rows.append({"path": str(tmp_path / "input" / "00000014.csv"), "arrival": origin + 15, "sentinel": True})
    (tmp_path / "metrics" / "datasets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _result(tmp_path, 3, [10], origin + 14.5)
    _result(tmp_path, 4, [20], origin + 30.0)  # closed by the end-of-input marker: no dataset 22, not split
    parts = latency_breakdown(str(tmp_path))
    assert parts == [pytest.approx({"input": 3.0, "wait": 0.4, "batch": 0.6, "emit": 0.5})]
    assert sum(parts[0].values()) == pytest.approx(sorted(window_latencies(str(tmp_path)))[0])
    assert summarize_breakdown(parts)["windows"] == 1
    assert summarize_breakdown([]) == {"windows": 0, "input": None, "wait": None, "batch": None, "emit": None}
