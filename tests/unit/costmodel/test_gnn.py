"""Message-passing ORDER of the Costream GNN on hand-built queries, and batching correctness.

Each order test runs a contrasting configuration on the same inputs to show the assertion can fail: the
property holds for the ordered scheme and does not hold where the scheme cannot provide it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cm_handbuilt import HOSTS, join_query, linear_query

from adaptstream.costmodel.features import FeatureStats, build_graph
from adaptstream.costmodel.gnn import CostGNN, GNNConfig, collate, encode_graph

# The source is alone on the edge host and no host carries both an operator downstream of the source and the
# source itself, so the source's state can reach the sink only along the data flow, never through a shared
# host.
PLACE = {"s": "edge", "f1": "fog", "f2": "fog", "a": "cloud", "k": "cloud"}
# s and f1 share the edge host (for the ops -> hosts -> ops test)
PLACE_SHARED = {"s": "edge", "f1": "edge", "f2": "fog", "a": "cloud", "k": "cloud"}
SINK, SOURCE, F1 = 4, 0, 1
CLOUD = 7  # host nodes follow the operators in order of first use: edge=5, fog=6, cloud=7


def _states(config: GNNConfig, queries, placement=PLACE, seed: int = 0) -> list[torch.Tensor]:
    graphs = [build_graph(q, HOSTS, placement) for q in queries]
    stats = FeatureStats.fit([build_graph(linear_query(rate=r), HOSTS, PLACE) for r in (100, 1000, 10000)])
    torch.manual_seed(seed)
    model = CostGNN(stats, config)
    model.eval()
    out = []
    with torch.no_grad():
        for g in graphs:
            out.append(model.node_states(collate([encode_graph(g, stats)], stats)))
    return out


def _changed(a: torch.Tensor, b: torch.Tensor, node: int) -> bool:
    return not torch.allclose(a[node], b[node], atol=1e-7)


def _source_width(width: int):
    """linear_query with another source tuple width: a source-only change (the expected-rate feature that every
    operator carries does not depend on it, so only message passing can carry it downstream)."""
    from dataclasses import replace

    q = linear_query()
    ops = tuple(
        replace(o, features={**o.features, "tuple_width_out": width}) if o.kind == "source" else o for o in q.operators
    )
    return replace(q, operators=ops)


def test_source_change_reaches_sink_in_one_ordered_pass() -> None:
    lo, hi = _states(GNNConfig(hidden=16), [_source_width(2), _source_width(60)])
    assert _changed(lo, hi, SINK)
    # contrast: the sink's own host state does not carry the source (it is only on the data-flow path)
    assert not _changed(lo, hi, CLOUD)


def test_one_traditional_round_does_not_reach_the_sink() -> None:
    # contrast: one synchronous round moves information one hop only; the sink is 4 hops from the source
    lo, hi = _states(
        GNNConfig(hidden=16, message_passing="traditional", traditional_rounds=1),
        [_source_width(2), _source_width(60)],
    )
    assert not _changed(lo, hi, SINK)
    assert _changed(lo, hi, F1)  # the direct neighbour does change


def test_ops_to_hosts_happens_before_hosts_to_ops() -> None:
    # f1 is downstream of s, so the data-flow pass never carries f1's features to s. s can only learn about
    # f1 via their shared host: f1 -> edge host (step 1) and then edge host -> s (step 2). That needs step 1
    # to run before step 2.
    qs = [linear_query(sel1=0.9), linear_query(sel1=0.01)]
    a, b = _states(GNNConfig(hidden=16), qs, PLACE_SHARED)
    assert _changed(a, b, SOURCE)
    # contrast: without host nodes the same change cannot reach the source
    a2, b2 = _states(GNNConfig(hidden=16, hardware="no_hosts"), [linear_query(sel1=0.9), linear_query(sel1=0.01)])
    assert not _changed(a2, b2, SOURCE)


def test_hardware_features_matter_only_when_enabled() -> None:
    fast = dict(PLACE)
    slow_hosts = (HOSTS[0].__class__("edge", 50, 1000, 25, 160, "small"), *HOSTS[1:])
    stats = FeatureStats.fit([build_graph(linear_query(), HOSTS, fast)])
    for mode, expect_change in (("full", True), ("no_hw_features", False)):
        torch.manual_seed(0)
        model = CostGNN(stats, GNNConfig(hidden=16, hardware=mode)).eval()
        with torch.no_grad():
            a = model(collate([encode_graph(build_graph(linear_query(), HOSTS, fast), stats)], stats))
            b = model(collate([encode_graph(build_graph(linear_query(), slow_hosts, fast), stats)], stats))
        assert (not torch.allclose(a, b)) == expect_change, mode


@pytest.mark.parametrize("scheme", ["ordered", "traditional"])
def test_batched_prediction_equals_one_graph_at_a_time(scheme: str) -> None:
    graphs = [
        build_graph(linear_query(rate=300), HOSTS, PLACE),
        build_graph(join_query(), HOSTS, {"s1": "edge", "s2": "fog", "f": "fog", "j": "cloud", "k": "cloud"}),
        build_graph(linear_query(rate=9000, window=8), HOSTS, {**PLACE, "f2": "fog", "a": "cloud"}),
    ]
    stats = FeatureStats.fit(graphs)
    torch.manual_seed(1)
    model = CostGNN(stats, GNNConfig(hidden=16, message_passing=scheme)).eval()
    enc = [encode_graph(g, stats) for g in graphs]
    with torch.no_grad():
        together = model(collate(enc, stats)).numpy()
        alone = np.array([float(model(collate([e], stats))[0]) for e in enc])
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)
    assert len(set(np.round(alone, 6))) == 3  # the graphs are told apart
