"""Generators keep Table II ranges; placement enumeration keeps Fig. 5's rules (property tests)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptstream.costmodel import generate as g
from adaptstream.costmodel.model import Host, Operator, QueryGraph


def _paths(q: QueryGraph) -> list[list[str]]:
    out: list[list[str]] = []

    def walk(path: list[str]) -> None:
        nxt = q.downstream(path[-1])
        if not nxt:
            out.append(path)
        for d in nxt:
            walk([*path, d])

    for s in q.sources():
        walk([s.id])
    return out


def _obeys_rules(q: QueryGraph, hosts, placement) -> bool:
    rank = {h.id: h.category_rank for h in hosts}
    for path in _paths(q):
        seq = [placement[o] for o in path]
        if any(rank[b] < rank[a] for a, b in itertools.pairwise(seq)):
            return False
        left: set[str] = set()
        for a, b in itertools.pairwise(seq):
            if a != b:
                left.add(a)
                if b in left:
                    return False
    return True


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_sampled_and_enumerated_placements_obey_fig5(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = g.sample_trace(rng, str(seed))
    assert _obeys_rules(t.query, t.hosts, t.placement)
    assert g.placement_violations(t.query, t.hosts, t.placement) == []
    for p in g.enumerate_placements(t.query, t.hosts, limit=30, rng=rng):
        assert _obeys_rules(t.query, t.hosts, p)
    for p in g.enumerate_placements(t.query, t.hosts, limit=30):
        assert _obeys_rules(t.query, t.hosts, p)
    init = g.initial_placement(t.query, t.hosts)
    assert _obeys_rules(t.query, t.hosts, init)
    assert init[t.query.sink().id] == max(t.hosts, key=lambda h: (h.category_rank, h.cpu, h.ram_mb, h.id)).id


def _tiny() -> tuple[QueryGraph, tuple[Host, ...]]:
    q = QueryGraph(
        "t",
        (
            Operator("a", "source", {}),
            Operator("b", "source", {}),
            Operator("j", "window_join", {}),
            Operator("k", "sink", {}),
        ),
        (("a", "j"), ("b", "j"), ("j", "k")),
    )
    hosts = (
        Host("s1", 100, 1000, 25, 40, "small"),
        Host("s2", 50, 1000, 25, 80, "small"),
        Host("m", 300, 4000, 400, 10, "medium"),
        Host("l", 800, 32000, 10000, 1, "large"),
    )
    return q, hosts


def test_exhaustive_enumeration_equals_brute_force() -> None:
    q, hosts = _tiny()
    ids = [op.id for op in q.operators]
    brute = []
    for combo in itertools.product([h.id for h in hosts], repeat=len(ids)):
        p = dict(zip(ids, combo, strict=True))
        if _obeys_rules(q, hosts, p):
            brute.append(p)
    got = g.enumerate_placements(q, hosts, limit=10_000)
    assert sorted(map(sorted, (p.items() for p in got))) == sorted(map(sorted, (p.items() for p in brute)))
    assert 0 < len(got) < len(hosts) ** len(ids)  # the rules prune something


def test_violations_are_reported() -> None:
    q, hosts = _tiny()
    down = {"a": "l", "b": "l", "j": "s1", "k": "l"}
    msgs = g.placement_violations(q, hosts, down)
    assert any("rule 2" in m for m in msgs)
    # same category, but data leaves s1 for s2 and comes back: rule 3
    back = {"a": "s1", "b": "s2", "j": "s2", "k": "s1"}
    assert any("rule 3" in m for m in g.placement_violations(q, hosts, back))
    assert g.enumerate_placements(q, hosts, limit=0) == []


def test_random_enumeration_is_seeded_and_distinct() -> None:
    q, hosts = _tiny()
    a = g.enumerate_placements(q, hosts, limit=20, rng=np.random.default_rng(5))
    b = g.enumerate_placements(q, hosts, limit=20, rng=np.random.default_rng(5))
    assert a == b
    assert len({tuple(sorted(p.items())) for p in a}) == len(a)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_query_generator_respects_table2(seed: int) -> None:
    q = g.QueryGenerator().sample(np.random.default_rng(seed))
    shape = q.query_type.replace("+agg", "")
    assert shape in g.EVENT_RATE
    assert 1 <= q.n_filters <= 4
    for op in q.operators:
        f = op.features
        if op.kind == "source":
            assert f["event_rate"] in g.EVENT_RATE[shape]
            assert g.TUPLE_WIDTH[0] <= f["tuple_width_out"] <= g.TUPLE_WIDTH[1]
            assert len(str(f["data_types"]).split(",")) == f["tuple_width_out"]
        if op.kind == "filter":
            assert f["filter_function"] in g.FILTER_FUNCTIONS
            assert 0 < f["selectivity"] <= 1
        if op.kind in ("window_agg", "window_join"):
            sizes = g.WINDOW_SIZE_COUNT if f["window_policy"] == "count" else g.WINDOW_SIZE_TIME
            assert f["window_size"] in sizes
            if f["window_type"] == "tumbling":
                assert f["window_slide"] == f["window_size"]
            else:
                assert 0.2 * f["window_size"] <= f["window_slide"] <= 0.8 * f["window_size"] + 1
        if op.kind == "window_agg":
            assert f["agg_function"] in g.AGG_FUNCTIONS
            assert f["group_by_type"] in g.GROUP_BY_TYPES


def test_workload_mix_close_to_sec6() -> None:
    rng = np.random.default_rng(0)
    qs = [g.QueryGenerator().sample(rng) for _ in range(2000)]
    share = {s: np.mean([q.query_type.startswith(s) for q in qs]) for s, _ in g.QUERY_SHAPES}
    for s, p in g.QUERY_SHAPES:
        assert abs(share[s] - p) < 0.04, (s, share[s])
    assert abs(np.mean(["+agg" in q.query_type for q in qs]) - 0.5) < 0.04


def test_hardware_categories_overlap_and_table2() -> None:
    rng = np.random.default_rng(1)
    hosts = [h for _ in range(300) for h in g.HardwareGenerator().sample(rng)]
    for h in hosts:
        assert h.cpu in g.CPU_PCT and h.ram_mb in g.RAM_MB
        assert h.bandwidth_mbits in g.BANDWIDTH_MBITS and h.latency_ms in g.LATENCY_MS
    cpus = {c: {h.cpu for h in hosts if h.category == c} for c in ("small", "medium", "large")}
    assert cpus["small"] & cpus["medium"] and cpus["medium"] & cpus["large"]
