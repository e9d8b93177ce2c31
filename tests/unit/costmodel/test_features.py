"""Joint operator-resource graph construction, robust scaling, one-hot encoding and npz shards."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cm_handbuilt import HOSTS, join_query, linear_query

from adaptstream.costmodel.features import (
    NUMERIC,
    FeatureStats,
    build_graph,
    graphs_from_npz,
    graphs_to_npz,
    topological_levels,
)
from adaptstream.errors import CostModelError

PLACE_LIN = {"s": "edge", "f1": "edge", "f2": "fog", "a": "fog", "k": "cloud"}


def test_graph_has_operator_and_used_host_nodes_and_three_edge_sets() -> None:
    g = build_graph(linear_query(), HOSTS, {"s": "edge", "f1": "edge", "f2": "edge", "a": "cloud", "k": "cloud"})
    assert g.n_ops == 5
    assert g.n_nodes == 7  # fog runs nothing, so it is not a node
    assert g.type_index["host"].tolist() == [5, 6]
    # placement op -> host: s, f1, f2 on host node 5 (edge); a, k on node 6 (cloud)
    assert g.placement.tolist() == [[0, 1, 2, 3, 4], [5, 5, 5, 6, 6]]
    assert g.flow.tolist() == [[0, 1, 2, 3], [1, 2, 3, 4]]
    assert g.level.tolist() == [0, 1, 2, 3, 4, -1, -1]


def test_levels_of_a_join_are_longest_paths() -> None:
    q = join_query()
    lv = topological_levels([o.id for o in q.operators], q.edges)
    assert lv == {"s1": 0, "s2": 0, "f": 1, "j": 2, "k": 3}
    with pytest.raises(CostModelError, match="cycle"):
        topological_levels(["a", "b"], [("a", "b"), ("b", "a")])


def test_log_transform_and_derived_features() -> None:
    g = build_graph(linear_query(rate=1600, window=2.0), HOSTS, PLACE_LIN)
    src = g.numeric["source"][0]
    assert src[NUMERIC["source"].index("log:event_rate")] == pytest.approx(math.log1p(1600))
    assert src[NUMERIC["source"].index("n_string")] == 2
    agg = g.numeric["window_agg"][0]
    assert agg[NUMERIC["window_agg"].index("slide_ratio")] == pytest.approx(0.5)
    host = g.numeric["host"]
    assert host[:, NUMERIC["host"].index("log:cpu")].tolist() == pytest.approx(
        [math.log1p(100), math.log1p(300), math.log1p(800)]
    )


def test_robust_scaling_centres_on_median_and_divides_by_iqr() -> None:
    graphs = [build_graph(linear_query(rate=r), HOSTS, PLACE_LIN) for r in (100, 200, 400, 800, 1600)]
    stats = FeatureStats.fit(graphs)
    col = NUMERIC["source"].index("log:event_rate")
    logs = np.log1p([100, 200, 400, 800, 1600])
    assert stats.median["source"][col] == pytest.approx(np.median(logs))
    assert stats.iqr["source"][col] == pytest.approx(np.percentile(logs, 75) - np.percentile(logs, 25))
    x = stats.encode("source", graphs[2].numeric["source"], graphs[2].categorical["source"])
    assert x[0, col] == pytest.approx(0.0)  # the median maps to 0
    x_hi = stats.encode("source", graphs[4].numeric["source"], graphs[4].categorical["source"])
    assert x_hi[0, col] == pytest.approx((logs[4] - np.median(logs)) / stats.iqr["source"][col])


def test_one_hot_categoricals_with_unknown_slot() -> None:
    g = build_graph(linear_query(), HOSTS, PLACE_LIN)
    stats = FeatureStats.fit([g])
    x = stats.encode("filter", g.numeric["filter"], g.categorical["filter"])
    d_num = len(NUMERIC["filter"])
    funcs = stats.vocab["filter"][0]
    assert funcs == ["<unk>", "<", "startswith"]
    assert x[0, d_num : d_num + 3].tolist() == [0, 1, 0]
    assert x[1, d_num : d_num + 3].tolist() == [0, 0, 1]
    unseen = g.categorical["filter"].copy()
    unseen[0, 0] = "endswith"  # never seen in training -> the unknown slot
    x2 = stats.encode("filter", g.numeric["filter"], unseen)
    assert x2[0, d_num : d_num + 3].tolist() == [1, 0, 0]
    assert x.shape[1] == stats.dim("filter")


def test_stats_round_trip(tmp_path) -> None:
    g = build_graph(join_query(), HOSTS, {"s1": "edge", "s2": "edge", "f": "fog", "j": "fog", "k": "cloud"})
    stats = FeatureStats.fit([g])
    stats.save(tmp_path / "s.json")
    again = FeatureStats.load(tmp_path / "s.json")
    for t in NUMERIC:
        np.testing.assert_allclose(
            stats.encode(t, g.numeric[t], g.categorical[t]), again.encode(t, g.numeric[t], g.categorical[t])
        )


def test_npz_shard_round_trip(tmp_path) -> None:
    graphs = [
        build_graph(linear_query(rate=300), HOSTS, PLACE_LIN),
        build_graph(join_query(), HOSTS, {"s1": "edge", "s2": "fog", "f": "fog", "j": "cloud", "k": "cloud"}),
    ]
    labels = np.array([[1.0, 2.0, 3.0, 0.0, 1.0], [4.0, 5.0, 6.0, 1.0, 1.0]])
    graphs_to_npz(graphs, tmp_path / "part.npz", extra={"labels": labels})
    back, extra = graphs_from_npz(tmp_path / "part.npz")
    np.testing.assert_array_equal(extra["labels"], labels)
    for a, b in zip(graphs, back, strict=True):
        assert a.n_nodes == b.n_nodes and a.n_ops == b.n_ops
        np.testing.assert_array_equal(a.placement, b.placement)
        np.testing.assert_array_equal(a.flow, b.flow)
        np.testing.assert_array_equal(a.level, b.level)
        for t in NUMERIC:
            np.testing.assert_array_equal(a.numeric[t], b.numeric[t])
            assert a.categorical[t].tolist() == b.categorical[t].tolist()


def test_bad_placement_is_a_clean_error() -> None:
    with pytest.raises(CostModelError, match="lacks operators"):
        build_graph(linear_query(), HOSTS, {"s": "edge"})
    with pytest.raises(CostModelError, match="unknown host"):
        build_graph(linear_query(), HOSTS, {**PLACE_LIN, "k": "mars"})


def test_stats_of_other_features_are_refused(tmp_path) -> None:
    from adaptstream.errors import CostModelError

    g = build_graph(join_query(), HOSTS, {"s1": "edge", "s2": "edge", "f": "fog", "j": "fog", "k": "cloud"})
    d = FeatureStats.fit([g]).to_dict()
    d["median"]["filter"] = d["median"]["filter"][:-1]  # a model saved before a feature was added
    with pytest.raises(CostModelError, match="train it again"):
        FeatureStats.from_dict(d)
