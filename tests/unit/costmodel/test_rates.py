"""Expected operator output rates (the GNN's rate feature): filters, interval joins, grouped windows."""

from __future__ import annotations

import math

import pytest

from adaptstream.costmodel.features import NUMERIC, build_graph, host_usage
from adaptstream.costmodel.model import Host, Operator, QueryGraph
from adaptstream.costmodel.rates import expected_rates, host_loads


def _src(i: str, rate: float) -> Operator:
    return Operator(i, "source", {"event_rate": rate, "tuple_width_out": 3})


def _placed(q: QueryGraph):
    return build_graph(q, [Host("h0", 50, 1024, 10, 1.0, "small")], {"s": "h0", "f": "h0", "k": "h0"})


def _filter_query() -> QueryGraph:
    return QueryGraph(
        "q",
        (_src("s", 400.0), Operator("f", "filter", {"selectivity": 0.25}), Operator("k", "sink", {})),
        (("s", "f"), ("f", "k")),
    )


def test_filter_then_sink_passes_the_selected_share() -> None:
    q = _filter_query()
    assert expected_rates(q) == {"s": 400.0, "f": 100.0, "k": 100.0}


def test_source_rates_are_capped_as_the_testbed_runs_them() -> None:
    q = QueryGraph("q", (_src("s", 1e6), Operator("k", "sink", {})), (("s", "k"),))
    assert expected_rates(q)["k"] == 2000.0


def test_interval_join_and_grouped_window() -> None:
    join = {"selectivity": 0.01, "window_size": 2.0, "window_slide": 2.0, "window_policy": "time"}
    agg = {"selectivity": 0.5, "window_size": 4.0, "window_slide": 1.0, "window_policy": "time"}
    q = QueryGraph(
        "q",
        (
            _src("a", 10.0),
            _src("b", 20.0),
            Operator("j", "window_join", join),
            Operator("g", "window_agg", agg),
            Operator("k", "sink", {}),
        ),
        (("a", "j"), ("b", "j"), ("j", "g"), ("g", "k")),
    )
    r = expected_rates(q)
    assert r["j"] == pytest.approx(10 * 20 * 2 * 2.0 * 0.01)  # +-window interval, 1/selectivity keys
    # Def. 8: selectivity x rows per window groups (0.5 * 8/s * 4 s = 16), each emitted once per 1 s slide
    assert r["g"] == pytest.approx(0.5 * r["j"] * 4.0 / 1.0)
    assert r["k"] == r["g"]


def test_window_with_a_row_has_a_group() -> None:
    """A nearly empty window: the expected groups are the chance that it holds a row, not selectivity x rows."""
    agg = {"selectivity": 0.01, "window_size": 1.0, "window_slide": 1.0, "window_policy": "time"}
    none = {**agg, "group_by_type": "none", "selectivity": 0.5}
    for feats, rate, groups in ((agg, 0.5, 1 - math.exp(-0.5)), (agg, 1000.0, 10.0), (none, 1000.0, 1.0)):
        q = QueryGraph(
            "q",
            (_src("s", rate), Operator("g", "window_agg", feats), Operator("k", "sink", {})),
            (("s", "g"), ("g", "k")),
        )
        assert expected_rates(q)["g"] == pytest.approx(groups)


def test_build_graph_carries_the_rate_feature() -> None:
    q = _filter_query()
    g = _placed(q)
    col = NUMERIC["filter"].index("log:rate_out_est")
    assert g.numeric["filter"][0, col] == pytest.approx(math.log1p(100.0))
    assert g.numeric["sink"][0, NUMERIC["sink"].index("log:rate_out_est")] == pytest.approx(math.log1p(100.0))


def test_throughput_is_learned_around_the_expected_rate() -> None:
    from dataclasses import replace

    import numpy as np

    from adaptstream.costmodel.train import TrainConfig, log_prior

    q = _filter_query()
    g = _placed(q)
    t = TrainConfig(metric="throughput")
    assert log_prior([g], t) == pytest.approx([math.log1p(100.0)])
    assert log_prior([g], replace(t, prior="none")).tolist() == [0.0]
    assert log_prior([g], replace(t, metric="proc_latency_ms")).tolist() == [0.0]  # latencies: no prior
    assert isinstance(log_prior([], t), np.ndarray)


def test_host_loads_add_rates_and_window_rows_of_the_operators_placed_there() -> None:
    join = {"selectivity": 0.01, "window_size": 2.0, "window_slide": 2.0, "window_policy": "time"}
    q = QueryGraph(
        "q",
        (_src("a", 10.0), _src("b", 20.0), Operator("j", "window_join", join), Operator("k", "sink", {})),
        (("a", "j"), ("b", "j"), ("j", "k")),
    )
    r = expected_rates(q)
    loads = host_loads(q, {"a": "h0", "b": "h0", "j": "h1", "k": "h1"}, r)
    assert loads["h0"] == {"rows_in_est": 30.0, "rows_out_est": 30.0, "state_rows_est": 0.0}
    assert loads["h1"]["rows_in_est"] == pytest.approx(30.0 + r["j"])  # the join's two inputs, the sink's one
    assert loads["h1"]["rows_out_est"] == pytest.approx(2 * r["j"])
    assert loads["h1"]["state_rows_est"] == pytest.approx(30.0 * 2.0)  # rows/s in x window seconds


def test_host_nodes_carry_the_load_of_their_operators() -> None:
    hosts = [Host("h0", 50, 1024, 10, 1.0, "small"), Host("h1", 100, 1024, 10, 1.0, "large")]
    q = _filter_query()
    together = build_graph(q, hosts, {"s": "h0", "f": "h0", "k": "h0"})
    apart = build_graph(q, hosts, {"s": "h0", "f": "h1", "k": "h1"})
    col = NUMERIC["host"].index("log:rows_in_est")
    assert together.numeric["host"][:, col] == pytest.approx([math.log1p(400 + 400 + 100)])
    assert apart.numeric["host"][:, col] == pytest.approx([math.log1p(400), math.log1p(400 + 100)])


def test_host_nodes_carry_their_load_per_core_and_per_mb() -> None:
    hosts = [Host("h0", 50, 1024, 10, 1.0, "small"), Host("h1", 200, 2048, 10, 1.0, "large")]
    q = _filter_query()
    g = build_graph(q, hosts, {"s": "h0", "f": "h1", "k": "h1"})
    col = NUMERIC["host"].index("log:rows_in_per_core")
    # 400 rows/s on half a core; 400 + 100 rows/s on two cores
    assert g.numeric["host"][:, col] == pytest.approx([math.log1p(800.0), math.log1p(250.0)])
    assert host_usage({"cpu": 25.0, "ram_mb": 512.0}, {"rows_in_est": 10.0, "state_rows_est": 1024.0}) == {
        "rows_in_per_core": pytest.approx(40.0),
        "state_rows_per_mb": pytest.approx(2.0),
    }
    unknown_cpu = host_usage({"cpu": None, "ram_mb": 512.0}, {"rows_in_est": 1.0, "state_rows_est": 0.0})
    assert math.isnan(unknown_cpu["rows_in_per_core"])
