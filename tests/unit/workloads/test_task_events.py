"""task_events generator: replay equals the shared samples in order, clock mapping, fitted rows, resume."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from adaptstream.errors import WorkloadError
from adaptstream.workloads import build_generator
from adaptstream.workloads.cluster import NAMES, TaskEventsGeneratorConfig, default_data_dir, load_sample
from adaptstream.workloads.data import PACKAGED, cppstream_file

RATES = [3000, 4500, 0, 5000, 4000, 2500, 1000, 700]  # 20,700 rows: crosses the end of the 20,000-row replay


@pytest.fixture(scope="module")
def tables() -> list[pa.Table]:
    gen = build_generator("task_events", seed=2)
    return [gen.generate(t, n) for t, n in enumerate(RATES)]


def test_schema_and_ddl() -> None:
    gen = build_generator("task_events", seed=0)
    assert len(gen.arrow_schema) == 13
    assert gen.spark_schema_ddl.split(", ")[0] == "timestamp BIGINT"
    assert gen.csv_header() is False


def test_replay_equals_sample_in_order(tables: list[pa.Table]) -> None:
    sample = load_sample(str(default_data_dir()))
    assert sample.num_rows == 20_000
    got = pa.concat_tables(tables).slice(0, 20_000)
    for name in NAMES[1:]:  # everything but the timestamp, which is mapped onto the run's clock
        assert got.column(name).equals(sample.column(name)), name
    with gzip.open(cppstream_file("task_event_1_10000.csv"), "rt") as f:  # the packaged copy is gzipped
        first_line = f.readline().split(",")
    assert got.column("job_id")[0].as_py() == int(first_line[2])


def test_missing_fields_stay_null(tables: list[pa.Table]) -> None:
    got = pa.concat_tables(tables).slice(0, 10_000)
    cpu_null = pc.is_null(got.column("cpu_request")).to_numpy(zero_copy_only=False)
    assert cpu_null.sum() == 109  # rows of sample 1 without resource requests
    assert (pc.fill_null(got.column("missing_info"), 0).to_numpy()[cpu_null] == 2).all()


def test_timestamps_follow_the_run_clock(tables: list[pa.Table]) -> None:
    for t, table in enumerate(tables):
        ts = table.column("timestamp").to_numpy()
        assert len(ts) == RATES[t]
        if len(ts):
            assert ts.min() >= t * 1_000_000 and ts.max() < (t + 1) * 1_000_000
            assert (np.diff(ts) >= 0).all()


def test_fitted_rows_follow_the_sample(tables: list[pa.Table]) -> None:
    sample = load_sample(str(default_data_dir()))
    fitted = pa.concat_tables(tables).slice(20_000)
    assert fitted.num_rows == sum(RATES) - 20_000
    sample_jobs = dict(
        zip(sample.column("job_id").to_pylist(), sample.column("scheduling_class").to_pylist(), strict=True)
    )
    for job, cls in zip(
        fitted.column("job_id").to_pylist(), fitted.column("scheduling_class").to_pylist(), strict=True
    ):
        assert sample_jobs[job] == cls  # a job keeps its class (one class per job in the samples)
    assert set(fitted.column("event_type").to_pylist()) <= set(sample.column("event_type").to_pylist())
    assert 1 in set(fitted.column("event_type").to_pylist())
    assert fitted.column("cpu_request").null_count < fitted.num_rows


def test_resume(tables: list[pa.Table]) -> None:
    for cut in (3, 6):
        ff = build_generator("task_events", seed=2)
        ff.fast_forward(RATES[:cut])
        assert ff.generate(cut, RATES[cut]).equals(tables[cut])
        st = build_generator("task_events", seed=2)
        st.load_state_dict(pickle.loads(pickle.dumps(ff.state_dict())))
        assert st.generate(cut + 1, RATES[cut + 1]).equals(tables[cut + 1])


def test_no_replay_mode_and_seed() -> None:
    a = TaskEventsGeneratorConfig(seed=1, replay=False).build().generate(0, 500)
    b = TaskEventsGeneratorConfig(seed=1, replay=False).build().generate(0, 500)
    c = TaskEventsGeneratorConfig(seed=2, replay=False).build().generate(0, 500)
    assert a.equals(b) and not a.equals(c)


def test_sentinel() -> None:
    s = build_generator("task_events", seed=0).sentinel_table(50)
    assert s.num_rows == 1 and s.column("event_type")[0].as_py() == -1
    assert s.column("timestamp")[0].as_py() == 50_000_000


def test_configured_folder_takes_precedence(tmp_path, monkeypatch) -> None:
    """ADAPTSTREAM_CPPSTREAM_DIR wins over the packaged copy, and a file missing there names the setting."""
    with gzip.open(PACKAGED / "task_event_2_10000.csv.gz", "rb") as f:
        plain = f.read()
    for name in ("task_event_1_10000.csv", "task_event_2_10000.csv"):
        (tmp_path / name).write_bytes(plain if name.endswith("2_10000.csv") else b"")
    monkeypatch.setenv("ADAPTSTREAM_CPPSTREAM_DIR", str(tmp_path))
    assert default_data_dir() == tmp_path
    assert cppstream_file("task_event_2_10000.csv") == tmp_path / "task_event_2_10000.csv"
    with pytest.raises(WorkloadError, match="ADAPTSTREAM_CPPSTREAM_DIR"):
        cppstream_file("lineitem_10000.tbl")
