"""Metrics of Prompt (Eq. 2-6) and holistic partitioning (Eq. 1-2, 4, 6-10) on hand-checked inputs."""

from __future__ import annotations

import numpy as np
import pytest

from adaptstream.errors import PartitioningError
from adaptstream.partitioning import metrics as m


def test_hand_example_split_key():
    keys = np.array([1, 1, 2, 3])
    blocks = np.array([0, 1, 0, 1])
    rep = m.batch_report(keys, blocks, 2)
    assert rep["block_sizes"] == [2, 2] and rep["bsi"] == 0
    assert rep["block_cardinalities"] == [2, 2] and rep["bci"] == 0
    assert rep["aggregation_cost"] == 4  # (1,b0) (2,b0) (1,b1) (3,b1)
    assert rep["ksr"] == pytest.approx(4 / 3)
    assert rep["mpi"] == pytest.approx((0 + 0 + 4 / 3) / 3)
    assert rep["distinct_keys"] == 3


def test_hand_example_skewed_blocks_and_hybrid():
    keys = np.array([1, 1, 1, 2])
    blocks = np.array([0, 0, 0, 1])
    rep = m.batch_report(keys, blocks, 2)
    assert rep["bsi"] == 1.0 and rep["tuple_imbalance"] == 1.0  # max 3 - avg 2
    assert rep["bci"] == 0 and rep["ksr"] == 1.0 and rep["aggregation_cost"] == 2
    # H = 0.5 * [1, 0] + 0.5 * [0, 0] -> max .5 - avg .25
    assert rep["hybrid_imbalance"] == pytest.approx(0.25)


def test_empty_block_counts():
    keys = np.array([7, 8])
    blocks = np.array([0, 0])
    assert m.block_sizes(blocks, 3).tolist() == [2, 0, 0]
    assert m.block_cardinalities(keys, blocks, 3).tolist() == [2, 0, 0]
    assert m.bsi(keys, blocks, 3) == pytest.approx(2 - 2 / 3)
    assert m.bci(keys, blocks, 3) == pytest.approx(2 - 2 / 3)


def test_minmax_and_mpi_weights():
    assert m.minmax(np.array([2, 4, 6])).tolist() == [0.0, 0.5, 1.0]
    assert m.minmax(np.array([3, 3])).tolist() == [0.0, 0.0]
    assert m.mpi(3.0, 6.0, 1.0, (1.0, 0.0, 0.0)) == 3.0
    with pytest.raises(PartitioningError):
        m.mpi(1, 1, 1, (0.5, 0.5, 0.5))


def test_reduce_bucket_sizes_count_partials():
    keys = np.array([1, 1, 2, 2, 3])
    blocks = np.array([0, 1, 0, 0, 1])
    sizes = m.reduce_bucket_sizes(keys, blocks, 2, 3)
    assert sizes.sum() == m.aggregation_cost(keys, blocks, 2) == 4


def test_bad_input_rejected():
    with pytest.raises(PartitioningError):
        m.batch_report(np.array([1, 2]), np.array([0]), 2)
    with pytest.raises(PartitioningError):
        m.batch_report(np.array([1, 2]), np.array([0, 2]), 2)
