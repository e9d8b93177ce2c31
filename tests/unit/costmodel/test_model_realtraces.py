"""Real-trace configurations map to valid graphs; the recorded real traces are real and single-host."""

from __future__ import annotations

from pathlib import Path

from adaptstream.costmodel.model import read_traces
from adaptstream_bench.costmodel.realtraces import draw_queries, query_graph

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "real_traces.jsonl"


def test_drawn_configurations_build_valid_graphs() -> None:
    qs = draw_queries(16, seed=0)
    assert draw_queries(16, seed=0) == qs
    assert {q.master for q in qs} == {"local[1]", "local[2]"}
    assert {q.driver_memory_mb for q in qs} == {1024, 2048}
    for rq in qs:
        g = query_graph(rq)
        assert g.query_type.replace("+agg", "") == rq.shape
        assert g.n_filters == rq.n_filters
        assert all(op.features["event_rate"] == rq.rate for op in g.sources())


def test_recorded_real_traces_are_real_and_single_host() -> None:
    traces = list(read_traces(REAL))
    assert traces
    for t in traces:
        assert t.labels is not None and t.labels.origin == "real"
        assert len(t.hosts) == 1 and set(t.placement.values()) == {t.hosts[0].id}
        assert t.hosts[0].cpu in (100.0, 200.0)
        assert "loadavg_1m_before" in t.meta
