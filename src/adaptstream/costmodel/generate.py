"""Query, hardware and placement generators with the shapes and ranges of Costream's benchmark.

Ranges follow Costream Table II ("Feature range used by the synthetic training dataset") and the workload mix
of Sec. VI (35% linear, 34% 2-way, 31% 3-way joins; 1/2/3/4 filters with 35/34/24/6%; aggregation in half the
queries). Placement enumeration follows the three rules of Costream Fig. 5 / Sec. V: (1) co-location allowed,
(2) host category never decreases along the data flow, (3) acyclic placements (data never returns to a host it
has left). Everything is driven by an explicit `numpy.random.Generator`, so a seed reproduces a trace exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from adaptstream.costmodel.model import HOST_CATEGORIES, Host, Operator, QueryGraph, Trace
from adaptstream.errors import CostModelError

# --- Costream Table II ------------------------------------------------------------------------------------
CPU_PCT = (50, 100, 200, 300, 400, 500, 600, 700, 800)
RAM_MB = (1000, 2000, 4000, 8000, 16000, 24000, 32000)
BANDWIDTH_MBITS = (25, 50, 100, 200, 400, 800, 1600, 3200, 6400, 10000)
LATENCY_MS = (1, 2, 5, 10, 20, 40, 80, 160)
EVENT_RATE = {
    "linear": (100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600),
    "2-way-join": (50, 100, 250, 500, 750, 1000, 1250, 1500, 1750, 2000),
    "3-way-join": (20, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000),
}
TUPLE_WIDTH = (3, 10)  # number of attributes, inclusive
DATA_TYPES = ("int", "str", "double")
FILTER_FUNCTIONS = ("<", ">", "<=", ">=", "!=", "startswith", "endswith")
WINDOW_SIZE_COUNT = (5, 10, 20, 40, 80, 160, 320, 640)  # tuples
WINDOW_SIZE_TIME = (0.25, 0.5, 1, 2, 4, 8, 16)  # seconds
SLIDE_FRACTION = (0.3, 0.7)  # x window length, sliding windows only
AGG_FUNCTIONS = ("min", "max", "mean", "avg")  # Table II lists "min, max, mean, avg"
GROUP_BY_TYPES = ("int", "str", "double", "none")

# --- Sec. VI workload mix ---------------------------------------------------------------------------------
QUERY_SHAPES = (("linear", 0.35), ("2-way-join", 0.34), ("3-way-join", 0.31))
#: the query types without their "+agg" variant
BASE_TYPES = tuple(shape for shape, _ in QUERY_SHAPES)


def base_type(qtype: str) -> str:
    """``3-way-join+agg`` -> ``3-way-join``."""
    return qtype.split("+")[0]


N_FILTERS = ((1, 0.35), (2, 0.34), (3, 0.24), (4, 0.07))  # paper: 35/34/24/6 (rounded; 7 makes it sum to 1)
P_AGGREGATION = 0.5

# --- Our choices where the paper gives no range (documented in docs/costmodel-data.md) --------------------
FILTER_SELECTIVITY = (0.05, 1.0)  # log-uniform; Def. 6
JOIN_SELECTIVITY = (1e-3, 0.2)  # log-uniform; Def. 7 (fraction of the cartesian product of the two windows)
AGG_SELECTIVITY = (0.01, 0.5)  # log-uniform; Def. 8 (distinct groups / window length), with a group-by
#: Host categories with overlapping ranges ("bins are intersected in their feature range", Sec. V rule 2).
CATEGORY_RANGES: Mapping[str, Mapping[str, tuple[float, ...]]] = {
    "small": {
        "cpu": (50, 100, 200, 300),
        "ram_mb": (1000, 2000, 4000),
        "bandwidth_mbits": (25, 50, 100, 200, 400),
        "latency_ms": (20, 40, 80, 160),
    },
    "medium": {
        "cpu": (200, 300, 400, 500),
        "ram_mb": (2000, 4000, 8000, 16000),
        "bandwidth_mbits": (200, 400, 800, 1600),
        "latency_ms": (5, 10, 20, 40),
    },
    "large": {
        "cpu": (400, 500, 600, 700, 800),
        "ram_mb": (8000, 16000, 24000, 32000),
        "bandwidth_mbits": (1600, 3200, 6400, 10000),
        "latency_ms": (1, 2, 5, 10),
    },
}


def _choice(rng: np.random.Generator, items: Sequence, p: Sequence[float] | None = None):
    return items[int(rng.choice(len(items), p=p))]


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


@dataclass(frozen=True)
class QueryGenerator:
    """Random queries of Costream's three shapes; `shape` forces one shape, else the Sec. VI mix is used."""

    shape: str | None = None
    max_filters: int = 4
    p_aggregation: float = P_AGGREGATION

    def sample(self, rng: np.random.Generator, query_id: str = "q") -> QueryGraph:
        shape = self.shape or _choice(rng, [s for s, _ in QUERY_SHAPES], [p for _, p in QUERY_SHAPES])
        if shape not in EVENT_RATE:
            msg = f"unknown query shape {shape!r}; choose one of {', '.join(EVENT_RATE)}"
            raise CostModelError(msg)
        n_sources = {"linear": 1, "2-way-join": 2, "3-way-join": 3}[shape]
        counts = [n for n, _ in N_FILTERS if n <= self.max_filters]
        probs = np.array([p for n, p in N_FILTERS if n <= self.max_filters])
        n_filters = int(_choice(rng, counts, probs / probs.sum())) if counts else 0
        b = _Builder(rng)
        # filters spread over the stream branches and the post-join stream (filters optional, Fig. 6)
        slots = rng.integers(0, n_sources + (1 if n_sources > 1 else 0), size=n_filters)
        branch_tails: list[tuple[str, int]] = []
        for s in range(n_sources):
            sid, width = b.source(_choice(rng, EVENT_RATE[shape]))
            tail = (sid, width)
            for _ in range(int(np.sum(slots == s))):
                tail = b.filter(*tail)
            branch_tails.append(tail)
        tail = branch_tails[0]
        for other in branch_tails[1:]:
            tail = b.join(tail, other)
        if n_sources > 1:
            for _ in range(int(np.sum(slots == n_sources))):
                tail = b.filter(*tail)
        if rng.random() < self.p_aggregation:
            tail = b.agg(*tail)
        b.sink(*tail)
        return QueryGraph(query_id, tuple(b.ops), tuple(b.edges))


class _Builder:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.ops: list[Operator] = []
        self.edges: list[tuple[str, str]] = []
        self.counter = itertools.count()

    def _add(self, prefix: str, kind: str, feats: dict, ups: Sequence[str]) -> str:
        op_id = f"{prefix}{next(self.counter)}"
        self.ops.append(Operator(op_id, kind, feats))  # type: ignore[arg-type]
        self.edges.extend((u, op_id) for u in ups)
        return op_id

    def source(self, rate: float) -> tuple[str, int]:
        width = int(self.rng.integers(TUPLE_WIDTH[0], TUPLE_WIDTH[1] + 1))
        types = ",".join(_choice(self.rng, DATA_TYPES) for _ in range(width))
        feats = {"event_rate": float(rate), "tuple_width_out": width, "data_types": types}
        return self._add("src", "source", feats, ()), width

    def filter(self, up: str, width: int) -> tuple[str, int]:
        fn = _choice(self.rng, FILTER_FUNCTIONS)
        literal = "str" if fn in ("startswith", "endswith") else _choice(self.rng, DATA_TYPES)
        feats = {
            "filter_function": fn,
            "literal_type": literal,
            "selectivity": round(_loguniform(self.rng, *FILTER_SELECTIVITY), 4),
            "tuple_width_in": width,
            "tuple_width_out": width,
        }
        return self._add("flt", "filter", feats, (up,)), width

    def _window(self) -> dict:
        wtype = _choice(self.rng, ("sliding", "tumbling"))
        policy = _choice(self.rng, ("count", "time"))
        size = float(_choice(self.rng, WINDOW_SIZE_COUNT if policy == "count" else WINDOW_SIZE_TIME))
        slide = size if wtype == "tumbling" else size * float(self.rng.uniform(*SLIDE_FRACTION))
        if policy == "count":
            slide = float(max(1, round(slide)))
        return {
            "window_type": wtype,
            "window_policy": policy,
            "window_size": size,
            "window_slide": round(slide, 4),
        }

    def join(self, left: tuple[str, int], right: tuple[str, int]) -> tuple[str, int]:
        width = left[1] + right[1]
        feats = {
            "join_key_type": _choice(self.rng, DATA_TYPES),
            "selectivity": float(f"{_loguniform(self.rng, *JOIN_SELECTIVITY):.3g}"),
            "tuple_width_in": (left[1] + right[1]) / 2,
            "tuple_width_out": width,
            **self._window(),
        }
        return self._add("join", "window_join", feats, (left[0], right[0])), width

    def agg(self, up: str, width: int) -> tuple[str, int]:
        group = _choice(self.rng, GROUP_BY_TYPES)
        sel = _loguniform(self.rng, *AGG_SELECTIVITY) if group != "none" else 0.0
        feats = {
            "agg_function": _choice(self.rng, AGG_FUNCTIONS),
            "agg_type": _choice(self.rng, ("int", "double")),
            "group_by_type": group,
            "selectivity": round(sel, 4),
            "tuple_width_in": width,
            "tuple_width_out": 2 if group != "none" else 1,
            **self._window(),
        }
        return self._add("agg", "window_agg", feats, (up,)), int(feats["tuple_width_out"])

    def sink(self, up: str, width: int) -> str:
        return self._add("sink", "sink", {"tuple_width_in": width}, (up,))


@dataclass(frozen=True)
class HardwareGenerator:
    """Heterogeneous hosts from the small/medium/large bins (overlapping ranges, Sec. V rule 2)."""

    min_hosts: int = 3
    max_hosts: int = 6
    ranges: Mapping[str, Mapping[str, tuple[float, ...]]] = None  # type: ignore[assignment]

    def _ranges(self) -> Mapping[str, Mapping[str, tuple[float, ...]]]:
        return self.ranges or CATEGORY_RANGES

    def host(self, rng: np.random.Generator, host_id: str, category: str) -> Host:
        r = self._ranges()[category]
        return Host(
            host_id,
            cpu=float(_choice(rng, r["cpu"])),
            ram_mb=float(_choice(rng, r["ram_mb"])),
            bandwidth_mbits=float(_choice(rng, r["bandwidth_mbits"])),
            latency_ms=float(_choice(rng, r["latency_ms"])),
            category=category,
        )

    def sample(self, rng: np.random.Generator) -> tuple[Host, ...]:
        n = int(rng.integers(self.min_hosts, self.max_hosts + 1))
        cats = [_choice(rng, HOST_CATEGORIES) for _ in range(n)]
        # an edge-cloud setting has both ends: at least one small and one large host
        cats[0], cats[-1] = "small", "large"
        return tuple(self.host(rng, f"h{i}", c) for i, c in enumerate(sorted(cats, key=HOST_CATEGORIES.index)))


# --- placement rules (Fig. 5) -----------------------------------------------------------------------------
def placement_violations(query: QueryGraph, hosts: Sequence[Host], placement: Mapping[str, str]) -> list[str]:
    """Human-readable reasons why `placement` breaks Fig. 5's rules (empty list = valid)."""
    rank = {h.id: h.category_rank for h in hosts}
    problems = []
    missing = [op.id for op in query.operators if placement.get(op.id) not in rank]
    if missing:
        return [f"operators without a known host: {missing}"]
    for a, b in query.edges:
        ha, hb = placement[a], placement[b]
        if rank[hb] < rank[ha]:
            problems.append(f"rule 2: {a}@{ha}({rank[ha]}) -> {b}@{hb}({rank[hb]}) decreases the host category")
    if _host_graph_has_cycle(query.edges, placement):
        problems.append("rule 3: data returns to a host it has already left")
    return problems


def _host_graph_has_cycle(edges: Sequence[tuple[str, str]], placement: Mapping[str, str]) -> bool:
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        ha, hb = placement[a], placement[b]
        if ha != hb:
            succ.setdefault(ha, set()).add(hb)
    state: dict[str, int] = {}

    def visit(h: str) -> bool:
        state[h] = 1
        for nxt in succ.get(h, ()):
            if state.get(nxt) == 1 or (nxt not in state and visit(nxt)):
                return True
        state[h] = 2
        return False

    return any(h not in state and visit(h) for h in list(succ))


def _allowed_hosts(query: QueryGraph, hosts: Sequence[Host], partial: dict[str, str], op_id: str) -> list[str]:
    ups = query.upstream(op_id)
    rank = {h.id: h.category_rank for h in hosts}
    floor = max((rank[partial[u]] for u in ups), default=-1)
    out = []
    for h in hosts:
        if h.category_rank < floor:
            continue
        partial[op_id] = h.id
        sub = {k: v for k, v in partial.items()}
        ok = not _host_graph_has_cycle([(a, b) for a, b in query.edges if a in sub and b in sub], sub)
        del partial[op_id]
        if ok:
            out.append(h.id)
    return out


def sample_placement(query: QueryGraph, hosts: Sequence[Host], rng: np.random.Generator) -> dict[str, str]:
    """One random placement obeying Fig. 5, built forward in topological order (never gets stuck: the
    highest-ranked, topologically last upstream host is always allowed)."""
    partial: dict[str, str] = {}
    for op in query.topological_order():
        allowed = _allowed_hosts(query, hosts, partial, op.id)
        if not allowed:  # pragma: no cover - impossible by construction, kept as a guard
            msg = f"no valid host for {op.id!r} in query {query.query_id!r}"
            raise CostModelError(msg)
        partial[op.id] = allowed[int(rng.integers(len(allowed)))]
    return partial


def enumerate_placements(
    query: QueryGraph, hosts: Sequence[Host], limit: int = 100, rng: np.random.Generator | None = None
) -> list[dict[str, str]]:
    """Up to `limit` distinct placements obeying Fig. 5. Without `rng`: exhaustive depth-first order (stops at
    `limit`); with `rng`: random distinct samples (at most 20*limit attempts), for large search spaces."""
    if limit <= 0:
        return []
    if rng is None:
        return list(itertools.islice(_dfs(query, hosts, query.topological_order(), {}), limit))
    seen: dict[tuple[str, ...], dict[str, str]] = {}
    order = [op.id for op in query.operators]
    for _ in range(20 * limit):
        p = sample_placement(query, hosts, rng)
        seen.setdefault(tuple(p[o] for o in order), p)
        if len(seen) >= limit:
            break
    return list(seen.values())


def _dfs(
    query: QueryGraph, hosts: Sequence[Host], order: Sequence[Operator], partial: dict[str, str]
) -> Iterator[dict[str, str]]:
    if len(partial) == len(order):
        yield dict(partial)
        return
    op = order[len(partial)]
    for h in _allowed_hosts(query, hosts, partial, op.id):
        partial[op.id] = h
        yield from _dfs(query, hosts, order, partial)
        del partial[op.id]


def initial_placement(query: QueryGraph, hosts: Sequence[Host]) -> dict[str, str]:
    """The "initial heuristic placement" our Exp. 2 comparisons start from.

    Our reading of the edge-first idea of Governor [32] cited by Costream Sec. VII-B (not Governor's
    algorithm): sources go round-robin onto the weakest hosts (sensors sit at the edge), every operator is
    co-located with its highest-ranked upstream host (process near the data, no network hop), and the sink
    runs on the strongest host (results are consumed in the cloud). Obeys Fig. 5; deterministic."""
    by_strength = sorted(hosts, key=lambda h: (h.category_rank, h.cpu, h.ram_mb, h.id))
    weakest_rank = by_strength[0].category_rank
    edge = [h for h in by_strength if h.category_rank == weakest_rank]
    strongest = by_strength[-1]
    rank = {h.id: h.category_rank for h in hosts}
    pos = {h.id: i for i, h in enumerate(by_strength)}
    placement: dict[str, str] = {}
    for i, s in enumerate(query.sources()):
        placement[s.id] = edge[i % len(edge)].id
    for op in query.topological_order():
        if op.kind == "source":
            continue
        if op.kind == "sink":
            placement[op.id] = strongest.id
            continue
        ups = [placement[u] for u in query.upstream(op.id)]
        placement[op.id] = max(ups, key=lambda h: (rank[h], pos[h]))
    return placement


def sample_trace(
    rng: np.random.Generator,
    trace_id: str,
    query_gen: QueryGenerator | None = None,
    hw_gen: HardwareGenerator | None = None,
) -> Trace:
    """Query + hosts + a random valid placement, unlabelled; the caller records the seed in `meta`."""
    query = (query_gen or QueryGenerator()).sample(rng, query_id=f"q-{trace_id}")
    hosts = (hw_gen or HardwareGenerator()).sample(rng)
    return Trace(trace_id, query, hosts, sample_placement(query, hosts, rng), None, {})
