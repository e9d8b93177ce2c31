"""Training Costream models: one GNN per metric (Sec. IV-A), MSLE for T/Le/Lp, BCE for backpressure/success.

Regression targets are log1p(y), standardised; a squared error on that scale is the paper's MSLE (up to a
constant factor). Early stopping keeps the weights with the best validation median q-error (regression) or
balanced accuracy (classification). A checkpoint holds weights, configs, the fitted FeatureStats and the
target
scaling, so a loaded model featurises new graphs exactly as in training.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from adaptstream.costmodel.features import (
    LABEL_FIELDS,
    NUMERIC,
    FeatureStats,
    RawGraph,
    graph_of_trace,
    graphs_from_npz,
    label_vector,
)
from adaptstream.costmodel.gnn import (
    Batch,
    CostGNN,
    EncodedGraph,
    GNNConfig,
    collate,
    default_device,
    encode_graphs,
)
from adaptstream.costmodel.loadprior import KINDS as CLASS_PRIORS
from adaptstream.costmodel.loadprior import LoadPrior
from adaptstream.costmodel.qerror import balanced_accuracy, q_errors
from adaptstream.errors import CostModelError

REGRESSION: tuple[str, ...] = ("throughput", "e2e_latency_ms", "proc_latency_ms")
CLASSIFICATION: tuple[str, ...] = ("backpressure", "success")
METRICS: tuple[str, ...] = REGRESSION + CLASSIFICATION
SHORT = {
    "throughput": "T",
    "e2e_latency_ms": "Le",
    "proc_latency_ms": "Lp",
    "backpressure": "R_O",
    "success": "S",
}


def canonical_metric(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    aliases = {
        "t": "throughput",
        "le": "e2e_latency_ms",
        "e2e_latency": "e2e_latency_ms",
        "lp": "proc_latency_ms",
        "proc_latency": "proc_latency_ms",
        "ro": "backpressure",
        "r_o": "backpressure",
        "s": "success",
    }
    key = aliases.get(key, key)
    if key not in METRICS:
        msg = f"unknown metric {name!r}; valid choices: {', '.join(METRICS)} (or T, Le, Lp, RO, S)"
        raise CostModelError(msg)
    return key


# ----------------------------------------------------------------------------------------------------
# data


@dataclass
class GraphDataset:
    """Raw graphs with their label matrix (columns = LABEL_FIELDS) and per-trace metadata for grouping."""

    graphs: list[RawGraph]
    labels: np.ndarray
    meta: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.graphs)

    @classmethod
    def from_traces(cls, traces: Iterable[Any]) -> GraphDataset:
        graphs, labels, meta = [], [], []
        for t in traces:
            graphs.append(graph_of_trace(t))
            labels.append(label_vector(t.labels) if t.labels is not None else [math.nan] * len(LABEL_FIELDS))
            meta.append(trace_meta(t))
        return cls(graphs, np.asarray(labels, dtype=np.float64).reshape(-1, len(LABEL_FIELDS)), meta)

    @classmethod
    def from_npz(cls, paths: Sequence[str | Path]) -> GraphDataset:
        graphs, labels = [], []
        for p in paths:
            g, extra = graphs_from_npz(p)
            graphs.extend(g)
            labels.append(extra["labels"])
        lab = np.concatenate(labels) if labels else np.zeros((0, len(LABEL_FIELDS)))
        return cls(graphs, lab, [{} for _ in graphs])

    def subset(self, idx: Sequence[int] | np.ndarray) -> GraphDataset:
        idx = list(np.asarray(idx, dtype=np.int64))
        meta = [self.meta[i] for i in idx] if self.meta else []
        return GraphDataset([self.graphs[i] for i in idx], self.labels[idx], meta)

    def column(self, metric: str) -> np.ndarray:
        return self.labels[:, LABEL_FIELDS.index(metric)]

    def usable(self, metric: str) -> np.ndarray:
        """Indices with a label for this metric; regression also needs success and a positive finite value."""
        y = self.column(metric)
        ok = np.isfinite(y)
        if metric in REGRESSION:
            s = self.column("success")
            ok &= (y > 0) & (s == 1)
        return np.flatnonzero(ok)


def trace_meta(trace: Any) -> dict[str, Any]:
    """Grouping keys for evaluation (query type, filters, mean hardware of the hosts that run operators)."""
    q = trace.query
    used = {trace.placement[o.id] for o in q.operators}
    hosts = [h for h in trace.hosts if h.id in used]
    return {
        "trace_id": trace.trace_id,
        "query_type": q.query_type.split("+")[0],
        "n_filters": q.n_filters,
        "max_filter_chain": max_filter_chain(q),
        "n_hosts": len(hosts),
        "cpu": float(np.mean([h.cpu for h in hosts])),
        "ram_mb": float(np.mean([h.ram_mb for h in hosts])),
        "bandwidth_mbits": float(np.mean([h.bandwidth_mbits for h in hosts])),
        "latency_ms": float(np.mean([h.latency_ms for h in hosts])),
        "host_values": {
            f: sorted({float(getattr(h, f)) for h in hosts}) for f in ("cpu", "ram_mb", "bandwidth_mbits", "latency_ms")
        },
        "origin": getattr(trace.labels, "origin", None),
    }


def max_filter_chain(query: Any) -> int:
    """Longest run of consecutive filter operators along the data flow."""
    kinds = {o.id: o.kind for o in query.operators}
    best: dict[str, int] = {}
    for op in query.topological_order():
        ups = [best[u] for u in query.upstream(op.id)]
        best[op.id] = (max(ups, default=0) + 1) if kinds[op.id] == "filter" else 0
    return max(best.values(), default=0)


# ----------------------------------------------------------------------------------------------------
# model wrapper


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one model; defaults are sized for a 2-core CPU (see docs/results/costmodel.md)."""

    metric: str = "proc_latency_ms"
    hidden: int = 64
    epochs: int = 40
    batch_size: int = 512
    lr: float = 3e-3
    weight_decay: float = 0.0
    patience: int = 6
    seed: int = 0
    message_passing: str = "ordered"
    hardware: str = "full"
    traditional_rounds: int = 3
    max_seconds: float | None = None
    device: str | None = None
    prior: str = "rate"  # throughput: learn log T minus the sink's expected rate (costmodel/rates.py); "none"
    # classification: "load" adds a logistic regression on the busiest host's load, fitted on the training traces,
    # to the GNN's logit (costmodel/loadprior.py); "none"
    class_prior: str = "none"

    def gnn_config(self) -> GNNConfig:
        return GNNConfig(
            hidden=self.hidden,
            message_passing=self.message_passing,
            hardware=self.hardware,
            traditional_rounds=self.traditional_rounds,
        )


def log_prior(graphs: Sequence[RawGraph], config: TrainConfig) -> np.ndarray:
    """Per graph, the log1p value a regression output is added to: for throughput with ``prior="rate"`` the
    sink's expected output rate, else 0. Why: the rate is a product of source rates, selectivities and window
    lengths that a small real corpus cannot teach the GNN (docs/testbed.md); the GNN learns the correction."""
    out = np.zeros(len(graphs))
    if config.metric != "throughput" or config.prior != "rate":
        return out
    col = NUMERIC["sink"].index("log:rate_out_est")
    for i, g in enumerate(graphs):
        x = g.numeric["sink"]
        if x.shape[0] and np.isfinite(x[0, col]):
            out[i] = float(x[0, col])
    return out


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class TrainedModel:
    """A trained single-metric GNN with its feature statistics and target scaling."""

    def __init__(
        self,
        model: CostGNN,
        stats: FeatureStats,
        config: TrainConfig,
        target_mu: float = 0.0,
        target_sd: float = 1.0,
        history: list[dict[str, float]] | None = None,
        class_prior: LoadPrior | None = None,
    ) -> None:
        self.model = model
        self.class_prior = class_prior
        self.stats = stats
        self.config = config
        self.target_mu = target_mu
        self.target_sd = target_sd
        self.history = history or []

    @property
    def metric(self) -> str:
        return self.config.metric

    @property
    def is_regression(self) -> bool:
        return self.metric in REGRESSION

    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def raw_outputs(self, graphs: Sequence[RawGraph], batch_size: int = 512) -> np.ndarray:
        return self.outputs_encoded(encode_graphs(graphs, self.stats), batch_size)

    def outputs_encoded(self, encoded: Sequence[EncodedGraph], batch_size: int = 512) -> np.ndarray:
        self.model.eval()
        dev = self.device()
        outs = []
        with torch.no_grad():
            for i in range(0, len(encoded), batch_size):
                b = collate(encoded[i : i + batch_size], self.stats).to(dev)
                outs.append(self.model(b).float().cpu().numpy())
        return np.concatenate(outs) if outs else np.zeros(0)

    def decode(self, raw: np.ndarray, prior: np.ndarray | None = None) -> np.ndarray:
        """Regression: the metric value; classification: probability of the positive class (``prior``:
        :meth:`offsets` of the graphs)."""
        off = 0.0 if prior is None else prior
        if self.is_regression:
            z = raw * self.target_sd + self.target_mu + off
            return np.expm1(np.clip(z, -20.0, 40.0)).clip(min=0.0)
        return 1.0 / (1.0 + np.exp(-np.clip(raw + off, -50.0, 50.0)))  # keeps exp from overflowing

    def offsets(self, graphs: Sequence[RawGraph]) -> np.ndarray:
        """Per graph, what the GNN's output is added to: :func:`log_prior` for a regression, the class prior's
        logit (0 without one) for a classification."""
        if self.is_regression:
            return log_prior(graphs, self.config)
        if self.class_prior is None:
            return np.zeros(len(graphs))
        return self.class_prior.logits(graphs)

    def predict(self, graphs: Sequence[RawGraph]) -> np.ndarray:
        return self.decode(self.raw_outputs(graphs), self.offsets(graphs))

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "state_dict": {k: v.cpu() for k, v in self.model.state_dict().items()},
                "train_config": asdict(self.config),
                "stats": self.stats.to_dict(),
                "target_mu": self.target_mu,
                "target_sd": self.target_sd,
                "history": self.history,
                "class_prior": None if self.class_prior is None else self.class_prior.to_dict(),
            },
            path,
        )

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device | None = None) -> TrainedModel:
        p = Path(path)
        if not p.exists():
            msg = f"model checkpoint {p} does not exist"
            raise CostModelError(msg)
        try:
            ck = torch.load(p, map_location="cpu", weights_only=False)
        except Exception as exc:  # a corrupt or foreign file
            msg = f"cannot read model checkpoint {p}: {exc}"
            raise CostModelError(msg) from exc
        cfg = TrainConfig(**{"prior": "none", **ck["train_config"]})  # saved before priors existed: none
        stats = FeatureStats.from_dict(ck["stats"])
        model = CostGNN(stats, cfg.gnn_config())
        model.load_state_dict(ck["state_dict"])
        model.to(torch.device(device) if device else default_device())
        prior = None if ck.get("class_prior") is None else LoadPrior.from_dict(ck["class_prior"])
        return cls(model, stats, cfg, ck["target_mu"], ck["target_sd"], ck.get("history", []), prior)


# ----------------------------------------------------------------------------------------------------
# training loop


EpochCallback = Callable[[dict[str, Any]], None]


def _targets(ds: GraphDataset, config: TrainConfig, idx: np.ndarray) -> np.ndarray:
    y = ds.column(config.metric)[idx]
    if config.metric not in REGRESSION:
        return y
    return np.log1p(y) - log_prior([ds.graphs[i] for i in idx], config)


def _batches(
    encoded: Sequence[EncodedGraph],
    y: np.ndarray,
    off: np.ndarray,
    stats: FeatureStats,
    batch_size: int,
    rng: np.random.Generator,
    device: torch.device,
) -> list[tuple[Batch, torch.Tensor, torch.Tensor]]:
    """Collate once (seeded membership) and keep on the device; epochs only shuffle the batch order. `off`: what
    the model's output is added to before the loss (a class prior's logit; 0 for regression, whose prior is in
    the target)."""
    order = rng.permutation(len(encoded))
    out = []
    for i in range(0, len(order), batch_size):
        sel = order[i : i + batch_size]
        b = collate([encoded[j] for j in sel], stats).to(device)
        yt, ot = (torch.from_numpy(a[sel].astype(np.float32)).to(device) for a in (y, off))
        out.append((b, yt, ot))
    return out


def _class_prior(
    train: GraphDataset, idx: np.ndarray, config: TrainConfig, init: TrainedModel | None
) -> LoadPrior | None:
    """The class prior a model trains with: the starting model's when fine-tuning, else fitted on the training
    traces when `config.class_prior` asks for one (classification only)."""
    if config.class_prior not in CLASS_PRIORS:
        msg = f"unknown class prior {config.class_prior!r}; valid: {', '.join(CLASS_PRIORS)}"
        raise CostModelError(msg)
    if init is not None and init.class_prior is not None:
        if config.class_prior == "none":  # the saved config would say "none" while the model adds a prior
            msg = "the starting model has a class prior; fine-tuning keeps it (class_prior 'load' or unset)"
            raise CostModelError(msg)
        return init.class_prior
    if config.metric in REGRESSION or config.class_prior == "none":
        return None
    return LoadPrior.fit([train.graphs[i] for i in idx], train.column(config.metric)[idx])


def _predict_batches(model: CostGNN, batches: Sequence[Batch]) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        return np.concatenate([model(b).float().cpu().numpy() for b in batches])


def validation_score(metric: str, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Lower is better: median q-error (regression) or 1 - balanced accuracy (classification)."""
    if metric in REGRESSION:
        return float(np.median(q_errors(y_true, y_pred)))
    return 1.0 - balanced_accuracy(y_true.astype(bool), y_pred >= 0.5)


def stopping_score(metric: str, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Lower is better; what early stopping watches. Regression: `validation_score`. Classification: the log-loss
    averaged per class (balanced), not 1 - balanced accuracy.

    Why: a validation slice of the real corpus holds a handful of failed runs, so balanced accuracy moves in steps
    of several points and early stopping kept whichever epoch happened to flip one of them; the balanced log-loss
    moves with every probability (real-only success GNN on one fold partition, out of fold: ensemble 0.87 ->
    0.88, members 0.75-0.86 -> 0.84-0.89; docs/testbed.md, sixth update). Falls back to `validation_score` when
    the slice holds one class."""
    yb = np.asarray(y_true).astype(bool)
    if metric in REGRESSION or yb.all() or not yb.any():
        return validation_score(metric, y_true, y_pred)
    p = np.clip(np.asarray(y_pred, dtype=float), 1e-4, 1.0 - 1e-4)
    return float((-np.log(p[yb]).mean() - np.log(1.0 - p[~yb]).mean()) / 2.0)


def train_model(
    train: GraphDataset,
    val: GraphDataset,
    config: TrainConfig,
    stats: FeatureStats | None = None,
    on_epoch: EpochCallback | None = None,
    init: TrainedModel | None = None,
) -> TrainedModel:
    """Train one model for config.metric with early stopping; `init` continues from a trained model
    (fine-tuning)."""
    metric = canonical_metric(config.metric)
    config = replace(config, metric=metric)
    seed_everything(config.seed)
    tr_idx, va_idx = train.usable(metric), val.usable(metric)
    if len(tr_idx) < 2 or len(va_idx) < 1:
        msg = f"not enough labelled traces for {metric}: {len(tr_idx)} train, {len(va_idx)} validation"
        raise CostModelError(msg)
    if init is not None:
        stats = init.stats
    stats = stats or FeatureStats.fit(train.graphs)
    device = torch.device(config.device) if config.device else default_device()
    y_tr = _targets(train, config, tr_idx)
    if init is not None:
        mu, sd = init.target_mu, init.target_sd
        model = init.model
    else:
        mu, sd = (float(y_tr.mean()), float(y_tr.std() or 1.0)) if metric in REGRESSION else (0.0, 1.0)
        model = CostGNN(stats, config.gnn_config())
    model.to(device)
    y_tr_n = (y_tr - mu) / sd if metric in REGRESSION else y_tr
    enc_tr = encode_graphs([train.graphs[i] for i in tr_idx], stats)
    enc_va = encode_graphs([val.graphs[i] for i in va_idx], stats)
    y_va = val.column(metric)[va_idx]
    loss_fn = _loss_fn(metric, y_tr, device)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=max(1, config.patience // 2))
    rng = np.random.default_rng(config.seed)
    wrapper = TrainedModel(model, stats, config, mu, sd, class_prior=_class_prior(train, tr_idx, config, init))
    prior_va = wrapper.offsets([val.graphs[i] for i in va_idx])
    off_tr = np.zeros(len(tr_idx)) if metric in REGRESSION else wrapper.offsets([train.graphs[i] for i in tr_idx])
    train_batches = _batches(enc_tr, y_tr_n, off_tr, stats, config.batch_size, rng, device)
    val_batches = [collate(enc_va[i : i + 1024], stats).to(device) for i in range(0, len(enc_va), 1024)]
    fine_tuning = init is not None
    best = _early_stopping(wrapper, train_batches, val_batches, (y_va, prior_va), (opt, sched, loss_fn), rng, on_epoch,
                           keep_start=fine_tuning)  # fmt: skip
    model.load_state_dict(best)
    return wrapper


def _early_stopping(
    wrapper: TrainedModel,
    train_batches: list,
    val_batches: list,
    val: tuple[np.ndarray, np.ndarray],
    optim: tuple[torch.optim.Optimizer, Any, nn.Module],
    rng: np.random.Generator,
    on_epoch: EpochCallback | None,
    keep_start: bool,
) -> dict[str, torch.Tensor]:
    """Epochs until the validation score stops improving for `patience` epochs (or the time cap); returns the best
    weights and records the history on `wrapper`. `keep_start` (fine-tuning) keeps the starting weights unless
    training beats them."""
    model, config, metric = wrapper.model, wrapper.config, wrapper.config.metric
    (y_va, prior_va), (opt, sched, loss_fn) = val, optim
    best_score = math.inf
    if keep_start:
        best_score = stopping_score(metric, y_va, wrapper.decode(_predict_batches(model, val_batches), prior_va))
    best = (best_score, {k: v.detach().clone() for k, v in model.state_dict().items()}, 0)
    history: list[dict[str, float]] = []
    t0 = time.perf_counter()
    for epoch in range(1, config.epochs + 1):
        train_loss = _epoch(model, train_batches, rng, opt, loss_fn)
        pred = wrapper.decode(_predict_batches(model, val_batches), prior_va)
        score = stopping_score(metric, y_va, pred)
        sched.step(score)
        rec = {"epoch": epoch, "train_loss": train_loss, "val_score": score, "seconds": time.perf_counter() - t0}
        history.append(rec)
        if on_epoch:
            on_epoch({**rec, "metric": metric, "seed": config.seed})
        if score < best[0] - 1e-6:
            best = (score, {k: v.detach().clone() for k, v in model.state_dict().items()}, epoch)
        elif epoch - best[2] >= config.patience:
            break
        if config.max_seconds is not None and time.perf_counter() - t0 > config.max_seconds:
            break
    wrapper.history = history
    return best[1]


def _loss_fn(metric: str, y_tr: np.ndarray, device: torch.device) -> nn.Module:
    """MSE for a regression target; for a class, BCE weighted by the class balance of the training labels."""
    if metric in REGRESSION:
        return nn.MSELoss()
    pos = float(y_tr.mean())
    pos_weight = torch.tensor([(1 - pos) / pos if 0 < pos < 1 else 1.0], device=device)
    return nn.BCEWithLogitsLoss(pos_weight=pos_weight)


def _epoch(model: nn.Module, batches: list, rng: np.random.Generator, opt: Any, loss_fn: nn.Module) -> float:
    """One pass over the training batches in a random order; the mean loss per example."""
    model.train()
    total, count = 0.0, 0
    for k in rng.permutation(len(batches)):
        b, y, off = batches[k]
        opt.zero_grad()
        loss = loss_fn(model(b) + off, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        total += loss.item() * len(y)
        count += len(y)
    return total / max(count, 1)


def _group_ids(groups: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    g = np.asarray(groups)
    if g.shape[0] != n:
        msg = f"{g.shape[0]} group ids for {n} traces"
        raise CostModelError(msg)
    return g


def holdout_split(
    n: int, val_fraction: float, seed: int, groups: Sequence[int] | np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) indices: a seeded random `val_fraction` of the items (at least one), or of the groups
    when `groups` gives one id per item. Grouping by query keeps a query's other placement out of training, so
    the validation score judges generalisation to unseen queries, not memorisation."""
    rng = np.random.default_rng(seed)
    if groups is None:
        order = rng.permutation(n)
        n_val = max(1, int(n * val_fraction))
        return order[n_val:], order[:n_val]
    g = _group_ids(groups, n)
    uniq = rng.permutation(np.unique(g))
    if len(uniq) < 2:
        msg = f"{len(uniq)} group(s) cannot be split into training and validation"
        raise CostModelError(msg)
    in_val = np.isin(g, uniq[: max(1, int(len(uniq) * val_fraction))])
    return np.flatnonzero(~in_val), np.flatnonzero(in_val)


def fine_tune(
    base: TrainedModel,
    extra: GraphDataset,
    epochs: int = 15,
    lr: float = 5e-4,
    val_fraction: float = 0.2,
    seed: int = 0,
    groups: Sequence[int] | np.ndarray | None = None,
    class_prior: str | None = None,
) -> TrainedModel:
    """Few-shot fine-tuning (Costream Exp. 5b): continue training a copy on a small extra set.

    Keeps the base model's feature statistics and target scaling; early-stops on a held-out slice of `extra`.
    With `groups` (one id per trace, e.g. its query) the slice holds whole groups: a query's other placement left
    in training would make the slice judge memorisation, not generalisation. `class_prior` ("load"): a classifier
    without a class prior gets one, fitted on the training part of `extra`, and learns around it from here on; the
    base GNN's logit already holds its own load evidence, so at the first epoch the two add up (the keep-the-start
    check compares against base + prior, not the base alone). A model with a prior keeps it ("none" is refused).
    """
    import copy

    clone = TrainedModel(
        copy.deepcopy(base.model),
        base.stats,
        base.config,
        base.target_mu,
        base.target_sd,
        list(base.history),
        base.class_prior,
    )
    usable = extra.usable(canonical_metric(base.config.metric))  # the slice must hold labelled traces
    sub = None if groups is None else _group_ids(groups, len(extra))[usable]
    tr_i, va_i = holdout_split(len(usable), val_fraction, seed, sub)
    tr_i, va_i = usable[tr_i], usable[va_i]
    cfg = replace(base.config, epochs=epochs, lr=lr, seed=seed, patience=max(3, epochs // 3))
    if class_prior is not None:
        cfg = replace(cfg, class_prior=class_prior)
    return train_model(extra.subset(tr_i), extra.subset(va_i), cfg, init=clone)


def subsample(ds: GraphDataset, n: int | None, seed: int) -> GraphDataset:
    """At most `n` traces, drawn without replacement (seeded), in their original order."""
    if n is None or len(ds) <= n:
        return ds
    return ds.subset(np.sort(np.random.default_rng(seed).choice(len(ds), n, replace=False)))


# ----------------------------------------------------------------------------------------------------
# scoring
