"""Flat-vector baseline: the vector's contents, and LightGBM training/prediction/persistence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cm_handbuilt import HOSTS, join_query, linear_query

from adaptstream.costmodel.features import build_graph
from adaptstream.costmodel.flat import FLAT_FEATURES, FlatVectorModel, flat_vector
from adaptstream.costmodel.model import Host, read_traces
from adaptstream.costmodel.train import GraphDataset

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "train_sample.jsonl"


def _v(g) -> dict[str, float]:
    return dict(zip(FLAT_FEATURES, flat_vector(g), strict=True))


def test_counts_selectivities_hosts_rates_windows() -> None:
    g = build_graph(
        linear_query(rate=1600, sel1=0.5, window=2.0),
        HOSTS,
        {"s": "edge", "f1": "edge", "f2": "fog", "a": "fog", "k": "cloud"},
    )
    v = _v(g)
    assert (v["count_source"], v["count_filter"], v["count_window_agg"], v["count_sink"]) == (1, 2, 1, 1)
    assert v["sel_filter"] == pytest.approx((0.5 + 0.3) / 2)
    assert v["n_hosts"] == 3
    assert v["log_rate_sum"] == pytest.approx(np.log1p(1600))
    assert v["win_size_mean_time"] == pytest.approx(2.0)
    assert np.isnan(v["win_size_mean_count"])
    assert (v["n_sliding"], v["n_time_policy"]) == (1, 1)
    j = _v(build_graph(join_query(), HOSTS, {"s1": "edge", "s2": "edge", "f": "fog", "j": "fog", "k": "cloud"}))
    assert j["log_rate_sum"] == pytest.approx(np.log1p(1250))
    assert j["win_size_mean_count"] == pytest.approx(80)


def test_flat_vector_ignores_hardware_beyond_the_host_count() -> None:
    place = {"s": "edge", "f1": "edge", "f2": "fog", "a": "fog", "k": "cloud"}
    weak = (Host("edge", 50, 1000, 25, 160, "small"), *HOSTS[1:])
    a = flat_vector(build_graph(linear_query(), HOSTS, place))
    b = flat_vector(build_graph(linear_query(), weak, place))
    np.testing.assert_array_equal(a, b)


def test_lightgbm_baseline_fits_predicts_and_persists(tmp_path) -> None:
    ds = GraphDataset.from_traces(read_traces(SAMPLE))
    train, val, test = ds.subset(range(300)), ds.subset(range(300, 350)), ds.subset(range(350, 400))
    model = FlatVectorModel.fit(train, val, metrics=["T", "success"], n_estimators=50, threads=1)
    pred = model.predict_graphs(test.graphs)
    assert set(pred) == {"throughput", "success"}
    assert pred["throughput"].shape == (50,) and (pred["throughput"] >= 0).all()
    assert pred["success"].dtype == bool
    model.save(tmp_path / "flat")
    again = FlatVectorModel.load(tmp_path / "flat")
    np.testing.assert_allclose(again.predict_graphs(test.graphs)["throughput"], pred["throughput"])
