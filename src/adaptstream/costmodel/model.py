"""Data model of the cost model: query DAG, hosts, placement and labels (Costream, Sec. III-IV, Table I).

One trace = one query graph + the hosts it may run on + a placement (operator -> host) + measured or simulated
labels. Traces serialise to plain JSON (one object per line in JSON-lines files) so that simulated corpora,
real Structured Streaming recordings and imported Costream DOT files share one format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

from adaptstream.errors import CostModelError

OperatorKind = Literal["source", "filter", "window_agg", "window_join", "sink"]
OPERATOR_KINDS: tuple[str, ...] = get_args(OperatorKind)
HOST_CATEGORIES: tuple[str, ...] = ("small", "medium", "large")
#: "simulated": edge-cloud testbed simulator; "real": measured Spark run; "example": hand-typed illustration.
LABEL_ORIGINS: tuple[str, ...] = ("simulated", "real", "example")

#: Table I feature names (snake_case) that operators may carry; other keys are allowed but flagged by nothing.
OPERATOR_FEATURES: tuple[str, ...] = (
    "tuple_width_in",
    "tuple_width_out",
    "event_rate",
    "data_types",
    "filter_function",
    "literal_type",
    "selectivity",
    "agg_function",
    "agg_type",
    "group_by_type",
    "window_type",
    "window_policy",
    "window_size",
    "window_slide",
    "join_key_type",
)


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Operator:
    """One logical operator; `features` holds the Table I operator- and data-related features."""

    id: str
    kind: OperatorKind
    features: Mapping[str, float | int | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in OPERATOR_KINDS:
            kinds = ", ".join(OPERATOR_KINDS)
            msg = f"operator {self.id!r}: unknown kind {self.kind!r}; choose one of {kinds}"
            raise CostModelError(msg)
        object.__setattr__(self, "features", _frozen(self.features))

    def feature(self, name: str, default: Any = None) -> Any:
        return self.features.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "features": dict(self.features)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Operator:
        return cls(id=str(d["id"]), kind=d["kind"], features=dict(d.get("features", {})))


@dataclass(frozen=True)
class Host:
    """A (possibly virtualised) machine; Table I hardware features. cpu is % of one reference core."""

    id: str
    cpu: float
    ram_mb: float
    bandwidth_mbits: float
    latency_ms: float
    category: str = ""

    def __post_init__(self) -> None:
        for name in ("cpu", "ram_mb", "bandwidth_mbits"):
            if not float(getattr(self, name)) > 0:
                msg = f"host {self.id!r}: {name} must be > 0, got {getattr(self, name)!r}"
                raise CostModelError(msg)
        if float(self.latency_ms) < 0:
            msg = f"host {self.id!r}: latency_ms must be >= 0, got {self.latency_ms!r}"
            raise CostModelError(msg)
        if self.category and self.category not in HOST_CATEGORIES:
            msg = f"host {self.id!r}: category {self.category!r} not in {HOST_CATEGORIES}"
            raise CostModelError(msg)

    @property
    def category_rank(self) -> int:
        """0/1/2 for small/medium/large; -1 when uncategorised."""
        return HOST_CATEGORIES.index(self.category) if self.category else -1

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cpu": float(self.cpu),
            "ram_mb": float(self.ram_mb),
            "bandwidth_mbits": float(self.bandwidth_mbits),
            "latency_ms": float(self.latency_ms),
            "category": self.category,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Host:
        return cls(
            id=str(d["id"]),
            cpu=float(d["cpu"]),
            ram_mb=float(d["ram_mb"]),
            bandwidth_mbits=float(d["bandwidth_mbits"]),
            latency_ms=float(d["latency_ms"]),
            category=str(d.get("category", "")),
        )


@dataclass(frozen=True)
class QueryGraph:
    """A query as a DAG of operators; edges point in data-flow direction (upstream, downstream)."""

    query_id: str
    operators: tuple[Operator, ...]
    edges: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "operators", tuple(self.operators))
        object.__setattr__(self, "edges", tuple((str(a), str(b)) for a, b in self.edges))
        self.validate()

    # -- validation ----------------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise CostModelError unless this is a well-formed single-sink DAG fed by sources."""
        ids = [op.id for op in self.operators]
        if not ids:
            msg = f"query {self.query_id!r} has no operators"
            raise CostModelError(msg)
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            msg = f"query {self.query_id!r}: duplicate operator ids {dup}"
            raise CostModelError(msg)
        known = set(ids)
        for a, b in self.edges:
            for end in (a, b):
                if end not in known:
                    msg = f"query {self.query_id!r}: edge ({a!r} -> {b!r}) names unknown operator {end!r}"
                    raise CostModelError(msg)
            if a == b:
                msg = f"query {self.query_id!r}: self-loop on operator {a!r}"
                raise CostModelError(msg)
        sinks = [op.id for op in self.operators if op.kind == "sink"]
        if len(sinks) != 1:
            what = "no sink" if not sinks else f"{len(sinks)} sinks {sinks}"
            msg = f"query {self.query_id!r}: needs exactly one sink operator, found {what}"
            raise CostModelError(msg)
        if not any(op.kind == "source" for op in self.operators):
            msg = f"query {self.query_id!r}: has no source operator"
            raise CostModelError(msg)
        self.topological_order()  # raises on cycles
        for op in self.operators:
            ups, downs = self.upstream(op.id), self.downstream(op.id)
            if op.kind == "source" and ups:
                msg = f"query {self.query_id!r}: source {op.id!r} has upstream operators {list(ups)}"
                raise CostModelError(msg)
            if op.kind == "sink" and downs:
                msg = f"query {self.query_id!r}: sink {op.id!r} has downstream operators {list(downs)}"
                raise CostModelError(msg)
            if op.kind != "source" and not ups:
                msg = f"query {self.query_id!r}: {op.kind} {op.id!r} has no input"
                raise CostModelError(msg)
            if op.kind != "sink" and not downs:
                msg = f"query {self.query_id!r}: {op.kind} {op.id!r} has no output (dangling operator)"
                raise CostModelError(msg)
            if op.kind == "window_join" and len(ups) != 2:
                msg = f"query {self.query_id!r}: window_join {op.id!r} needs 2 inputs, has {len(ups)}"
                raise CostModelError(msg)
            if op.kind in ("filter", "window_agg", "sink") and len(ups) != 1:
                msg = f"query {self.query_id!r}: {op.kind} {op.id!r} needs 1 input, has {len(ups)}"
                raise CostModelError(msg)

    # -- navigation ----------------------------------------------------------------------------------------
    def operator(self, op_id: str) -> Operator:
        for op in self.operators:
            if op.id == op_id:
                return op
        msg = f"query {self.query_id!r} has no operator {op_id!r}"
        raise CostModelError(msg)

    def upstream(self, op_id: str) -> tuple[str, ...]:
        return tuple(a for a, b in self.edges if b == op_id)

    def downstream(self, op_id: str) -> tuple[str, ...]:
        return tuple(b for a, b in self.edges if a == op_id)

    def sources(self) -> tuple[Operator, ...]:
        return tuple(op for op in self.operators if op.kind == "source")

    def sink(self) -> Operator:
        return next(op for op in self.operators if op.kind == "sink")

    def topological_order(self) -> tuple[Operator, ...]:
        """Kahn's algorithm, stable in declaration order; raises CostModelError on a cycle."""
        indeg = {op.id: 0 for op in self.operators}
        for _, b in self.edges:
            indeg[b] += 1
        by_id = {op.id: op for op in self.operators}
        ready = [op.id for op in self.operators if indeg[op.id] == 0]
        order: list[Operator] = []
        while ready:
            cur = ready.pop(0)
            order.append(by_id[cur])
            for nxt in self.downstream(cur):
                indeg[nxt] -= 1
                if indeg[nxt] == 0:
                    ready.append(nxt)
        if len(order) != len(self.operators):
            stuck = sorted(i for i, d in indeg.items() if d > 0)
            msg = f"query {self.query_id!r}: the operator graph has a cycle through {stuck}"
            raise CostModelError(msg)
        return tuple(order)

    @property
    def query_type(self) -> str:
        """ "linear", "2-way-join", "3-way-join" (n-way for n sources), with "+agg" when aggregating."""
        n = len(self.sources())
        base = "linear" if n == 1 else f"{n}-way-join"
        return base + ("+agg" if any(op.kind == "window_agg" for op in self.operators) else "")

    @property
    def n_filters(self) -> int:
        return sum(op.kind == "filter" for op in self.operators)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "operators": [op.to_dict() for op in self.operators],
            "edges": [list(e) for e in self.edges],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QueryGraph:
        return cls(
            query_id=str(d["query_id"]),
            operators=tuple(Operator.from_dict(o) for o in d["operators"]),
            edges=tuple((str(a), str(b)) for a, b in d["edges"]),
        )


@dataclass(frozen=True)
class Labels:
    """Costream's cost metrics (Sec. IV-A): T, Le, Lp, backpressure R_O, success S; origin = how obtained."""

    throughput: float | None
    e2e_latency_ms: float | None
    proc_latency_ms: float | None
    backpressure: bool | None
    success: bool | None
    origin: str

    def __post_init__(self) -> None:
        if self.origin not in LABEL_ORIGINS:
            msg = f"labels origin must be one of {LABEL_ORIGINS}, got {self.origin!r}"
            raise CostModelError(msg)

    def to_dict(self) -> dict[str, Any]:
        return {
            "throughput": self.throughput,
            "e2e_latency_ms": self.e2e_latency_ms,
            "proc_latency_ms": self.proc_latency_ms,
            "backpressure": self.backpressure,
            "success": self.success,
            "origin": self.origin,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Labels:
        def num(key: str) -> float | None:
            v = d.get(key)
            return None if v is None else float(v)

        def flag(key: str) -> bool | None:
            v = d.get(key)
            return None if v is None else bool(v)

        return cls(
            throughput=num("throughput"),
            e2e_latency_ms=num("e2e_latency_ms"),
            proc_latency_ms=num("proc_latency_ms"),
            backpressure=flag("backpressure"),
            success=flag("success"),
            origin=str(d["origin"]),
        )


@dataclass(frozen=True)
class Trace:
    """A query, the hosts, a placement of every operator on one host, and (optionally) labels."""

    trace_id: str
    query: QueryGraph
    hosts: tuple[Host, ...]
    placement: Mapping[str, str]
    labels: Labels | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(self.hosts))
        object.__setattr__(self, "placement", _frozen(self.placement))
        object.__setattr__(self, "meta", _frozen(self.meta))
        self.validate()

    def validate(self) -> None:
        host_ids = [h.id for h in self.hosts]
        if not host_ids:
            msg = f"trace {self.trace_id!r}: no hosts"
            raise CostModelError(msg)
        dup = sorted({i for i in host_ids if host_ids.count(i) > 1})
        if dup:
            msg = f"trace {self.trace_id!r}: duplicate host ids {dup}"
            raise CostModelError(msg)
        op_ids = {op.id for op in self.query.operators}
        missing = sorted(op_ids - set(self.placement))
        if missing:
            msg = f"trace {self.trace_id!r}: operators without a host in the placement: {missing}"
            raise CostModelError(msg)
        extra = sorted(set(self.placement) - op_ids)
        if extra:
            msg = f"trace {self.trace_id!r}: placement names unknown operators {extra}"
            raise CostModelError(msg)
        known = set(host_ids)
        for op_id, host_id in self.placement.items():
            if host_id not in known:
                msg = f"trace {self.trace_id!r}: operator {op_id!r} placed on unknown host {host_id!r}"
                raise CostModelError(msg)

    def host(self, host_id: str) -> Host:
        for h in self.hosts:
            if h.id == host_id:
                return h
        msg = f"trace {self.trace_id!r} has no host {host_id!r}"
        raise CostModelError(msg)

    def host_of(self, op_id: str) -> Host:
        return self.host(self.placement[op_id])

    def with_labels(self, labels: Labels | None) -> Trace:
        return Trace(self.trace_id, self.query, self.hosts, dict(self.placement), labels, dict(self.meta))

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "query": self.query.to_dict(),
            "hosts": [h.to_dict() for h in self.hosts],
            "placement": dict(self.placement),
            "labels": None if self.labels is None else self.labels.to_dict(),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Trace:
        try:
            labels = d.get("labels")
            return cls(
                trace_id=str(d["trace_id"]),
                query=QueryGraph.from_dict(d["query"]),
                hosts=tuple(Host.from_dict(h) for h in d["hosts"]),
                placement={str(k): str(v) for k, v in d["placement"].items()},
                labels=None if labels is None else Labels.from_dict(labels),
                meta=dict(d.get("meta", {})),
            )
        except KeyError as exc:
            msg = f"trace {d.get('trace_id', '?')!r}: missing field {exc.args[0]!r}"
            raise CostModelError(msg) from exc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Trace:
        return cls.from_dict(json.loads(line))


#: `query_key` = corpus seed * QUERY_KEY_STRIDE + query index: past any index a corpus reaches
QUERY_KEY_STRIDE = 1_000_000


def query_key(t: Trace) -> int:
    """The generator query a trace runs, as one number: `(meta.seed, meta.query_index)`, seed 0's key being the
    index itself. Query j of seed 0 and query j of seed 1 are different draws; a corpus grown with another
    `--seed` must not share folds by index alone."""
    return int(t.meta.get("seed", 0)) * QUERY_KEY_STRIDE + int(t.meta["query_index"])


def write_traces(path: str | Path, traces: Iterable[Trace]) -> int:
    """Write traces as JSON lines; returns how many were written."""
    n = 0
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for t in traces:
            fh.write(t.to_json())
            fh.write("\n")
            n += 1
    return n


def read_traces(path: str | Path) -> Iterator[Trace]:
    """Yield traces from a JSON-lines file (blank lines skipped); errors name the file and line."""
    p = Path(path)
    if not p.exists():
        msg = f"trace file {p} does not exist"
        raise CostModelError(msg)
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield Trace.from_json(line)
            except json.JSONDecodeError as exc:
                msg = f"{p}:{lineno}: not valid JSON ({exc.msg})"
                raise CostModelError(msg) from exc
            except CostModelError as exc:
                msg = f"{p}:{lineno}: {exc}"
                raise CostModelError(msg) from exc
