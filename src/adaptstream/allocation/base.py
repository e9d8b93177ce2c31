"""Reduce-bucket allocation: which reduce bucket (= reduce task of the micro-batch's job) each key cluster of one
map task goes to (Prompt Sec. 5).

A map task's output is grouped into key clusters (all tuples of one key). An allocator sees only its own map task's
clusters and the block's reference table (which keys are split over other blocks), never other map tasks: the
decision runs inside each map task with no information shared between them. A key-atomic allocator sends a split key
to the same bucket from every map task (the reduce side sees all of a key), which hashing guarantees; one with
``splits_keys`` (``split``) spreads hot keys on purpose, which the pane mode's partial aggregates allow.
Allocators are stateless across batches; snapshot/restore follow :mod:`adaptstream.policy` all the same.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from adaptstream.errors import ConfigError
from adaptstream.partitioning._kernels import mix64_np
from adaptstream.policy import Policy

#: seed of the hash both allocators use for split keys (and `hash` for every key)
SPLIT_SEED = 99


def hash_bucket(keys: np.ndarray, num_buckets: int, seed: int = SPLIT_SEED) -> np.ndarray:
    """H(key) mod R, identical in every process (splitmix64 of the int64 key hash)."""
    return (mix64_np(np.asarray(keys, np.int64), seed) % np.uint64(num_buckets)).astype(np.int64)


def check_clusters(
    keys: np.ndarray, sizes: np.ndarray, split: np.ndarray, num_buckets: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if int(num_buckets) < 1:
        msg = f"num_buckets must be >= 1, got {num_buckets}"
        raise ConfigError(msg)
    k = np.ascontiguousarray(keys, np.int64)
    s = np.ascontiguousarray(sizes, np.int64)
    sp = np.ascontiguousarray(split, np.bool_)
    if not (k.ndim == s.ndim == sp.ndim == 1 and len(k) == len(s) == len(sp)):
        msg = f"keys, sizes and split must be 1-d arrays of one length, got {k.shape}, {s.shape}, {sp.shape}"
        raise ConfigError(msg)
    if len(s) and s.min() < 0:
        msg = "cluster sizes must be >= 0"
        raise ConfigError(msg)
    return k, s, sp


class ReduceAllocator(Policy, ABC):
    """Assigns one map task's key clusters to reduce buckets."""

    name: str = "base"
    #: True when rows of one key may go to several buckets (only for aggregates whose partials merge)
    splits_keys: bool = False
    #: True when the allocator reads the blocks' reference table (which clusters other blocks hold): the pane
    #: mode then runs its reference pass, a second read of the batch; otherwise the map tasks gather the statistics
    uses_reference: bool = True

    @abstractmethod
    def allocate(
        self,
        keys: np.ndarray,
        sizes: np.ndarray,
        split: np.ndarray,
        num_buckets: int,
        task: int = 0,
        num_tasks: int = 1,
    ) -> np.ndarray:
        """Cluster key hashes (int64, distinct), their tuple counts and split flags of map task `task` of
        `num_tasks` -> bucket per cluster."""

    def assign_rows(
        self, row_keys: np.ndarray, split_keys: np.ndarray, num_buckets: int, task: int = 0, num_tasks: int = 1
    ) -> np.ndarray:
        """Bucket of every row of one map task: rows are grouped into clusters by key, clusters allocated.

        ``split_keys``: the block's reference table, the key hashes of this block that other blocks also hold."""
        row_keys = np.ascontiguousarray(row_keys, np.int64)
        if len(row_keys) == 0:
            return np.zeros(0, np.int64)
        uniq, inverse, counts = np.unique(row_keys, return_inverse=True, return_counts=True)
        split = np.isin(uniq, np.asarray(split_keys, np.int64))
        return self.allocate(uniq, counts, split, num_buckets, task, num_tasks)[inverse]
