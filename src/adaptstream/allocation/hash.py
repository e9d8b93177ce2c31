"""Hash allocation, what Spark's shuffle does: bucket = H(key) mod R, blind to cluster sizes (Prompt Fig. 8a)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptstream.allocation.base import SPLIT_SEED, ReduceAllocator, check_clusters, hash_bucket


class HashAllocator(ReduceAllocator):
    name = "hash"
    uses_reference = False

    def __init__(self, seed: int = SPLIT_SEED) -> None:
        self.seed = int(seed)

    def allocate(
        self,
        keys: np.ndarray,
        sizes: np.ndarray,
        split: np.ndarray,
        num_buckets: int,
        task: int = 0,
        num_tasks: int = 1,
    ) -> np.ndarray:
        keys, _, _ = check_clusters(keys, sizes, split, num_buckets)
        return hash_bucket(keys, num_buckets, self.seed)


@dataclass(frozen=True)
class HashAllocatorConfig:
    seed: int = SPLIT_SEED

    def build(self) -> ReduceAllocator:
        return HashAllocator(self.seed)
