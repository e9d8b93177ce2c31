"""Mechanics of the simulated edge-cloud testbed (each test compares two runs that differ in one factor)."""

from __future__ import annotations

import itertools

import pytest

from adaptstream.costmodel.model import Host, Operator, QueryGraph, Trace
from adaptstream_bench.costmodel.simulator import SimConfig, Simulator

pytest.importorskip("numba")  # the pure-Python fallback is correct but far too slow for these runs

SIM = Simulator(SimConfig(duration_s=20.0, warmup_s=2.0, cost_scale=20.0))
BIG = Host("big", 800, 32000, 10000, 1, "large")


def _linear(rate: float, n_filters: int = 2, width: int = 8) -> QueryGraph:
    ops = [Operator("s", "source", {"event_rate": rate, "tuple_width_out": width})]
    ops += [
        Operator(
            f"f{i}",
            "filter",
            {
                "filter_function": "startswith",
                "literal_type": "str",
                "selectivity": 1.0,
                "tuple_width_in": width,
            },
        )
        for i in range(n_filters)
    ]
    ops.append(Operator("k", "sink", {}))
    ids = [o.id for o in ops]
    return QueryGraph("lin", tuple(ops), tuple(itertools.pairwise(ids)))


@pytest.mark.slow
def test_more_cpu_is_not_slower() -> None:
    q = _linear(25600)
    res = {}
    for cpu in (50, 200, 800):
        h = Host("a", cpu, 8000, 10000, 1, "small")
        t = Trace("t", q, (h, BIG), {"s": "a", "f0": "a", "f1": "a", "k": "big"})
        res[cpu] = SIM.run(t, seed=3).labels
    assert res[50].backpressure and not res[800].backpressure
    assert res[800].proc_latency_ms < res[200].proc_latency_ms * 1.1 < res[50].proc_latency_ms
    assert res[800].throughput > res[50].throughput


def _two_branch(rate: float) -> QueryGraph:
    ops = (
        Operator("s1", "source", {"event_rate": rate, "tuple_width_out": 6}),
        Operator("s2", "source", {"event_rate": rate, "tuple_width_out": 6}),
        Operator("f1", "filter", {"filter_function": "<", "selectivity": 0.01}),
        Operator("f2", "filter", {"filter_function": "<", "selectivity": 0.01}),
        Operator(
            "j",
            "window_join",
            {
                "selectivity": 0.01,
                "window_policy": "time",
                "window_size": 1.0,
                "window_slide": 1.0,
                "window_type": "tumbling",
            },
        ),
        Operator("k", "sink", {}),
    )
    return QueryGraph("two", ops, (("s1", "f1"), ("s2", "f2"), ("f1", "j"), ("f2", "j"), ("j", "k")))


def test_co_located_heavy_operators_slow_each_other() -> None:
    q = _two_branch(3000)  # each branch needs ~70% of a 50% host alone: together they overload it
    a, b = Host("a", 50, 8000, 10000, 1, "small"), Host("b", 50, 8000, 10000, 1, "small")
    together = Trace("t", q, (a, b, BIG), {"s1": "a", "f1": "a", "s2": "a", "f2": "a", "j": "big", "k": "big"})
    apart = Trace("t", q, (a, b, BIG), {"s1": "a", "f1": "a", "s2": "b", "f2": "b", "j": "big", "k": "big"})
    lt, la = SIM.run(together, seed=1), SIM.run(apart, seed=1)
    assert lt.details["ingest_ratio_2nd_half"] < 0.9 < la.details["ingest_ratio_2nd_half"]
    assert lt.labels.backpressure and not la.labels.backpressure
    assert lt.labels.e2e_latency_ms > 2 * la.labels.e2e_latency_ms


def _join(sel: float, size: float) -> QueryGraph:
    ops = (
        Operator("s1", "source", {"event_rate": 2000, "tuple_width_out": 10}),
        Operator("s2", "source", {"event_rate": 2000, "tuple_width_out": 10}),
        Operator(
            "j",
            "window_join",
            {
                "selectivity": sel,
                "window_policy": "time",
                "window_size": size,
                "window_slide": size,
                "window_type": "tumbling",
                "tuple_width_out": 20,
            },
        ),
        Operator("k", "sink", {}),
    )
    return QueryGraph("j", ops, (("s1", "j"), ("s2", "j"), ("j", "k")))


def test_tiny_ram_and_big_window_fails() -> None:
    q = _join(sel=0.02, size=4.0)
    for ram, ok in ((1000, False), (32000, True)):
        h = Host("m", 800, ram, 10000, 1, "large")
        r = SIM.run(Trace("t", q, (h,), {"s1": "m", "s2": "m", "j": "m", "k": "m"}), seed=2)
        assert r.labels.success is ok, (ram, r.details)
        if not ok:
            assert r.details["failure_reason"] == "oom"
    assert r.details["max_mem_fraction"] > 0.0


def test_low_bandwidth_raises_latency() -> None:
    q = _linear(25600, n_filters=1, width=10)
    lat = {}
    for bw in (25, 10000):
        a = Host("a", 800, 8000, bw, 1, "small")
        t = Trace("t", q, (a, BIG), {"s": "a", "f0": "a", "k": "big"})
        lat[bw] = SIM.run(t, seed=4).labels.e2e_latency_ms
    assert lat[25] > 2 * lat[10000]


def test_network_latency_adds_up() -> None:
    q = _linear(400, n_filters=1)
    le = {}
    for ms in (1, 160):
        a = Host("a", 800, 8000, 10000, ms, "small")
        le[ms] = SIM.run(Trace("t", q, (a, BIG), {"s": "a", "f0": "a", "k": "big"}), seed=4).labels
    assert le[160].e2e_latency_ms - le[1].e2e_latency_ms > 100


def test_selectivity_thins_flow_and_no_output_fails() -> None:
    q_hi = _linear(1000, n_filters=1)
    t = Trace("t", q_hi, (BIG,), {"s": "big", "f0": "big", "k": "big"})
    full = SIM.run(t, seed=0).labels
    assert full.throughput == pytest.approx(1000, rel=0.2)
    ops = list(q_hi.operators)
    ops[1] = Operator("f0", "filter", {"filter_function": "<", "selectivity": 0.0})
    q0 = QueryGraph("z", tuple(ops), q_hi.edges)
    none = SIM.run(Trace("t", q0, (BIG,), {"s": "big", "f0": "big", "k": "big"}), seed=0)
    assert none.labels.success is False and none.details["failure_reason"] == "no_output"
    assert none.labels.e2e_latency_ms is None


def test_window_latency_counts_from_oldest_tuple() -> None:
    q = _join(sel=0.001, size=2.0)
    r = SIM.run(Trace("t", q, (BIG,), {"s1": "big", "s2": "big", "j": "big", "k": "big"}), seed=0).labels
    assert r.success and 1500 < r.e2e_latency_ms < 4000  # a 2 s tumbling window fires 2 s after its oldest


def test_deterministic_with_seed_and_origin_simulated() -> None:
    q = _two_branch(1000)
    t = Trace("t", q, (BIG,), {o.id: "big" for o in q.operators})
    a, b, c = SIM.run(t, seed=9), SIM.run(t, seed=9), SIM.run(t, seed=10)
    assert a.labels == b.labels and a.details == b.details
    assert a.labels != c.labels
    assert a.labels.origin == "simulated"
