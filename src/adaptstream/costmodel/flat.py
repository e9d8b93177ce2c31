"""Flat-vector baseline (Ganapathi et al., ICDE 2009, as extended by Costream Sec. VII "Baselines").

One fixed-length vector per placed query: operator counts per kind, mean selectivity per kind, the number of
hosts used (and nothing else about the hardware: the flat vector has no place for per-host features), source
event rates and tuple widths, window statistics. LightGBM regressors (on log1p targets, i.e. MSLE) and
classifiers are trained on it, one per metric.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.costmodel.features import CATEGORICAL, NUMERIC, OP_KINDS, RawGraph, build_graph
from adaptstream.costmodel.train import METRICS, REGRESSION, GraphDataset, canonical_metric
from adaptstream.errors import CostModelError

FLAT_FEATURES: tuple[str, ...] = (
    *(f"count_{k}" for k in OP_KINDS),
    "sel_filter",
    "sel_window_agg",
    "sel_window_join",
    "n_hosts",
    "log_rate_sum",
    "log_rate_mean",
    "width_mean",
    "win_size_mean_count",
    "win_size_mean_time",
    "slide_ratio_mean",
    "n_sliding",
    "n_time_policy",
)


def _col(t: str, name: str) -> int:
    return NUMERIC[t].index(name)


def flat_vector(g: RawGraph) -> np.ndarray:
    """The baseline's features of one placed query (see FLAT_FEATURES)."""
    v: list[float] = [float(g.numeric[k].shape[0]) for k in OP_KINDS]
    for k in ("filter", "window_agg", "window_join"):
        x = g.numeric[k]
        v.append(float(np.nanmean(x[:, _col(k, "selectivity")])) if x.shape[0] else np.nan)
    v.append(float(g.numeric["host"].shape[0]))
    src = g.numeric["source"]
    rates = np.expm1(src[:, _col("source", "log:event_rate")]) if src.shape[0] else np.zeros(0)
    v.append(float(np.log1p(np.nansum(rates))))
    v.append(float(np.log1p(np.nanmean(rates))) if rates.size else np.nan)
    v.append(float(np.nanmean(np.expm1(src[:, _col("source", "log:tuple_width_out")]))) if src.shape[0] else np.nan)
    sizes: dict[str, list[float]] = {"count": [], "time": []}
    ratios, sliding, timed = [], 0, 0
    for k in ("window_agg", "window_join"):
        x, c = g.numeric[k], g.categorical[k]
        for r in range(x.shape[0]):
            policy = str(c[r, CATEGORICAL[k].index("window_policy")])
            wtype = str(c[r, CATEGORICAL[k].index("window_type")])
            size = float(np.expm1(x[r, _col(k, "log:window_size")]))
            sizes["time" if policy.startswith("time") else "count"].append(size)
            ratios.append(float(x[r, _col(k, "slide_ratio")]))
            sliding += wtype.startswith("slid")
            timed += policy.startswith("time")
    v.append(float(np.mean(sizes["count"])) if sizes["count"] else np.nan)
    v.append(float(np.mean(sizes["time"])) if sizes["time"] else np.nan)
    v.append(float(np.nanmean(ratios)) if ratios else np.nan)
    v += [float(sliding), float(timed)]
    return np.asarray(v, dtype=np.float64)


def flat_matrix(graphs: Sequence[RawGraph]) -> np.ndarray:
    if not graphs:
        return np.zeros((0, len(FLAT_FEATURES)))
    return np.stack([flat_vector(g) for g in graphs])


class FlatVectorModel:
    """LightGBM per metric on the flat vector; the same predictor protocol as CostEnsembles."""

    def __init__(self, boosters: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> None:
        self.boosters = dict(boosters)
        self.params = dict(params or {})

    @classmethod
    def fit(
        cls,
        train: GraphDataset,
        val: GraphDataset,
        metrics: Sequence[str] = METRICS,
        n_estimators: int = 400,
        seed: int = 0,
        threads: int = 2,
    ) -> FlatVectorModel:
        import lightgbm as lgb

        xtr, xva = flat_matrix(train.graphs), flat_matrix(val.graphs)
        boosters = {}
        for metric in (canonical_metric(m) for m in metrics):
            tr, va = train.usable(metric), val.usable(metric)
            if len(tr) < 2 or len(va) < 1:
                msg = f"not enough labelled traces for the flat baseline's {metric}"
                raise CostModelError(msg)
            reg = metric in REGRESSION
            ytr, yva = train.column(metric)[tr], val.column(metric)[va]
            if reg:
                ytr, yva = np.log1p(ytr), np.log1p(yva)
            params = {
                "objective": "regression" if reg else "binary",
                "learning_rate": 0.05,
                "num_leaves": 31,
                "min_data_in_leaf": 20,
                "feature_fraction": 0.9,
                "bagging_fraction": 0.9,
                "bagging_freq": 1,
                "seed": seed,
                "num_threads": threads,
                "verbose": -1,
            }
            if not reg:
                # re-weight the classes and early-stop on AUC: with plain log-loss the re-weighted model looks
                # worse on the (unweighted) validation set after a tree or two and stops near a constant
                params["is_unbalance"] = True
                params["metric"] = "auc"
            dtr = lgb.Dataset(xtr[tr], ytr, feature_name=list(FLAT_FEATURES))
            dva = lgb.Dataset(xva[va], yva, reference=dtr)
            boosters[metric] = lgb.train(
                params,
                dtr,
                num_boost_round=n_estimators,
                valid_sets=[dva],
                callbacks=[lgb.early_stopping(30, verbose=False)],
            )
        return cls(boosters, {"n_estimators": n_estimators, "seed": seed})

    def predict_graphs(self, graphs: Sequence[RawGraph]) -> dict[str, np.ndarray]:
        x = flat_matrix(graphs)
        out = {}
        for metric, b in self.boosters.items():
            p = b.predict(x, num_iteration=b.best_iteration or None)
            out[metric] = np.expm1(p).clip(min=0.0) if metric in REGRESSION else p >= 0.5
        return out

    def predict_placements(
        self, query: Any, hosts: Sequence[Any], placements: Sequence[Mapping[str, str]]
    ) -> dict[str, np.ndarray]:
        return self.predict_graphs([build_graph(query, hosts, p) for p in placements])

    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for metric, b in self.boosters.items():
            b.save_model(str(d / f"{metric}.txt"))
        (d / "flat.json").write_text(json.dumps({"metrics": list(self.boosters), "params": self.params}))

    @classmethod
    def load(cls, directory: str | Path) -> FlatVectorModel:
        import lightgbm as lgb

        d = Path(directory)
        if not (d / "flat.json").exists():
            msg = f"{d} holds no flat-vector baseline (flat.json missing)"
            raise CostModelError(msg)
        meta = json.loads((d / "flat.json").read_text())
        return cls({m: lgb.Booster(model_file=str(d / f"{m}.txt")) for m in meta["metrics"]}, meta["params"])
