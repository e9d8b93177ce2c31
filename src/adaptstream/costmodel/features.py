"""Transferable features (Costream Table I) and the joint operator-resource graph as tensors.

A trace becomes a :class:`RawGraph`: per node type a matrix of raw (log-transformed) numeric features and a
matrix of categorical strings, plus the three edge sets of Costream Sec. III-A: placement (operator -> host),
its reverse (host -> operator) and the logical data flow (operator -> operator). :class:`FeatureStats` is
fitted
on the training graphs only (median/IQR robust scaling, categorical vocabularies) and travels with every
checkpoint, so a model never sees features scaled with statistics from its test data.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.costmodel.rates import expected_rates, host_loads
from adaptstream.errors import CostModelError

OP_KINDS: tuple[str, ...] = ("source", "filter", "window_agg", "window_join", "sink")
HOST = "host"
NODE_TYPES: tuple[str, ...] = (*OP_KINDS, HOST)
DATA_TYPES: tuple[str, ...] = ("int", "string", "double")

# Numeric features per node type. "log:" features are log1p-transformed (rates, sizes and widths span orders
# of
# magnitude); derived ones are computed in _numeric_row.
_WIDTHS = ("log:tuple_width_in", "log:tuple_width_out")
_WINDOW = ("log:window_size", "slide_ratio")
_SEL = ("selectivity", "logsel")
_RATE = ("log:rate_out_est",)  # expected rows/s out of the operator (costmodel/rates.py), set by build_graph
# expected rows into / out of / held by the operators placed on a host (costmodel/rates.py host_loads)
_LOAD = ("log:rows_in_est", "log:rows_out_est", "log:state_rows_est")
# the same loads per unit of the host's hardware: rows/s per core (cpu is a percentage of one core) and rows held
# per MB; see host_usage
_USAGE = ("log:rows_in_per_core", "log:state_rows_per_mb")
NUMERIC: dict[str, tuple[str, ...]] = {
    "source": ("log:tuple_width_out", "log:event_rate", "n_int", "n_string", "n_double"),
    "filter": (*_WIDTHS, *_SEL, *_RATE),
    "window_agg": (*_WIDTHS, *_SEL, *_WINDOW, *_RATE),
    "window_join": (*_WIDTHS, *_SEL, *_WINDOW, *_RATE),
    "sink": (*_WIDTHS, *_RATE),
    HOST: ("log:cpu", "log:ram_mb", "log:bandwidth_mbits", "log:latency_ms", *_LOAD, *_USAGE),
}
CATEGORICAL: dict[str, tuple[str, ...]] = {
    "source": (),
    "filter": ("filter_function", "literal_type"),
    "window_agg": ("agg_function", "agg_type", "group_by_type", "window_type", "window_policy"),
    "window_join": ("join_key_type", "window_type", "window_policy"),
    "sink": (),
    HOST: (),
}
HOST_FIELDS: tuple[str, ...] = ("cpu", "ram_mb", "bandwidth_mbits", "latency_ms")
UNKNOWN = "<unk>"


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out if math.isfinite(out) else math.nan


def _type_counts(value: Any) -> tuple[float, float, float]:
    """data_types may be a list, a comma-separated string or a mapping of counts; returns (#int, #str,
    #double)."""
    if isinstance(value, Mapping):
        return tuple(_num(value.get(t, 0)) for t in DATA_TYPES)  # type: ignore[return-value]
    items = value.replace(";", ",").split(",") if isinstance(value, str) else list(value or ())
    names = [str(x).strip().lower() for x in items if str(x).strip()]
    return tuple(float(sum(n.startswith(t[:3]) for n in names)) for t in DATA_TYPES)  # type: ignore[return-value]


def _numeric_row(kind: str, feats: Mapping[str, Any]) -> list[float]:
    row: list[float] = []
    for name in NUMERIC[kind]:
        if name.startswith("log:"):
            v = _num(feats.get(name[4:]))
            row.append(math.log1p(max(v, 0.0)) if not math.isnan(v) else math.nan)
        elif name == "logsel":
            v = _num(feats.get("selectivity"))
            row.append(math.log10(min(max(v, 0.0), 1.0) + 1e-6) if not math.isnan(v) else math.nan)
        elif name == "slide_ratio":
            size, slide = _num(feats.get("window_size")), _num(feats.get("window_slide"))
            row.append(slide / size if size > 0 and not math.isnan(slide) else math.nan)
        elif name in ("n_int", "n_string", "n_double"):
            counts = _type_counts(feats.get("data_types", ()))
            row.append(counts[("n_int", "n_string", "n_double").index(name)])
        else:
            row.append(_num(feats.get(name)))
    return row


def _cat_row(kind: str, feats: Mapping[str, Any]) -> list[str]:
    out = []
    for name in CATEGORICAL[kind]:
        v = feats.get(name)
        out.append(UNKNOWN if v is None else str(v).strip().lower())
    return out


@dataclass
class RawGraph:
    """One trace as arrays, before scaling. Node ids are local: operators 0..n_ops-1 then hosts."""

    node_type: np.ndarray  # [n] int index into NODE_TYPES
    numeric: dict[str, np.ndarray]  # type -> [n_t, d_t] raw numeric
    categorical: dict[str, np.ndarray]  # type -> [n_t, c_t] str
    type_index: dict[str, np.ndarray]  # type -> [n_t] local node ids
    placement: np.ndarray  # [2, n_ops] (op, host) local ids
    flow: np.ndarray  # [2, e] (src op, dst op)
    level: np.ndarray  # [n] topological level of operators (-1 for hosts)
    n_ops: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return int(self.node_type.shape[0])


def topological_levels(op_ids: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Longest-path depth of every operator from the sources (sources 0); raises on cycles."""
    preds: dict[str, list[str]] = {o: [] for o in op_ids}
    succ: dict[str, list[str]] = {o: [] for o in op_ids}
    for s, d in edges:
        if s not in preds or d not in preds:
            msg = f"data-flow edge {s!r}->{d!r} names an unknown operator"
            raise CostModelError(msg)
        preds[d].append(s)
        succ[s].append(d)
    indeg = {o: len(p) for o, p in preds.items()}
    ready = [o for o in op_ids if indeg[o] == 0]
    level = dict.fromkeys(ready, 0)
    seen = 0
    while ready:
        o = ready.pop()
        seen += 1
        for d in succ[o]:
            level[d] = max(level.get(d, 0), level[o] + 1)
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    if seen != len(op_ids):
        msg = "the query's data flow has a cycle"
        raise CostModelError(msg)
    return level


def _host_fields(host: Any) -> dict[str, Any]:
    if isinstance(host, Mapping):
        return dict(host)
    return {f: getattr(host, f, None) for f in ("id", *HOST_FIELDS)}


def host_usage(host: Mapping[str, Any], load: Mapping[str, float]) -> dict[str, float]:
    """Expected rows/s into a host per core and rows held per MB of its memory.

    Why: a real run fails when one host gets more rows than its CPU share can take. The GNN has the load and the
    hardware as separate log features, but on a few hundred real traces it did not learn their ratio. With these
    ratios and early stopping on the balanced log-loss (train.stopping_score) the real-only success GNN's
    out-of-fold balanced accuracy, averaged over four partitions of the queries into folds, rose from 0.86 to
    0.89 (0.88 to 0.89 on the three partitions it was not picked on; benchmarks/costmodel_fold_spread.py,
    docs/testbed.md, sixth update)."""
    cores = max(_num(host.get("cpu")), 1e-3) / 100.0
    mb = max(_num(host.get("ram_mb")), 1e-3)
    return {"rows_in_per_core": load["rows_in_est"] / cores, "state_rows_per_mb": load["state_rows_est"] / mb}


def build_graph(query: Any, hosts: Sequence[Any], placement: Mapping[str, str]) -> RawGraph:
    """Joint operator-resource graph of one placed query; only hosts that run an operator become nodes."""
    ops = list(query.operators)
    op_ids = [o.id for o in ops]
    host_by_id = {str(_host_fields(h)["id"]): _host_fields(h) for h in hosts}
    missing = [o for o in op_ids if o not in placement]
    if missing:
        msg = f"placement lacks operators {missing}"
        raise CostModelError(msg)
    used_hosts: list[str] = []
    for o in op_ids:
        h = str(placement[o])
        if h not in host_by_id:
            msg = f"operator {o!r} is placed on unknown host {h!r}"
            raise CostModelError(msg)
        if h not in used_hosts:
            used_hosts.append(h)
    n_ops = len(ops)
    op_pos = {o: i for i, o in enumerate(op_ids)}
    host_pos = {h: n_ops + i for i, h in enumerate(used_hosts)}
    kinds = []
    for o in ops:
        if o.kind not in OP_KINDS:
            msg = f"operator {o.id!r} has unknown kind {o.kind!r}; expected one of {OP_KINDS}"
            raise CostModelError(msg)
        kinds.append(o.kind)
    node_type = np.array([NODE_TYPES.index(k) for k in kinds] + [NODE_TYPES.index(HOST)] * len(used_hosts))
    numeric: dict[str, np.ndarray] = {}
    categorical: dict[str, np.ndarray] = {}
    type_index: dict[str, np.ndarray] = {}
    rates = expected_rates(query)
    loads = host_loads(query, {o: str(placement[o]) for o in op_ids}, rates)
    for t in NODE_TYPES:
        if t == HOST:
            rows = [
                _numeric_row(HOST, {**host_by_id[h], **loads[h], **host_usage(host_by_id[h], loads[h])})
                for h in used_hosts
            ]
            cats: list[list[str]] = [[] for _ in used_hosts]
            idx = [host_pos[h] for h in used_hosts]
        else:
            sel = [o for o in ops if o.kind == t]
            rows = [_numeric_row(t, {**o.features, "rate_out_est": rates[o.id]}) for o in sel]
            cats = [_cat_row(t, o.features) for o in sel]
            idx = [op_pos[o.id] for o in sel]
        numeric[t] = np.asarray(rows, dtype=np.float64).reshape(len(idx), len(NUMERIC[t]))
        categorical[t] = np.asarray(cats, dtype=object).reshape(len(idx), len(CATEGORICAL[t]))
        type_index[t] = np.asarray(idx, dtype=np.int64)
    edges = [(str(s), str(d)) for s, d in query.edges]
    lv = topological_levels(op_ids, edges)
    level = np.array([lv[o] for o in op_ids] + [-1] * len(used_hosts), dtype=np.int64)
    placement_arr = np.array([[op_pos[o] for o in op_ids], [host_pos[str(placement[o])] for o in op_ids]])
    flow = np.array([[op_pos[s] for s, _ in edges], [op_pos[d] for _, d in edges]], dtype=np.int64).reshape(2, -1)
    return RawGraph(node_type, numeric, categorical, type_index, placement_arr.astype(np.int64), flow, level, n_ops)


def graph_of_trace(trace: Any) -> RawGraph:
    g = build_graph(trace.query, trace.hosts, trace.placement)
    g.meta["trace_id"] = getattr(trace, "trace_id", "")
    return g


@dataclass
class FeatureStats:
    """Robust scaling (median, IQR) and categorical vocabularies, fitted on training graphs only."""

    median: dict[str, list[float]]
    iqr: dict[str, list[float]]
    vocab: dict[str, list[list[str]]]  # type -> per categorical column, sorted values (index 0 = unknown)

    @classmethod
    def fit(cls, graphs: Sequence[RawGraph]) -> FeatureStats:
        if not graphs:
            msg = "cannot fit feature statistics on zero graphs"
            raise CostModelError(msg)
        median: dict[str, list[float]] = {}
        iqr: dict[str, list[float]] = {}
        vocab: dict[str, list[list[str]]] = {}
        for t in NODE_TYPES:
            mats = [g.numeric[t] for g in graphs if g.numeric[t].shape[0]]
            d = len(NUMERIC[t])
            x = np.concatenate(mats) if mats else np.zeros((0, d))
            med, spread = [], []
            for j in range(d):
                col = x[:, j][~np.isnan(x[:, j])] if x.shape[0] else np.zeros(0)
                if col.size == 0:
                    med.append(0.0)
                    spread.append(1.0)
                    continue
                q25, q50, q75 = np.percentile(col, [25, 50, 75])
                s = float(q75 - q25)
                if s <= 1e-9:  # degenerate column: fall back to the std, then 1
                    s = float(col.std()) if col.std() > 1e-9 else 1.0
                med.append(float(q50))
                spread.append(s)
            median[t], iqr[t] = med, spread
            cols: list[list[str]] = []
            for j in range(len(CATEGORICAL[t])):
                values = sorted({str(v) for g in graphs for v in g.categorical[t][:, j]} - {UNKNOWN})
                cols.append([UNKNOWN, *values])
            vocab[t] = cols
        return cls(median, iqr, vocab)

    def dim(self, t: str) -> int:
        return len(NUMERIC[t]) + sum(len(v) for v in self.vocab[t])

    def encode(self, t: str, numeric: np.ndarray, categorical: np.ndarray) -> np.ndarray:
        """Scaled numerics (missing -> median -> 0) and one-hot categoricals (unseen -> the unknown slot)."""
        n = numeric.shape[0]
        x = (numeric - np.asarray(self.median[t])) / np.asarray(self.iqr[t])
        x = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).clip(-10.0, 10.0)
        parts = [x.astype(np.float32)]
        for j, values in enumerate(self.vocab[t]):
            lookup = {v: i for i, v in enumerate(values)}
            hot = np.fromiter((lookup.get(str(v), 0) for v in categorical[:, j]), dtype=np.int64, count=n)
            onehot = np.zeros((n, len(values)), dtype=np.float32)
            onehot[np.arange(n), hot] = 1.0
            parts.append(onehot)
        return np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "iqr": self.iqr, "vocab": self.vocab}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FeatureStats:
        stale = [t for t in NODE_TYPES if len(d["median"].get(t, ())) != len(NUMERIC[t])]
        if stale:
            msg = (
                f"saved feature statistics do not match this version's node features ({', '.join(stale)}): the "
                "model was trained by an older adaptstream; train it again"
            )
            raise CostModelError(msg)
        return cls(dict(d["median"]), dict(d["iqr"]), dict(d["vocab"]))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> FeatureStats:
        return cls.from_dict(json.loads(Path(path).read_text()))


# ----------------------------------------------------------------------------------------------------
# npz shards (the PySpark featurisation job writes these; the loader reads them back)


def graphs_to_npz(graphs: Sequence[RawGraph], path: str | Path, extra: Mapping[str, np.ndarray] | None = None) -> None:
    """Pack raw graphs into one npz shard: concatenated arrays plus per-graph offsets."""
    arrays: dict[str, np.ndarray] = {}
    n_nodes = np.array([g.n_nodes for g in graphs], dtype=np.int64)
    arrays["n_nodes"] = n_nodes
    arrays["n_ops"] = np.array([g.n_ops for g in graphs], dtype=np.int64)
    arrays["n_flow"] = np.array([g.flow.shape[1] for g in graphs], dtype=np.int64)
    arrays["node_type"] = np.concatenate([g.node_type for g in graphs]) if graphs else np.zeros(0, np.int64)
    arrays["level"] = np.concatenate([g.level for g in graphs]) if graphs else np.zeros(0, np.int64)
    arrays["placement"] = np.concatenate([g.placement for g in graphs], axis=1) if graphs else np.zeros((2, 0))
    arrays["flow"] = np.concatenate([g.flow for g in graphs], axis=1) if graphs else np.zeros((2, 0))
    arrays["trace_id"] = np.array([str(g.meta.get("trace_id", "")) for g in graphs])
    for t in NODE_TYPES:
        arrays[f"count_{t}"] = np.array([g.numeric[t].shape[0] for g in graphs], dtype=np.int64)
        arrays[f"num_{t}"] = (
            np.concatenate([g.numeric[t] for g in graphs]) if graphs else np.zeros((0, len(NUMERIC[t])))
        )
        arrays[f"idx_{t}"] = np.concatenate([g.type_index[t] for g in graphs]) if graphs else np.zeros(0)
        cats = [g.categorical[t] for g in graphs]
        cat = np.concatenate(cats) if cats else np.zeros((0, len(CATEGORICAL[t])), dtype=object)
        arrays[f"cat_{t}"] = cat.astype(str) if cat.size else np.zeros(cat.shape, dtype="<U1")
    for k, v in (extra or {}).items():
        arrays[f"extra_{k}"] = v
    np.savez_compressed(path, **arrays)  # type: ignore[arg-type]  # numpy stubs type **kwds as bool


def graphs_from_npz(path: str | Path) -> tuple[list[RawGraph], dict[str, np.ndarray]]:
    z = np.load(path, allow_pickle=False)
    n = z["n_nodes"].shape[0]
    offs = {"node": 0, "flow": 0, "ops": 0, **{t: 0 for t in NODE_TYPES}}
    graphs = []
    for i in range(n):
        nn, no, nf = int(z["n_nodes"][i]), int(z["n_ops"][i]), int(z["n_flow"][i])
        numeric, categorical, type_index = {}, {}, {}
        for t in NODE_TYPES:
            c = int(z[f"count_{t}"][i])
            o = offs[t]
            numeric[t] = z[f"num_{t}"][o : o + c]
            categorical[t] = z[f"cat_{t}"][o : o + c].astype(object).reshape(c, len(CATEGORICAL[t]))
            type_index[t] = z[f"idx_{t}"][o : o + c].astype(np.int64)
            offs[t] += c
        g = RawGraph(
            node_type=z["node_type"][offs["node"] : offs["node"] + nn],
            numeric=numeric,
            categorical=categorical,
            type_index=type_index,
            placement=z["placement"][:, offs["ops"] : offs["ops"] + no].astype(np.int64),
            flow=z["flow"][:, offs["flow"] : offs["flow"] + nf].astype(np.int64),
            level=z["level"][offs["node"] : offs["node"] + nn],
            n_ops=no,
            meta={"trace_id": str(z["trace_id"][i])},
        )
        offs["node"] += nn
        offs["flow"] += nf
        offs["ops"] += no
        graphs.append(g)
    extra = {k[6:]: z[k] for k in z.files if k.startswith("extra_")}
    return graphs, extra


LABEL_FIELDS: tuple[str, ...] = ("throughput", "e2e_latency_ms", "proc_latency_ms", "backpressure", "success")


def label_vector(labels: Any) -> list[float]:
    """Labels as floats in LABEL_FIELDS order (booleans as 0/1, missing as NaN)."""
    out = []
    for f in LABEL_FIELDS:
        v = labels.get(f) if isinstance(labels, Mapping) else getattr(labels, f, None)
        out.append(math.nan if v is None else float(v))
    return out


def featurize_corpus(corpus_dir: str | Path, out_dir: str | Path, master: str | None = None) -> list[Path]:
    """Featurise every ``*.jsonl`` trace file under corpus_dir with a PySpark job into npz shards.

    Each Spark partition parses its lines, builds the raw graphs and writes one shard
    ``part-<file>-<partition>.npz`` (raw features + labels) to out_dir; the driver collects the shard paths.
    out_dir must be visible to the executors (always true for local masters; use a shared filesystem
    otherwise).
    """
    from adaptstream.spark.session import DEFAULT_MASTER, build_spark

    corpus = Path(corpus_dir)
    files = sorted(corpus.rglob("*.jsonl"))
    if not files:
        msg = f"no *.jsonl trace files under {corpus}"
        raise CostModelError(msg)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    spark = build_spark(master or DEFAULT_MASTER, app_name="adaptstream-featurize")
    sc = spark.sparkContext
    written: list[Path] = []
    for f in files:
        stem = f.relative_to(corpus).with_suffix("").as_posix().replace("/", "_")
        rdd = sc.textFile(str(f.resolve()))
        paths = rdd.mapPartitionsWithIndex(_shard_writer(str(out), stem)).collect()
        written.extend(Path(p) for p in paths)
    return written


def _shard_writer(out_dir: str, stem: str):
    def write(index: int, lines: Iterable[str]) -> Iterable[str]:
        from adaptstream.costmodel.model import Trace  # executor-side import

        graphs, labels = [], []
        for line in lines:
            if not line.strip():
                continue
            trace = Trace.from_dict(json.loads(line))
            graphs.append(graph_of_trace(trace))
            labels.append(label_vector(trace.labels))
        if not graphs:
            return []
        path = Path(out_dir) / f"part-{stem}-{index:05d}.npz"
        graphs_to_npz(graphs, path, extra={"labels": np.asarray(labels, dtype=np.float64)})
        return [str(path)]

    return write
