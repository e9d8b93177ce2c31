"""Accuracy measures of Costream Sec. VII (evaluation strategy): q-error, accuracy, balanced test sets."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: values below this are treated as this (a q-error needs two positive numbers)
Q_FLOOR = 1e-6


def q_errors(actual: Sequence[float] | np.ndarray, predicted: Sequence[float] | np.ndarray) -> np.ndarray:
    """q(c, c_hat) = max(c / c_hat, c_hat / c) >= 1, elementwise; both sides floored at Q_FLOOR."""
    c = np.maximum(np.asarray(actual, dtype=np.float64), Q_FLOOR)
    p = np.maximum(np.asarray(predicted, dtype=np.float64), Q_FLOOR)
    if c.shape != p.shape:
        msg = f"shape mismatch: {c.shape} actual vs {p.shape} predicted"
        raise ValueError(msg)
    return np.maximum(c / p, p / c)


def q_summary(actual: Sequence[float] | np.ndarray, predicted: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Median (Q50) and 95th percentile (Q95) q-error, as in Costream Table III."""
    q = q_errors(actual, predicted)
    if q.size == 0:
        return {"q50": float("nan"), "q95": float("nan"), "n": 0}
    return {"q50": float(np.median(q)), "q95": float(np.percentile(q, 95)), "n": int(q.size)}


def accuracy(actual: Sequence[bool] | np.ndarray, predicted: Sequence[bool] | np.ndarray) -> float:
    a, p = np.asarray(actual, dtype=bool), np.asarray(predicted, dtype=bool)
    return float((a == p).mean()) if a.size else float("nan")


def balanced_accuracy(actual: Sequence[bool] | np.ndarray, predicted: Sequence[bool] | np.ndarray) -> float:
    """Mean of the per-class recalls; equals accuracy on a class-balanced set."""
    a, p = np.asarray(actual, dtype=bool), np.asarray(predicted, dtype=bool)
    recalls = [float((p[a == c] == c).mean()) for c in (False, True) if (a == c).any()]
    return float(np.mean(recalls)) if recalls else float("nan")


def balanced_indices(labels: Sequence[bool] | np.ndarray, seed: int = 0) -> np.ndarray:
    """Indices of a class-balanced subset: the majority class is subsampled to the minority's size
    (seeded)."""
    y = np.asarray(labels, dtype=bool)
    pos, neg = np.flatnonzero(y), np.flatnonzero(~y)
    n = min(pos.size, neg.size)
    rng = np.random.default_rng(seed)
    keep = np.concatenate([rng.choice(pos, n, replace=False), rng.choice(neg, n, replace=False)])
    return np.sort(keep)
