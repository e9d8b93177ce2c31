"""Linear Road generator: exact row counts, field ranges, per-vehicle consistency, determinism and resume."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from adaptstream.errors import WorkloadError
from adaptstream.workloads import GENERATORS, build_generator
from adaptstream.workloads.linear_road import FIELDS, MAX_POS, SEGMENT_FT, LinearRoadGeneratorConfig

RATES = [40, 55, 0, 70, 20, 35] * 20  # 120 s with an idle second and ups and downs


def _run(gen, rates, start=0) -> pd.DataFrame:
    return pd.concat([gen.generate(start + i, n).to_pandas() for i, n in enumerate(rates)], ignore_index=True)


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    gen = LinearRoadGeneratorConfig(seed=3, max_trip_segments=3).build()  # short trips: many exits
    return _run(gen, RATES)


def test_registered_and_schema() -> None:
    gen = build_generator("linear_road", seed=1)
    assert "linear_road" in GENERATORS
    assert gen.arrow_schema.names == list(FIELDS)
    assert gen.spark_schema_ddl.startswith("Type INT, Time INT, VID INT")
    assert gen.csv_header() is False


def test_exact_row_counts(trace: pd.DataFrame) -> None:
    counts = trace.groupby("Time").size().reindex(range(len(RATES)), fill_value=0).to_numpy()
    assert counts.tolist() == RATES


def test_field_ranges(trace: pd.DataFrame) -> None:
    assert set(trace.Type.unique()) <= {0, 2, 3, 4}
    rep = trace[trace.Type == 0]
    assert rep.Spd.between(0, 100).all()
    assert rep.Lane.between(0, 4).all() and set(rep.Dir.unique()) <= {0, 1}
    assert rep.XWay.between(0, 255).all()
    assert rep.Seg.between(0, 99).all() and rep.Pos.between(0, MAX_POS).all()
    assert (rep.Seg == rep.Pos // SEGMENT_FT).all()
    assert (rep[["QID", "Sinit", "Send", "DOW", "TOD", "Day"]] == -1).all().all()


def test_query_requests_have_their_fields(trace: pd.DataFrame) -> None:
    req = trace[trace.Type != 0]
    assert len(req) > 0, "1% of 4,400 rows should include requests"
    assert (req.QID >= 0).all() and req.QID.is_unique
    t3, t4 = req[req.Type == 3], req[req.Type == 4]
    assert t3.Day.between(1, 69).all()
    assert (t4.Sinit <= t4.Send).all() and t4.DOW.between(1, 7).all() and t4.TOD.between(1, 1440).all()
    assert (req[["Spd", "Lane", "Dir", "Seg", "Pos"]] == -1).all().all()
    reporters = set(trace[trace.Type == 0][["Time", "VID"]].itertuples(index=False, name=None))
    assert set(req[["Time", "VID"]].itertuples(index=False, name=None)) <= reporters


def test_vehicle_consistency(trace: pd.DataFrame) -> None:
    rep = trace[trace.Type == 0].sort_values(["VID", "Time"])
    g = rep.groupby("VID")
    assert (g.XWay.nunique() == 1).all() and (g.Dir.nunique() == 1).all()
    gaps = g.Time.diff().dropna()
    assert (gaps == 30).all(), "every vehicle reports exactly every 30 s"
    step = g.Pos.diff().dropna() * np.where(rep.Dir == 0, 1, -1)[rep.VID.duplicated(keep="first").to_numpy()]
    assert (step >= 0).all(), "positions never go backwards in the direction of travel"
    first = g.head(1)
    assert (first.Lane == 0).all(), "vehicles enter on the entrance ramp"
    assert (rep[~rep.index.isin(first.index)].Lane != 0).all()
    exits = rep[rep.Lane == 4]
    assert len(exits) > 0, "short trips must produce exits"
    last_time = g.Time.max()
    assert (exits.Time.to_numpy() == last_time.loc[exits.VID].to_numpy()).all(), "lane 4 is the last report"


def test_congestion_slows_traffic() -> None:
    rates = [400] * 60
    free = _run(LinearRoadGeneratorConfig(seed=5, segment_capacity=400.0, accident_rate_per_hour=0).build(), rates)
    jam = _run(LinearRoadGeneratorConfig(seed=5, segment_capacity=10.0, accident_rate_per_hour=0).build(), rates)
    late = lambda d: d[(d.Type == 0) & (d.Time >= 30)].Spd.mean()  # noqa: E731
    assert late(jam) < 0.8 * late(free)


def test_accidents_slow_their_zone() -> None:
    gen = LinearRoadGeneratorConfig(seed=2, accident_rate_per_hour=3600.0, xways=1).build()
    _run(gen, [300] * 40)
    zones = gen._accident_zones()
    assert (zones == 2).any() and (zones == 1).any()
    d = _run(gen, [300] * 30, start=40)
    rep = d[d.Type == 0]
    in_zone = zones[rep.XWay, rep.Dir, rep.Seg] > 0
    assert in_zone.any() and (rep.Spd[in_zone] <= 15).all()


def test_deterministic_and_seed_dependent() -> None:
    a = _run(build_generator("linear_road", seed=9), RATES[:12])
    b = _run(build_generator("linear_road", seed=9), RATES[:12])
    c = _run(build_generator("linear_road", seed=10), RATES[:12])
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)


@pytest.mark.parametrize("cut", [1, 29, 30, 47])
def test_resume_fast_forward_and_state(cut: int) -> None:
    rates = RATES[:60]
    whole = _run(build_generator("linear_road", seed=4), rates)
    ff = build_generator("linear_road", seed=4)
    ff.fast_forward(rates[:cut])
    pd.testing.assert_frame_equal(_run(ff, rates[cut:], start=cut), whole[whole.Time >= cut].reset_index(drop=True))
    first = build_generator("linear_road", seed=4)
    _run(first, rates[:cut])
    state = pickle.loads(pickle.dumps(first.state_dict()))
    restored = build_generator("linear_road", seed=4)
    restored.load_state_dict(state)
    pd.testing.assert_frame_equal(
        _run(restored, rates[cut:], start=cut), whole[whole.Time >= cut].reset_index(drop=True)
    )


def test_out_of_order_second_is_refused() -> None:
    gen = build_generator("linear_road", seed=0)
    with pytest.raises(WorkloadError, match="fast_forward"):
        gen.generate(5, 10)
    gen.generate(0, 10)
    with pytest.raises(WorkloadError):
        gen.generate(0, 10)
    other = build_generator("linear_road", seed=1)
    with pytest.raises(WorkloadError, match="cannot be loaded"):
        other.load_state_dict(gen.state_dict())


def test_expressways_grow_with_rate() -> None:
    gen = LinearRoadGeneratorConfig(seed=0, reports_per_xway=100).build()
    d = _run(gen, [50] * 5 + [450] * 5)
    assert d[d.Time < 5].XWay.max() == 0
    assert d[d.Type == 0].XWay.max() == 4 and gen.active_xways == 5


def test_sentinel_row() -> None:
    gen = build_generator("linear_road", seed=0)
    s = gen.sentinel_table(123).to_pandas()
    assert len(s) == 1 and s.Type[0] == -1 and s.Time[0] == 123
