"""q-error, accuracy and balanced test sets (Costream Sec. VII evaluation strategy)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptstream.costmodel.qerror import (
    Q_FLOOR,
    accuracy,
    balanced_accuracy,
    balanced_indices,
    q_errors,
    q_summary,
)


def test_q_error_is_symmetric_ratio() -> None:
    q = q_errors([10.0, 10.0, 5.0], [20.0, 5.0, 5.0])
    np.testing.assert_allclose(q, [2.0, 2.0, 1.0])


def test_q_error_floors_zero_and_rejects_shape_mismatch() -> None:
    assert q_errors([0.0], [1.0])[0] == pytest.approx(1.0 / Q_FLOOR)
    with pytest.raises(ValueError, match="shape"):
        q_errors([1.0, 2.0], [1.0])


def test_q_summary_median_and_p95() -> None:
    actual = np.ones(100)
    predicted = np.arange(1, 101, dtype=float)  # q-errors 1..100
    s = q_summary(actual, predicted)
    assert s["q50"] == pytest.approx(50.5)
    assert s["q95"] == pytest.approx(np.percentile(np.arange(1, 101), 95))
    assert s["n"] == 100


def test_accuracy_and_balanced_accuracy() -> None:
    y = np.array([1, 1, 1, 1, 0], dtype=bool)
    always_true = np.ones(5, dtype=bool)
    assert accuracy(y, always_true) == pytest.approx(0.8)
    assert balanced_accuracy(y, always_true) == pytest.approx(0.5)  # the minority class is never found


def test_balanced_indices_equalise_classes_deterministically() -> None:
    y = np.array([True] * 30 + [False] * 7)
    idx = balanced_indices(y, seed=3)
    assert idx.size == 14
    assert y[idx].sum() == 7
    np.testing.assert_array_equal(idx, balanced_indices(y, seed=3))
    assert (~y[idx]).sum() == 7
