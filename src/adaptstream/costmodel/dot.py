"""Importer for Costream's DOT `.query` files (operator and host nodes, placement edges, labels on the sink).

The format is RECONSTRUCTED from the Costream paper (Sec. III-VI: a joint graph of operator nodes and
hardware nodes carrying the Table I features, placement as operator -> host edges, cost labels attached to
the sink); the artifact itself could not be downloaded here, so attribute names are matched leniently
(camelCase, snake_case and kebab-case, with the aliases below). A small parser of the DOT subset used by
such files is included: `node [k=v, ...]` and `a -> b -> c [k=v]` statements, quoted or bare ids and
values, // and /* */ comments, `graph/node/edge [...]` defaults (ignored). `pydot` is not needed.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adaptstream.costmodel.model import Host, Labels, Operator, QueryGraph, Trace
from adaptstream.errors import CostModelError

KIND_ALIASES = {
    "spout": "source",
    "source": "source",
    "filter": "filter",
    "sink": "sink",
    "windowedaggregation": "window_agg",
    "aggregation": "window_agg",
    "windowagg": "window_agg",
    "agg": "window_agg",
    "windowedjoin": "window_join",
    "join": "window_join",
    "windowjoin": "window_join",
    "host": "host",
    "hardware": "host",
}
FEATURE_ALIASES = {
    "eventrate": "event_rate",
    "inputeventrate": "event_rate",
    "tuplewidthin": "tuple_width_in",
    "tuplewidthout": "tuple_width_out",
    "tupledatatype": "data_types",
    "datatypes": "data_types",
    "filterfunction": "filter_function",
    "literaldatatype": "literal_type",
    "literaltype": "literal_type",
    "selectivity": "selectivity",
    "aggfunction": "agg_function",
    "aggclass": "agg_type",
    "aggtype": "agg_type",
    "groupbyclass": "group_by_type",
    "groupbytype": "group_by_type",
    "windowtype": "window_type",
    "windowpolicy": "window_policy",
    "windowlength": "window_size",
    "windowsize": "window_size",
    "slidinglength": "window_slide",
    "slidesize": "window_slide",
    "windowslide": "window_slide",
    "joinkeyclass": "join_key_type",
    "joinkeytype": "join_key_type",
}
LABEL_ALIASES = {
    "throughput": "throughput",
    "e2elatency": "e2e_latency_ms",
    "endtoendlatency": "e2e_latency_ms",
    "proclatency": "proc_latency_ms",
    "processinglatency": "proc_latency_ms",
    "backpressure": "backpressure",
    "success": "success",
}
HOST_ALIASES = {
    "cpu": "cpu",
    "ram": "ram_mb",
    "rammb": "ram_mb",
    "bandwidth": "bandwidth_mbits",
    "networkbandwidth": "bandwidth_mbits",
    "latency": "latency_ms",
    "networklatency": "latency_ms",
    "category": "category",
}
VALUE_ALIASES = {
    "startswith": "startswith",
    "endswith": "endswith",
    "string": "str",
    "integer": "int",
    "count-based": "count",
    "time-based": "time",
    "countbased": "count",
    "timebased": "time",
}

_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|->|--|[{}\[\];=,]|[^\s{}\[\];=,"]+')


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _unquote(tok: str) -> str:
    if tok.startswith('"') and tok.endswith('"'):
        return tok[1:-1].replace('\\"', '"')
    return tok


def _value(raw: str) -> float | int | str | bool:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        f = float(raw)
    except ValueError:
        return VALUE_ALIASES.get(_norm(raw), raw)
    return int(f) if f.is_integer() and "." not in raw and "e" not in low else f


def parse_dot(text: str) -> tuple[str, dict[str, dict[str, Any]], list[tuple[str, str, dict[str, Any]]]]:
    """Parse the DOT subset: returns (graph name, nodes -> attrs, [(src, dst, attrs)])."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"(?m)^\s*(//|#).*$", " ", text)
    toks = [t for t in _TOKEN.findall(text)]
    if len(toks) < 3 or _norm(toks[0]) not in ("digraph", "strictdigraph", "strict", "graph"):
        msg = "not a DOT graph: expected `digraph NAME { ... }`"
        raise CostModelError(msg)
    pos = 1 if _norm(toks[0]) != "strict" else 2
    name = ""
    if toks[pos] != "{":
        name = _unquote(toks[pos])
        pos += 1
    if toks[pos] != "{":
        msg = "DOT: expected `{` after the graph name"
        raise CostModelError(msg)
    pos += 1
    nodes: dict[str, dict[str, Any]] = {}
    edges: list[tuple[str, str, dict[str, Any]]] = []
    while pos < len(toks) and toks[pos] != "}":
        if toks[pos] in (";", ","):
            pos += 1
            continue
        chain = [_unquote(toks[pos])]
        pos += 1
        while pos < len(toks) and toks[pos] in ("->", "--"):
            chain.append(_unquote(toks[pos + 1]))
            pos += 2
        attrs: dict[str, Any] = {}
        if pos < len(toks) and toks[pos] == "=":  # graph-level `k = v`
            pos += 2
            continue
        if pos < len(toks) and toks[pos] == "[":
            pos += 1
            while toks[pos] != "]":
                if toks[pos] in (",", ";"):
                    pos += 1
                    continue
                key = _unquote(toks[pos])
                if toks[pos + 1] != "=":
                    msg = f"DOT: expected `=` after attribute {key!r}"
                    raise CostModelError(msg)
                attrs[key] = _value(_unquote(toks[pos + 2]))
                pos += 3
            pos += 1
        if chain[0].lower() in ("graph", "node", "edge") and len(chain) == 1:
            continue
        if len(chain) == 1:
            nodes.setdefault(chain[0], {}).update(attrs)
        else:
            for a, b in itertools.pairwise(chain):
                nodes.setdefault(a, {})
                nodes.setdefault(b, {})
                edges.append((a, b, attrs))
    if pos >= len(toks):
        msg = "DOT: missing closing `}`"
        raise CostModelError(msg)
    return name, nodes, edges


def _kind(node_id: str, attrs: Mapping[str, Any]) -> str:
    for key in ("operatorType", "operator_type", "type", "kind", "nodeType"):
        if key in attrs:
            k = KIND_ALIASES.get(_norm(str(attrs[key])))
            if k:
                return k
    msg = f"DOT node {node_id!r}: unknown or missing operatorType ({dict(attrs)})"
    raise CostModelError(msg)


def trace_from_dot(text: str, trace_id: str | None = None, origin: str = "real") -> Trace:
    """Build a Trace from DOT text; `origin` says where the sink's labels came from (artifact: "real")."""
    name, nodes, edges = parse_dot(text)
    kinds = {nid: _kind(nid, a) for nid, a in nodes.items()}
    hosts: list[Host] = []
    ops: list[Operator] = []
    placement: dict[str, str] = {}
    flow: list[tuple[str, str]] = []
    labels_raw: dict[str, Any] = {}
    for nid, attrs in nodes.items():
        if kinds[nid] == "host":
            vals = {HOST_ALIASES[_norm(k)]: v for k, v in attrs.items() if _norm(k) in HOST_ALIASES}
            try:
                hosts.append(
                    Host(
                        nid,
                        float(vals["cpu"]),
                        float(vals["ram_mb"]),
                        float(vals["bandwidth_mbits"]),
                        float(vals["latency_ms"]),
                        str(vals.get("category", "")),
                    )
                )
            except KeyError as exc:
                msg = f"DOT host {nid!r} lacks {exc.args[0]}"
                raise CostModelError(msg) from exc
            continue
        feats = {}
        for k, v in attrs.items():
            nk = _norm(k)
            if nk in FEATURE_ALIASES:
                val = v
                if FEATURE_ALIASES[nk] == "data_types" and isinstance(v, str):
                    val = ",".join(VALUE_ALIASES.get(_norm(x), x) for x in re.split(r"[;,|]", v))
                feats[FEATURE_ALIASES[nk]] = val
            elif kinds[nid] == "sink" and nk in LABEL_ALIASES:
                labels_raw[LABEL_ALIASES[nk]] = v
        ops.append(Operator(nid, kinds[nid], feats))  # type: ignore[arg-type]
    for a, b, attrs in edges:
        if kinds[b] == "host" or _norm(str(attrs.get("type", ""))) == "placement":
            if a in placement and placement[a] != b:
                msg = f"DOT: operator {a!r} placed on two hosts ({placement[a]!r}, {b!r})"
                raise CostModelError(msg)
            placement[a] = b
        elif kinds[a] == "host":
            placement[b] = a
        else:
            flow.append((a, b))
    labels = None
    if labels_raw:
        labels = Labels.from_dict({**{k: None for k in LABEL_ALIASES.values()}, **labels_raw, "origin": origin})
    query = QueryGraph(name or "dot-query", tuple(ops), tuple(flow))
    return Trace(
        trace_id or name or "dot-trace",
        query,
        tuple(hosts),
        placement,
        labels,
        {"imported_from": "costream-dot"},
    )


def read_dot(path: str | Path, origin: str = "real") -> Trace:
    p = Path(path)
    try:
        return trace_from_dot(p.read_text(encoding="utf-8"), trace_id=p.stem, origin=origin)
    except CostModelError as exc:
        msg = f"{p}: {exc}"
        raise CostModelError(msg) from exc
