"""DOT `.query` importer on a hand-written fixture reconstructed from the Costream paper."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptstream.costmodel.dot import parse_dot, read_dot, trace_from_dot
from adaptstream.costmodel.generate import placement_violations
from adaptstream.costmodel.model import Trace
from adaptstream.errors import CostModelError

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "costream_example.query"


def test_fixture_imports_operators_hosts_placement_and_labels() -> None:
    t = read_dot(FIXTURE, origin="example")
    q = t.query
    assert t.trace_id == "costream_example"
    assert q.query_type == "2-way-join+agg"
    assert [s.id for s in q.sources()] == ["spout-1", "spout-2"]
    assert set(q.upstream("join-4")) == {"filter-3", "spout-2"}
    assert q.operator("filter-3").features["filter_function"] == "startswith"
    assert q.operator("filter-3").features["literal_type"] == "str"
    assert q.operator("spout-1").features["data_types"] == "int,str,double,int"
    j = q.operator("join-4").features
    assert (j["window_policy"], j["window_size"], j["window_slide"], j["selectivity"]) == (
        "time",
        2,
        1,
        0.004,
    )
    assert q.operator("agg-5").features["group_by_type"] == "int"
    assert {h.id: h.cpu for h in t.hosts} == {"host-a": 100.0, "host-b": 300.0, "host-c": 800.0}
    assert t.host_of("join-4").category == "medium"
    assert t.labels is not None and t.labels.throughput == 3.9 and t.labels.backpressure is False
    assert t.labels.e2e_latency_ms == 2112.5 and t.labels.origin == "example"
    assert placement_violations(q, t.hosts, t.placement) == []
    assert Trace.from_json(t.to_json()) == t


def test_parser_handles_chains_comments_and_defaults() -> None:
    name, nodes, edges = parse_dot('digraph g { /* c */ node [shape=box]; a -> b -> "c d" [w=1]; a [x="y z"]; }')
    assert name == "g"
    assert nodes["a"] == {"x": "y z"}
    assert [(a, b) for a, b, _ in edges] == [("a", "b"), ("b", "c d")]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("graph", "not a DOT graph"),
        ('digraph g { a [operatorType="spout"]', "closing"),
        ('digraph g { a [operatorType="mapper"]; }', "unknown or missing operatorType"),
        ('digraph g { h [operatorType="host", cpu=1]; }', "lacks"),
    ],
)
def test_errors_are_clear(text: str, needle: str) -> None:
    with pytest.raises(CostModelError, match=needle):
        trace_from_dot(text)


def test_unplaced_operator_is_rejected() -> None:
    text = FIXTURE.read_text().replace('"sink-6" -> "host-c" [type="placement"];', "")
    with pytest.raises(CostModelError, match=r"without a host.*sink-6"):
        trace_from_dot(text)
