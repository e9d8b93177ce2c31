"""Hand-built queries and hosts shared by the cost-model tests (no randomness)."""

from __future__ import annotations

from adaptstream.costmodel.model import Host, Operator, QueryGraph

HOSTS = (
    Host("edge", cpu=100, ram_mb=2000, bandwidth_mbits=50, latency_ms=40, category="small"),
    Host("fog", cpu=300, ram_mb=8000, bandwidth_mbits=800, latency_ms=10, category="medium"),
    Host("cloud", cpu=800, ram_mb=32000, bandwidth_mbits=10000, latency_ms=1, category="large"),
)


def linear_query(rate: float = 1600, sel1: float = 0.5, window: float = 2.0) -> QueryGraph:
    """source -> filter -> filter -> window_agg -> sink."""
    return QueryGraph(
        "lin",
        (
            Operator(
                "s",
                "source",
                {"event_rate": rate, "tuple_width_out": 5, "data_types": "int,int,str,double,str"},
            ),
            Operator(
                "f1",
                "filter",
                {
                    "filter_function": "<",
                    "literal_type": "int",
                    "selectivity": sel1,
                    "tuple_width_in": 5,
                    "tuple_width_out": 5,
                },
            ),
            Operator(
                "f2",
                "filter",
                {
                    "filter_function": "startswith",
                    "literal_type": "str",
                    "selectivity": 0.3,
                    "tuple_width_in": 5,
                    "tuple_width_out": 5,
                },
            ),
            Operator(
                "a",
                "window_agg",
                {
                    "agg_function": "avg",
                    "agg_type": "double",
                    "group_by_type": "int",
                    "selectivity": 0.1,
                    "tuple_width_in": 5,
                    "tuple_width_out": 2,
                    "window_type": "sliding",
                    "window_policy": "time",
                    "window_size": window,
                    "window_slide": window / 2,
                },
            ),
            Operator("k", "sink", {"tuple_width_in": 2, "tuple_width_out": 2}),
        ),
        (("s", "f1"), ("f1", "f2"), ("f2", "a"), ("a", "k")),
    )


def join_query() -> QueryGraph:
    """Two sources, a filter on one branch, a windowed join, a sink."""
    return QueryGraph(
        "join",
        (
            Operator("s1", "source", {"event_rate": 500, "tuple_width_out": 4, "data_types": "int,double,str,str"}),
            Operator("s2", "source", {"event_rate": 750, "tuple_width_out": 3, "data_types": "int,str,str"}),
            Operator(
                "f",
                "filter",
                {
                    "filter_function": ">",
                    "literal_type": "double",
                    "selectivity": 0.4,
                    "tuple_width_in": 4,
                    "tuple_width_out": 4,
                },
            ),
            Operator(
                "j",
                "window_join",
                {
                    "join_key_type": "int",
                    "selectivity": 0.01,
                    "tuple_width_in": 3.5,
                    "tuple_width_out": 7,
                    "window_type": "tumbling",
                    "window_policy": "count",
                    "window_size": 80,
                    "window_slide": 80,
                },
            ),
            Operator("k", "sink", {"tuple_width_in": 7, "tuple_width_out": 7}),
        ),
        (("s1", "f"), ("f", "j"), ("s2", "j"), ("j", "k")),
    )
