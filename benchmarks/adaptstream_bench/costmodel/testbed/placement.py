"""A Costream placement (operator -> host) realised on the REAL testbed.

Spark cannot place single operators of one query on chosen executors, so a placed query is cut into
*pieces*: maximal connected sets of operators on the same host. Each piece is one Structured Streaming query
in a long-lived driver pinned to that host's worker (`agent.py`); each edge between hosts is a Redis stream
written by the upstream piece's executors and read by the downstream piece's executors (`redisedge.py`).
What the placement therefore controls: on which host's cgroup (cpu, memory) an operator's work runs and which
hosts' links (tbf) a tuple crosses. What it does not control: driver-side planning of each piece (drivers run
unconfined on the bridge), the broker (Redis, unconfined) and Spark's micro-batch boundaries at every hop.

`realise(query)` maps a generated (Table II) query onto what Spark runs here and rewrites its features so the
trace describes what ran: rates capped at MAX_RATE; filters are hash predicates `pmod(v*m, 10007) < sel*10007`
(recorded as "<" on an int literal); count windows become time windows of the same expected number of tuples;
joins are interval joins on a key drawn from round(1/selectivity) values (Def. 7); aggregations group by
round(selectivity x window tuples) keys. An aggregation's recorded selectivity is then the one Def. 8 gives for
what runs (distinct groups in a window over the window's tuples, `agg_selectivity`), not the generator's (kept as
`selectivity_generated`, from which the groups are drawn): after a join the group key repeats (a join's output
carries one side's value), so fewer groups fill than the generator asked for.
"""

from __future__ import annotations

import math
from typing import Any

from adaptstream.costmodel.model import Operator, QueryGraph
from adaptstream.costmodel.rates import MAX_RATE, WINDOW_S, nominal_rates

FILTER_MOD = 10007


def realise(query: QueryGraph) -> tuple[QueryGraph, dict[str, dict[str, Any]]]:
    """(query with realised features, per-operator execution parameters)."""
    rate_of = {
        op.id: min(MAX_RATE, float(op.feature("event_rate", 100.0))) for op in query.operators if op.kind == "source"
    }
    rates = nominal_rates(query, rate_of)
    ops: list[Operator] = []
    params: dict[str, dict[str, Any]] = {}
    for i, op in enumerate(query.topological_order()):
        f = dict(op.features)
        p: dict[str, Any] = {"kind": op.kind}
        ups = query.upstream(op.id)
        if op.kind == "source":
            f["event_rate"] = rate_of[op.id]
            p.update(rate=rate_of[op.id], width=int(f.get("tuple_width_out", 5)))
        elif op.kind == "filter":
            f.update(filter_function="<", literal_type="int")
            p.update(mult=7919 + 104729 * i, threshold=round(float(f["selectivity"]) * FILTER_MOD))
        elif op.kind in ("window_join", "window_agg"):
            rate_in = max(1e-3, sum(rates[u] for u in ups) / len(ups))
            size, slide = float(f["window_size"]), float(f["window_slide"])
            if f.get("window_policy") == "count":
                size_s = min(max(size / rate_in, WINDOW_S[0]), WINDOW_S[1])
                slide_s = min(max(slide / rate_in, WINDOW_S[0] / 2), size_s)
                f.update(window_policy="time", window_size=round(size_s, 3), window_slide=round(slide_s, 3))
            p.update(window_s=float(f["window_size"]), slide_s=float(f["window_slide"]))
            if op.kind == "window_join":
                p["keys"] = max(1, round(1.0 / max(float(f["selectivity"]), 1e-6)))
            else:
                sel = float(f.get("selectivity_generated", f.get("selectivity", 0.0)))
                p["groups"] = 1 if f.get("group_by_type") == "none" else max(1, round(sel * rate_in * p["window_s"]))
                p["fn"] = {"mean": "avg"}.get(str(f.get("agg_function", "avg")), str(f.get("agg_function", "avg")))
        ops.append(Operator(op.id, op.kind, f))
        params[op.id] = p
    return _describe_aggs(QueryGraph(query.query_id, tuple(ops), query.edges), params), params


def _describe_aggs(query: QueryGraph, params: dict[str, dict[str, Any]]) -> QueryGraph:
    """`query` with every aggregation's selectivity as Def. 8 gives it for what runs (`agg_selectivity`)."""
    sel = agg_selectivity(query, params)
    ops = []
    for op in query.operators:
        f = dict(op.features)
        if op.id in sel:
            f.setdefault("selectivity_generated", f.get("selectivity", 0.0))
            f["selectivity"] = float(f"{sel[op.id]:.4g}")
        ops.append(Operator(op.id, op.kind, f))
    return QueryGraph(query.query_id, tuple(ops), query.edges)


def agg_selectivity(query: QueryGraph, params: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Expected selectivity (Costream Def. 8: distinct group-by values in a window over the window's tuples) of
    every aggregation as realised by `params`.

    Why: the aggregation groups by `v mod groups`. A source's `v` counts up, so each tuple brings its own value;
    a join's output carries its first input's `v`, repeated once per match, so after a join a window holds fewer
    distinct values than tuples and fewer groups fill than the generator's selectivity says. On the recorded
    corpus (626 successful traces) the expected sink rate (`rates.py`) of `3-way-join+agg` queries was a median
    factor 3.14 off the measured throughput with the generator's figure, 1.46 with this one
    (benchmarks/costmodel_rate_check.py; docs/testbed.md, "Update (2026-11-29, third)"). Per operator we carry
    the expected tuple rate and the rate of distinct `v` values: a filter thins both; an interval join
    (+-window) matches a tuple of its first input with probability 1 - exp(-m), m its expected matches, and
    emits every match; `d` distinct values hashed into `g` groups fill g (1 - exp(-d / g)) of them.
    """
    rate: dict[str, float] = {}
    distinct: dict[str, float] = {}
    out: dict[str, float] = {}
    for op in query.topological_order():
        ups, p = query.upstream(op.id), params[op.id]
        if op.kind == "source":
            rate[op.id] = distinct[op.id] = float(p["rate"])
        elif op.kind == "filter":
            s = p["threshold"] / FILTER_MOD
            rate[op.id], distinct[op.id] = rate[ups[0]] * s, distinct[ups[0]] * s
        elif op.kind == "window_join":
            a, b = ups
            m = rate[b] * 2.0 * p["window_s"] / p["keys"]
            rate[op.id] = rate[a] * m
            distinct[op.id] = distinct[a] * (1.0 - math.exp(-m))
        elif op.kind == "window_agg":
            tuples = rate[ups[0]] * p["window_s"]
            g, d = float(p["groups"]), distinct[ups[0]] * p["window_s"]
            filled = g * (1.0 - math.exp(-d / g)) if g > 0 else 0.0
            out[op.id] = min(1.0, filled / tuples) if tuples > 0 else 0.0
            rate[op.id] = distinct[op.id] = filled / p["slide_s"]
        else:
            rate[op.id], distinct[op.id] = rate[ups[0]], distinct[ups[0]]
    return out


def pieces(query: QueryGraph, placement: dict[str, str]) -> list[dict[str, Any]]:
    """Maximal same-host connected operator sets; each knows its tail and where its output goes."""
    parent = {op.id: op.id for op in query.operators}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in query.edges:
        if placement[a] == placement[b]:
            parent[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for op in query.topological_order():
        groups.setdefault(find(op.id), []).append(op.id)
    out = []
    for n, (_, members) in enumerate(sorted(groups.items(), key=lambda kv: kv[1][0])):
        tail = next(m for m in members if all(d not in members for d in query.downstream(m)))
        out.append(
            {
                "piece": f"p{n}",
                "host": placement[members[0]],
                "ops": members,
                "tail": tail,
                "sink": query.sink().id in members,
            }
        )
    return out


def edge_key(trace_id: str, op_id: str) -> str:
    """Redis stream carrying op_id's output to another host."""
    return f"tb:{trace_id}:{op_id}"
