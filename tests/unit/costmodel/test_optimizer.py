"""Placement optimizer: candidates obey Fig. 5, predicted failures/backpressure are dropped, target respected.

The predictor here is a deliberately simple, deterministic FAKE (FakeRulePredictor) so the expected choice can
be computed by hand; it has nothing to do with a trained model.
"""

from __future__ import annotations

import numpy as np
import pytest
from cm_handbuilt import HOSTS, join_query, linear_query

from adaptstream.costmodel.generate import placement_violations
from adaptstream.costmodel.optimizer import PlacementOptimizer, parse_target
from adaptstream.errors import CostModelError


class FakeRulePredictor:
    """Fake: Lp = sum of host latencies of the operators; fails when the sink is on the edge host or when all
    operators share one host (so the lowest-Lp candidate, everything on the cloud, is infeasible);
    backpressure
    when the window aggregate runs on the edge host; throughput = number of distinct hosts used."""

    def __init__(self) -> None:
        self.calls = 0

    def predict_placements(self, query, hosts, placements):
        self.calls += 1
        lat = {h.id: h.latency_ms for h in hosts}
        sink = query.sink().id
        aggs = [o.id for o in query.operators if o.kind == "window_agg"]
        lp = np.array([sum(lat[p[o.id]] for o in query.operators) for p in placements], dtype=float)
        return {
            "proc_latency_ms": lp,
            "e2e_latency_ms": lp * 2,
            "throughput": np.array([len(set(p.values())) for p in placements], dtype=float),
            "success": np.array([p[sink] != "edge" and len(set(p.values())) > 1 for p in placements]),
            "backpressure": np.array([any(p[a] == "edge" for a in aggs) for p in placements]),
        }


def _expected_lp(q, p) -> float:
    lat = {h.id: h.latency_ms for h in HOSTS}
    return sum(lat[p[o.id]] for o in q.operators)


@pytest.mark.parametrize("query", [linear_query(), join_query()], ids=["linear", "join"])
def test_candidates_obey_placement_rules(query) -> None:
    opt = PlacementOptimizer(FakeRulePredictor(), max_candidates=50, seed=1)
    cands, rejected = opt.candidates(query, HOSTS)
    assert len(cands) > 5
    assert rejected == 0
    for p in cands:
        assert placement_violations(query, HOSTS, p) == []
    keys = {tuple(sorted(p.items())) for p in cands}
    assert len(keys) == len(cands)  # distinct


def test_drops_predicted_failures_and_backpressure_and_minimises_target() -> None:
    q = linear_query()
    fake = FakeRulePredictor()
    d = PlacementOptimizer(fake, target="proc-latency", max_candidates=80, seed=0).optimize(q, HOSTS)
    assert fake.calls == 1
    assert d.fallback == ""
    chosen = d.chosen.placement
    assert chosen["k"] != "edge" and chosen["a"] != "edge"
    assert d.chosen.feasible
    feasible = [c for c in d.ranked if c.feasible]
    assert d.n_feasible == len(feasible) < d.n_candidates  # some candidates really were filtered
    assert d.chosen.predictions["proc_latency_ms"] == min(_expected_lp(q, c.placement) for c in feasible)
    # an infeasible candidate with an even lower Lp exists and was NOT chosen
    assert min(_expected_lp(q, c.placement) for c in d.ranked) < d.chosen.predictions["proc_latency_ms"]


def test_throughput_target_maximises() -> None:
    d = PlacementOptimizer(FakeRulePredictor(), target="throughput", max_candidates=80).optimize(linear_query(), HOSTS)
    best = max(c.predictions["throughput"] for c in d.ranked if c.feasible)
    assert d.chosen.predictions["throughput"] == best


def test_all_infeasible_is_reported_as_fallback() -> None:
    class AlwaysFails(FakeRulePredictor):
        def predict_placements(self, query, hosts, placements):
            out = super().predict_placements(query, hosts, placements)
            out["success"] = np.zeros(len(placements), dtype=bool)
            return out

    d = PlacementOptimizer(AlwaysFails(), max_candidates=20).optimize(linear_query(), HOSTS)
    assert d.n_feasible == 0
    assert "fail" in d.fallback


def test_bad_target_is_a_clean_error() -> None:
    assert parse_target("Lp") == ("proc-latency", "proc_latency_ms")
    with pytest.raises(CostModelError, match="valid choices"):
        PlacementOptimizer(FakeRulePredictor(), target="cost")
