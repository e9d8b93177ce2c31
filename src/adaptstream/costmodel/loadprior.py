"""A learned logit offset for a class metric from the busiest host's expected load (`TrainConfig.class_prior`).

Why: on the real testbed nearly every failed run has a host, mostly the small one, given more rows than its CPU
share can take; the first output row does not reach the sink before the run ends. The host nodes carry that load
per core and per MB (`features.host_usage`), but a GNN trained on a few hundred real traces uses it no better
than the two numbers alone: on the 732 corpus traces a balanced logistic regression on the largest
``log:rows_in_per_core`` and ``log:state_rows_per_mb`` of a placement scored success at balanced 0.909-0.913
out of fold (eval-real's query folds of partitions 0-2; benchmarks/costmodel_prior_alone.py), the real-only GNN
without the prior at 0.87-0.90. As the throughput prior (`train.log_prior`) hands the GNN the expected rate and
lets it learn the correction, this prior hands the classifier the load's logit and the GNN learns what the two
maxima miss. Fitted on the training traces only.

Limits: the L2 penalty is a fixed 1e-2 against class weights that sum to the number of traces, so on a nearly
separable training set the logits grow large (on the 732 corpus traces they span -11..+8; fitted on 10 % of them
-17..+16) and the GNN then has little gradient left to correct them; a missing load value (unknown CPU) counts
as 0, the lightest load, when every host lacks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptstream.costmodel.features import HOST, NUMERIC
from adaptstream.errors import CostModelError

#: host-node features whose largest value over a placement's hosts the prior reads
FEATURES: tuple[str, ...] = ("log:rows_in_per_core", "log:state_rows_per_mb")
KINDS: tuple[str, ...] = ("none", "load")
_L2 = 1e-2
_ITERS = 50


def load_maxima(graphs: Sequence[Any]) -> np.ndarray:
    """(n graphs, len(FEATURES)): per graph, the largest value of each feature over its host nodes (0 if none)."""
    cols = [NUMERIC[HOST].index(f) for f in FEATURES]
    out = np.zeros((len(graphs), len(cols)))
    for i, g in enumerate(graphs):
        x = g.numeric.get(HOST)
        if x is not None and x.shape[0]:
            v = np.nan_to_num(np.asarray(x, dtype=float)[:, cols], nan=0.0, posinf=0.0, neginf=0.0)
            out[i] = v.max(axis=0)
    return out


@dataclass(frozen=True)
class LoadPrior:
    """Logit = coef[0] + coef[1:] . load_maxima (coefficients of a class-balanced logistic regression)."""

    coef: tuple[float, ...]

    def logits(self, graphs: Sequence[Any]) -> np.ndarray:
        c = np.asarray(self.coef, dtype=float)
        return c[0] + load_maxima(graphs) @ c[1:]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "load", "features": list(FEATURES), "coef": list(self.coef)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadPrior:
        if list(d.get("features", [])) != list(FEATURES) or len(d.get("coef", [])) != len(FEATURES) + 1:
            msg = f"class prior saved over features {d.get('features')}, this version reads {list(FEATURES)}"
            raise CostModelError(msg)
        return cls(tuple(float(v) for v in d["coef"]))

    @classmethod
    def fit(cls, graphs: Sequence[Any], y: np.ndarray) -> LoadPrior:
        """Class-balanced logistic regression (Newton steps, small L2) of `y` (0/1) on `load_maxima`; with one
        class only the prior is that class's balanced log-odds 0 (no offset)."""
        yb = np.asarray(y, dtype=float)
        if len(yb) != len(graphs):
            msg = f"{len(yb)} labels for {len(graphs)} graphs"
            raise CostModelError(msg)
        pos = yb.mean() if len(yb) else 0.0
        if not 0.0 < pos < 1.0:
            return cls((0.0,) * (len(FEATURES) + 1))
        x = np.column_stack([np.ones(len(yb)), load_maxima(graphs)])
        w = np.where(yb > 0.5, 0.5 / pos, 0.5 / (1.0 - pos))
        th = np.zeros(x.shape[1])
        reg = _L2 * np.eye(x.shape[1])
        reg[0, 0] = 0.0
        for _ in range(_ITERS):
            p = 1.0 / (1.0 + np.exp(-np.clip(x @ th, -30.0, 30.0)))
            grad = x.T @ (w * (yb - p)) - reg @ th
            hess = (x * (w * p * (1.0 - p))[:, None]).T @ x + reg + 1e-9 * np.eye(x.shape[1])
            step = np.linalg.solve(hess, grad)
            th += step
            if np.abs(step).max() < 1e-8:
                break
        return cls(tuple(float(v) for v in th))
