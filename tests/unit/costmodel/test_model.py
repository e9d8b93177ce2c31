"""Graph construction, validation errors and JSON(-lines) round trips of the cost-model data model."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptstream.costmodel.model import Host, Labels, Operator, QueryGraph, Trace, read_traces, write_traces
from adaptstream.errors import CostModelError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel"


def _ops(*spec: tuple[str, str]) -> tuple[Operator, ...]:
    return tuple(Operator(i, k, {}) for i, k in spec)  # type: ignore[arg-type]


def _join_query() -> QueryGraph:
    return QueryGraph(
        "q",
        _ops(
            ("s1", "source"),
            ("s2", "source"),
            ("f", "filter"),
            ("j", "window_join"),
            ("a", "window_agg"),
            ("k", "sink"),
        ),
        (("s1", "f"), ("f", "j"), ("s2", "j"), ("j", "a"), ("a", "k")),
    )


def test_navigation_and_topological_order() -> None:
    q = _join_query()
    order = [op.id for op in q.topological_order()]
    for a, b in q.edges:
        assert order.index(a) < order.index(b)
    assert [s.id for s in q.sources()] == ["s1", "s2"]
    assert q.sink().id == "k"
    assert q.upstream("j") == ("f", "s2")
    assert q.downstream("s1") == ("f",)
    assert q.query_type == "2-way-join+agg"
    assert q.n_filters == 1


def test_query_types() -> None:
    lin = QueryGraph("l", _ops(("s", "source"), ("f", "filter"), ("k", "sink")), (("s", "f"), ("f", "k")))
    assert lin.query_type == "linear"


@pytest.mark.parametrize(
    ("ops", "edges", "needle"),
    [
        ((("s", "source"), ("f", "filter")), (("s", "f"),), "exactly one sink"),
        (
            (("s", "source"), ("t", "source"), ("f", "filter"), ("k", "sink")),
            (("s", "f"), ("t", "f"), ("f", "k")),
            "1 input",
        ),
        ((("s", "source"), ("k", "sink")), (("s", "x"),), "unknown operator 'x'"),
        ((("s", "source"), ("s", "sink")), (), "duplicate operator ids"),
        ((("s", "source"), ("j", "window_join"), ("k", "sink")), (("s", "j"), ("j", "k")), "needs 2 inputs"),
        ((("s", "source"), ("f", "filter"), ("k", "sink")), (("s", "k"),), "has no input"),
        ((("f", "filter"), ("k", "sink")), (("f", "k"),), "no source"),
    ],
)
def test_invalid_graphs_raise(ops, edges, needle) -> None:
    with pytest.raises(CostModelError, match=needle):
        QueryGraph("bad", _ops(*ops), edges)


def test_cycle_detected() -> None:
    # a join fed back by its own output through filters: in-degree rules hold, only the cycle fails
    ops = _ops(("s", "source"), ("j", "window_join"), ("f", "filter"), ("g", "filter"), ("k", "sink"))
    with pytest.raises(CostModelError, match="cycle"):
        QueryGraph("cyc", ops, (("s", "j"), ("g", "j"), ("j", "f"), ("f", "g"), ("f", "k")))


def test_unknown_operator_kind() -> None:
    with pytest.raises(CostModelError, match="unknown kind"):
        Operator("x", "map", {})  # type: ignore[arg-type]


def test_host_validation() -> None:
    with pytest.raises(CostModelError, match="cpu must be > 0"):
        Host("h", cpu=0, ram_mb=1, bandwidth_mbits=1, latency_ms=1)
    with pytest.raises(CostModelError, match="category"):
        Host("h", cpu=1, ram_mb=1, bandwidth_mbits=1, latency_ms=1, category="huge")
    assert Host("h", 1, 1, 1, 1, "large").category_rank == 2


def test_trace_validation_errors() -> None:
    q = _join_query()
    hosts = (Host("h1", 100, 1000, 100, 1), Host("h2", 200, 1000, 100, 1))
    full = {op.id: "h1" for op in q.operators}
    with pytest.raises(CostModelError, match="unknown host 'h9'"):
        Trace("t", q, hosts, {**full, "j": "h9"})
    partial = dict(full)
    del partial["a"]
    with pytest.raises(CostModelError, match=r"without a host.*\['a'\]"):
        Trace("t", q, hosts, partial)
    with pytest.raises(CostModelError, match="unknown operators"):
        Trace("t", q, hosts, {**full, "zz": "h1"})
    with pytest.raises(CostModelError, match="duplicate host ids"):
        Trace("t", q, (hosts[0], hosts[0]), full)


def test_labels_origin_checked() -> None:
    with pytest.raises(CostModelError, match="origin"):
        Labels(1.0, 1.0, 1.0, False, True, "guessed")


def test_dict_round_trip_and_immutability() -> None:
    q = _join_query()
    hosts = (Host("h1", 100, 1000, 100, 1, "small"), Host("h2", 800, 32000, 10000, 1, "large"))
    t = Trace(
        "t1",
        q,
        hosts,
        {op.id: "h2" for op in q.operators},
        Labels(10.0, 5.0, 1.0, True, False, "real"),
        {"seed": 7},
    )
    back = Trace.from_dict(t.to_dict())
    assert back == t
    assert Trace.from_json(t.to_json()).to_dict() == t.to_dict()
    with pytest.raises(TypeError):
        t.placement["s1"] = "h1"  # type: ignore[index]
    assert t.host_of("s1").id == "h2"


def test_fixture_jsonl_round_trip(tmp_path: Path) -> None:
    traces = list(read_traces(FIXTURES / "example_traces.jsonl"))
    assert {t.query.query_type for t in traces} == {"linear", "2-way-join+agg", "3-way-join"}
    out = tmp_path / "rt.jsonl"
    assert write_traces(out, traces) == len(traces)
    again = list(read_traces(out))
    assert [t.to_dict() for t in again] == [t.to_dict() for t in traces]


def test_read_traces_reports_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    good = (FIXTURES / "example_traces.jsonl").read_text().splitlines()[0]
    bad.write_text(good + "\n{not json\n")
    with pytest.raises(CostModelError, match=r"bad.jsonl:2"):
        list(read_traces(bad))
    with pytest.raises(CostModelError, match="does not exist"):
        list(read_traces(tmp_path / "nope.jsonl"))
