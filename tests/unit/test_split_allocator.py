"""The splitting reduce allocator (allocation/split.py): hot keys of decomposable aggregates are split over several
buckets, the rest go longest-first to the least-loaded bucket; golden allocations on seeded counts."""

from __future__ import annotations

import numpy as np
import pytest

from adaptstream.allocation import ALLOCATORS, build_allocator
from adaptstream.allocation.split import SplitAllocator, lpt
from adaptstream.errors import ConfigError


def test_lpt_golden():
    buckets, load = lpt(np.array([7, 5, 4, 3, 3, 2]), 3)
    assert buckets.tolist() == [0, 1, 2, 2, 1, 0] and load.tolist() == [9, 8, 7]
    rotated, _ = lpt(np.array([7, 5, 4]), 3, offset=1)  # map task 1 of 3 starts its ties at bucket 1
    assert rotated.tolist() == [1, 2, 0]


def test_pieces_cut_a_hot_cluster_into_capacity_sized_pieces():
    owner, size = SplitAllocator().pieces(np.array([60, 25, 15]), 4)  # capacity 25: 60 -> 20 + 20 + 20
    assert owner.tolist() == [0, 0, 0, 1, 2] and size.tolist() == [20, 20, 20, 25, 15]
    assert SplitAllocator(hot=3.0).pieces(np.array([60, 25, 15]), 4)[1].tolist() == [60, 25, 15]  # not hot enough


def test_a_key_with_60_percent_of_the_batch_is_spread_and_the_buckets_balance():
    rng = np.random.default_rng(7)
    rows = np.concatenate([np.full(6000, 42, np.int64), rng.integers(1000, 5000, 4000)])
    rng.shuffle(rows)
    out = build_allocator("split").assign_rows(rows, np.zeros(0, np.int64), 8)
    load = np.bincount(out, minlength=8)
    assert load.sum() == len(rows) and out.min() >= 0 and out.max() < 8
    assert load.max() / load.mean() <= 1.02, load
    assert len(set(out[rows == 42].tolist())) >= 5  # 60 % of 8 buckets' capacity: over at least 5 buckets
    small = rows[rows != 42][:50]
    for k in np.unique(small):  # a cluster that is not hot stays in one bucket
        assert len(set(out[rows == k].tolist())) == 1


@pytest.mark.parametrize("z", [0.5, 1.0, 1.5, 2.0])
@pytest.mark.parametrize("buckets", [8, 16])
def test_balance_on_zipf_keys_over_map_tasks(z, buckets):
    """Seeded Zipf keys over 4 map tasks, each allocating alone: the buckets' totals (the reduce stage's input)."""
    rng = np.random.default_rng(11)
    ranks = np.arange(1, 10_001, dtype=float)
    p = ranks**-z / (ranks**-z).sum()
    rows = rng.choice(10_000, 80_000, p=p).astype(np.int64)
    alloc, load = build_allocator("split"), np.zeros(buckets, np.int64)
    for t, block in enumerate(np.array_split(rows, 4)):
        load += np.bincount(alloc.assign_rows(block, np.zeros(0, np.int64), buckets, t, 4), minlength=buckets)
    assert load.max() / load.mean() <= 1.01, (z, buckets, load)


def test_every_row_gets_a_bucket_even_with_one_bucket_or_no_rows():
    a = build_allocator("split")
    assert a.assign_rows(np.array([3, 3, 4], np.int64), np.zeros(0, np.int64), 1).tolist() == [0, 0, 0]
    assert a.assign_rows(np.zeros(0, np.int64), np.zeros(0, np.int64), 4).tolist() == []
    with pytest.raises(ConfigError, match="num_buckets must be >= 1"):
        a.assign_rows(np.array([1], np.int64), np.zeros(0, np.int64), 0)
    with pytest.raises(ConfigError, match="hot must be > 0"):
        build_allocator("split", hot=0)
    assert "split" in ALLOCATORS.names()
