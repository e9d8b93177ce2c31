"""Ensembles of Costream models (Sec. IV-A): k models per metric differing only in their seed.

Regression metrics average the members' predictions; classification metrics take a majority vote of the
members' binary decisions (`vote`, the paper's) or cut their mean probability at 0.5 (`mean`, a soft vote, used
where members of two differently trained GNNs are pooled). A directory of ensembles has one sub-folder per metric
and a manifest.json.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from adaptstream.costmodel.features import RawGraph, build_graph
from adaptstream.costmodel.train import (
    CLASSIFICATION,
    METRICS,
    REGRESSION,
    GraphDataset,
    TrainConfig,
    TrainedModel,
    canonical_metric,
    train_model,
)
from adaptstream.errors import CostModelError

MANIFEST = "manifest.json"
Combine = Literal["vote", "mean"]  # how a classification ensemble turns its members' probabilities into a decision
COMBINES: tuple[Combine, ...] = ("vote", "mean")


class MetricEnsemble:
    """Several TrainedModels for one metric."""

    def __init__(self, members: Sequence[TrainedModel], combine: Combine = "vote") -> None:
        if not members:
            msg = "an ensemble needs at least one member"
            raise CostModelError(msg)
        metrics = {m.metric for m in members}
        if len(metrics) != 1:
            msg = f"ensemble members predict different metrics: {sorted(metrics)}"
            raise CostModelError(msg)
        if combine not in COMBINES:
            msg = f"unknown ensemble combine {combine!r}; valid: {', '.join(COMBINES)}"
            raise CostModelError(msg)
        self.members = list(members)
        self.metric = members[0].metric
        self.combine_rule = combine

    def member_predictions(self, graphs: Sequence[RawGraph]) -> np.ndarray:
        """[k, n]: values (regression) or positive-class probabilities (classification)."""
        return np.stack([m.predict(graphs) for m in self.members])

    def combine(self, per_member: np.ndarray) -> np.ndarray:
        if self.metric in REGRESSION:
            return per_member.mean(axis=0)
        if self.combine_rule == "mean":
            return per_member.mean(axis=0) >= 0.5
        votes = (per_member >= 0.5).sum(axis=0)
        return votes * 2 > per_member.shape[0]  # strict majority; ties (even k) count as negative

    def predict(self, graphs: Sequence[RawGraph]) -> np.ndarray:
        return self.combine(self.member_predictions(graphs))


class CostEnsembles:
    """One MetricEnsemble per metric; implements the predictor protocol used by the placement optimizer."""

    def __init__(self, ensembles: Mapping[str, MetricEnsemble], info: Mapping[str, Any] | None = None) -> None:
        self.ensembles = dict(ensembles)
        self.info = dict(info or {})

    @property
    def metrics(self) -> list[str]:
        return [m for m in METRICS if m in self.ensembles]

    def predict_graphs(self, graphs: Sequence[RawGraph]) -> dict[str, np.ndarray]:
        return {m: e.predict(graphs) for m, e in self.ensembles.items()}

    def predict_placements(
        self, query: Any, hosts: Sequence[Any], placements: Sequence[Mapping[str, str]]
    ) -> dict[str, np.ndarray]:
        graphs = [build_graph(query, hosts, p) for p in placements]
        return self.predict_graphs(graphs)

    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        files: dict[str, list[str]] = {}
        for metric, ens in self.ensembles.items():
            files[metric] = []
            for i, m in enumerate(ens.members):
                rel = f"{metric}/member{i}.pt"
                m.save(d / rel)
                files[metric].append(rel)
        combine = {m: e.combine_rule for m, e in self.ensembles.items()}
        (d / MANIFEST).write_text(json.dumps({"files": files, "combine": combine, "info": self.info}, indent=1))

    @classmethod
    def load(cls, directory: str | Path, metrics: Sequence[str] | None = None) -> CostEnsembles:
        d = Path(directory)
        manifest = d / MANIFEST
        if not manifest.exists():
            msg = f"{d} holds no trained cost models ({MANIFEST} missing); run `adaptstream costmodel train` first"
            raise CostModelError(msg)
        data = json.loads(manifest.read_text())
        wanted = [canonical_metric(m) for m in metrics] if metrics else list(data["files"])
        missing = [m for m in wanted if m not in data["files"]]
        if missing:
            msg = f"{d} has no models for {missing}; it has {sorted(data['files'])}"
            raise CostModelError(msg)
        rule = data.get("combine", {})  # absent in directories written before the soft vote: majority vote
        ens = {
            m: MetricEnsemble([TrainedModel.load(d / f) for f in data["files"][m]], rule.get(m, "vote")) for m in wanted
        }
        return cls(ens, data.get("info", {}))


ProgressFn = Callable[[dict[str, Any]], None]


def train_ensembles(
    train: GraphDataset,
    val: GraphDataset,
    base: TrainConfig,
    metrics: Sequence[str] = METRICS,
    members: int = 3,
    on_epoch: ProgressFn | None = None,
) -> CostEnsembles:
    """Train `members` models per metric with seeds base.seed, base.seed+1, ... on shared feature
    statistics."""
    from adaptstream.costmodel.features import FeatureStats

    stats = FeatureStats.fit(train.graphs)
    out: dict[str, MetricEnsemble] = {}
    t0 = time.perf_counter()
    for metric in (canonical_metric(m) for m in metrics):
        models = []
        for k in range(members):
            cfg = replace(base, metric=metric, seed=base.seed + k)
            models.append(train_model(train, val, cfg, stats=stats, on_epoch=on_epoch))
        out[metric] = MetricEnsemble(models)
    info = {
        "n_train": len(train),
        "n_val": len(val),
        "members": members,
        "config": {k: v for k, v in base.__dict__.items() if k not in ("metric", "seed")},
        "seconds": round(time.perf_counter() - t0, 1),
        "classification": list(CLASSIFICATION),
    }
    return CostEnsembles(out, info)
