"""Write tests/fixtures/costmodel/example_traces.jsonl: three hand-built traces (linear, 2-way join + agg,
3-way join) with hand-written labels. The labels are illustrative values typed in by hand, marked
origin="example" and meta.note="hand-written example"; they are NOT measurements.
Run: python scripts/costmodel_examples.py
"""

from __future__ import annotations

from pathlib import Path

from adaptstream.costmodel.model import Host, Labels, Operator, QueryGraph, Trace, write_traces

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "costmodel" / "example_traces.jsonl"

HOSTS = (
    Host("edge-1", cpu=100, ram_mb=2000, bandwidth_mbits=50, latency_ms=40, category="small"),
    Host("fog-1", cpu=300, ram_mb=8000, bandwidth_mbits=800, latency_ms=10, category="medium"),
    Host("cloud-1", cpu=800, ram_mb=32000, bandwidth_mbits=10000, latency_ms=1, category="large"),
)


def src(i: str, rate: float, width: int, types: str) -> Operator:
    return Operator(i, "source", {"event_rate": rate, "tuple_width_out": width, "data_types": types})


def linear() -> Trace:
    q = QueryGraph(
        "q-linear",
        (
            src("s1", 1600, 5, "int,int,double,str,str"),
            Operator(
                "f1",
                "filter",
                {
                    "filter_function": "<",
                    "literal_type": "int",
                    "selectivity": 0.5,
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
            Operator("k", "sink", {"tuple_width_in": 5}),
        ),
        (("s1", "f1"), ("f1", "f2"), ("f2", "k")),
    )
    lab = Labels(240.0, 55.0, 3.1, False, True, "example")
    return Trace(
        "ex-linear",
        q,
        HOSTS,
        {"s1": "edge-1", "f1": "edge-1", "f2": "fog-1", "k": "cloud-1"},
        lab,
        {"note": "hand-written example"},
    )


def join_agg() -> Trace:
    q = QueryGraph(
        "q-2way-agg",
        (
            src("s1", 500, 4, "int,double,double,str"),
            src("s2", 750, 3, "int,str,str"),
            Operator(
                "j",
                "window_join",
                {
                    "join_key_type": "int",
                    "selectivity": 0.01,
                    "window_type": "sliding",
                    "window_policy": "time",
                    "window_size": 2.0,
                    "window_slide": 1.0,
                    "tuple_width_in": 3.5,
                    "tuple_width_out": 7,
                },
            ),
            Operator(
                "a",
                "window_agg",
                {
                    "agg_function": "avg",
                    "agg_type": "double",
                    "group_by_type": "int",
                    "selectivity": 0.2,
                    "window_type": "tumbling",
                    "window_policy": "count",
                    "window_size": 80,
                    "window_slide": 80,
                    "tuple_width_in": 7,
                    "tuple_width_out": 2,
                },
            ),
            Operator("k", "sink", {"tuple_width_in": 2}),
        ),
        (("s1", "j"), ("s2", "j"), ("j", "a"), ("a", "k")),
    )
    lab = Labels(19.5, 1450.0, 12.0, True, True, "example")
    return Trace(
        "ex-2way-agg",
        q,
        HOSTS,
        {"s1": "edge-1", "s2": "edge-1", "j": "fog-1", "a": "cloud-1", "k": "cloud-1"},
        lab,
        {"note": "hand-written example"},
    )


def three_way() -> Trace:
    q = QueryGraph(
        "q-3way",
        (
            src("s1", 200, 3, "int,int,str"),
            src("s2", 300, 6, "int,double,double,str,str,int"),
            src("s3", 100, 4, "int,str,double,double"),
            Operator(
                "f1",
                "filter",
                {
                    "filter_function": ">=",
                    "literal_type": "double",
                    "selectivity": 0.7,
                    "tuple_width_in": 6,
                    "tuple_width_out": 6,
                },
            ),
            Operator(
                "j1",
                "window_join",
                {
                    "join_key_type": "int",
                    "selectivity": 0.05,
                    "window_type": "tumbling",
                    "window_policy": "time",
                    "window_size": 1.0,
                    "window_slide": 1.0,
                    "tuple_width_in": 4.5,
                    "tuple_width_out": 9,
                },
            ),
            Operator(
                "j2",
                "window_join",
                {
                    "join_key_type": "int",
                    "selectivity": 0.02,
                    "window_type": "sliding",
                    "window_policy": "count",
                    "window_size": 40,
                    "window_slide": 20,
                    "tuple_width_in": 6.5,
                    "tuple_width_out": 13,
                },
            ),
            Operator("k", "sink", {"tuple_width_in": 13}),
        ),
        (("s1", "j1"), ("s2", "f1"), ("f1", "j1"), ("j1", "j2"), ("s3", "j2"), ("j2", "k")),
    )
    return Trace(
        "ex-3way",
        q,
        HOSTS,
        {
            "s1": "edge-1",
            "s2": "fog-1",
            "f1": "fog-1",
            "s3": "fog-1",
            "j1": "cloud-1",
            "j2": "cloud-1",
            "k": "cloud-1",
        },
        None,
        {"note": "hand-written example, unlabelled"},
    )


if __name__ == "__main__":
    n = write_traces(OUT, [linear(), join_agg(), three_way()])
    print(f"wrote {n} traces to {OUT}")
