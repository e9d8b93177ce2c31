"""The DEBS 2015 taxi generator and workloads without Spark: real rides replayed, deterministic and resumable,
event times with bounded network delay, the data folder found through configuration, sentinels that close every
window, and the batch SQL text of the oracle."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pyarrow.compute as pc
import pytest

from adaptstream.errors import WorkloadError
from adaptstream.workloads import WORKLOADS, build_generator
from adaptstream.workloads.data import ENV, PACKAGED
from adaptstream.workloads.debs import SAMPLE, load_rides


def test_rides_are_the_real_sample_replayed_from_a_seed_offset_and_wrapping_around():
    rides = load_rides()
    assert rides.num_rows == 10_000
    gen = build_generator("debs_rides", seed=0)
    t = gen.generate(0, 6000).drop_columns(["event_time"])
    t2 = gen.generate(1, 6000).drop_columns(["event_time"])
    assert t.equals(rides.slice(0, 6000))
    assert t2.slice(0, 4000).equals(rides.slice(6000, 4000)) and t2.slice(4000).equals(rides.slice(0, 2000))
    other = build_generator("debs_rides", seed=1).generate(0, 10).column("medallion")
    assert other != t.column("medallion").slice(0, 10)  # another seed reads another stretch


def test_deterministic_and_resumable():
    a = build_generator("debs_rides", seed=4)
    tables = [a.generate(k, n) for k, n in enumerate([300, 0, 450, 200])]
    b = build_generator("debs_rides", seed=4)
    b.fast_forward([300, 0, 450])
    assert b.generate(3, 200).equals(tables[3])
    c = build_generator("debs_rides", seed=4)
    c.load_state_dict({**a.state_dict(), "next_second": 3, "cursor": 750})
    assert c.generate(3, 200).equals(tables[3])


def test_event_times_lag_the_arrival_second_by_at_most_the_network_delay():
    gen = build_generator("debs_rides", seed=2, max_delay=2.0)
    for k in range(6):
        ms = gen.generate(k, 500).column("event_time").to_numpy()
        assert ms.max() < (k + 1) * 1000 and ms.min() >= max(0, (k - 2) * 1000)
        assert gen.event_stats(k)[0] == pytest.approx(ms.max() / 1000)
    with pytest.raises(WorkloadError):
        build_generator("debs_rides", max_delay=-1.0)


def test_the_sample_is_found_through_configuration(tmp_path, monkeypatch):
    with gzip.open(PACKAGED / f"{SAMPLE}.gz", "rb") as src, open(tmp_path / SAMPLE, "wb") as dst:
        shutil.copyfileobj(src, dst)
    monkeypatch.setenv(ENV, str(tmp_path))
    load_rides.cache_clear()
    try:
        assert load_rides().num_rows == 10_000
        monkeypatch.setenv(ENV, str(tmp_path / "nowhere"))
        load_rides.cache_clear()
        with pytest.raises(WorkloadError, match=ENV):
            load_rides()
    finally:
        load_rides.cache_clear()


@pytest.mark.parametrize("name", ["DEBS", "DEBSP"])
def test_workload_shape_and_sentinel_closes_every_window(name):
    w = WORKLOADS.get(name)
    schema = w.generator_class().arrow_schema.names
    assert set(w.key_columns) <= set(schema) and w.event_time_column in schema
    assert w.output_columns()[:2] == ("window_start", "window_end")
    sentinel = w.sentinel(after_second=99)
    assert sentinel.column("medallion")[0].as_py() == "sentinel"
    last_end = (99 // w.effective_slide_s) * w.effective_slide_s + w.window_s
    assert sentinel.column("event_time")[0].as_py() / 1000 - w.watermark_delay_s >= last_end
    sql = w.batch_sql("v")
    assert "window(" not in sql and "medallion <> 'sentinel'" in sql  # the oracle enumerates windows itself


def test_rides_columns_are_clean():
    rides = load_rides()
    for col in ("pickup_x", "pickup_y", "dropoff_x", "dropoff_y", "fare", "tip"):
        assert rides.column(col).null_count == 0
    assert pc.min(rides.column("fare")).as_py() > 0
    assert np.unique(rides.column("pickup_x").to_numpy()).size > 10
