"""Prompt's reduce-bucket allocator (Abdelhamid et al., Prompt, Sec. 5, Alg. 3), run by each map task on its own
output.

1. Bucket_size = |C| / |R| (tuples of this map task over the number of reduce buckets).
2. Split keys (the block's reference table says other blocks hold them too) are hashed, identically in every map
   task, so each split key still meets all its tuples in one reduce bucket; they use up their bucket's capacity.
3. The non-split clusters, largest first, go worst-fit: to the available bucket with the most remaining capacity
   (ties: the lowest bucket index). The chosen bucket leaves the candidate set until every bucket has received a
   cluster, then the set is reset to all buckets (Alg. 3 lines 7-9, as the text explains them: "the selected
   bucket is removed from the candidate list until all other buckets receive an item"). This bounds bucket overflow
   and balances the number of clusters per bucket as well as their sizes.

Ties (every bucket equally empty, as at the start of each map task) are not fixed by the paper; breaking them at
the lowest index would send the largest cluster of every map task to bucket 0. Map task i of P starts its tie
scan at bucket i * R // P instead: its own index, still no information from other map tasks.

No information is shared between map tasks; by the additive property each task's balance adds up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from adaptstream.allocation.base import SPLIT_SEED, ReduceAllocator, check_clusters, hash_bucket


@njit(cache=True)
def _worst_fit(sizes, split, hashed, num_buckets, offset, out):
    total = 0
    for i in range(sizes.shape[0]):
        total += sizes[i]
    rem = np.full(num_buckets, total / num_buckets)
    for i in range(sizes.shape[0]):
        if split[i]:
            out[i] = hashed[i]
            rem[hashed[i]] -= sizes[i]
    order = np.argsort(-sizes, kind="mergesort")
    avail = np.ones(num_buckets, dtype=np.bool_)
    left = num_buckets
    for t in range(order.shape[0]):
        i = order[t]
        if split[i]:
            continue
        best = -1
        for jj in range(num_buckets):
            j = (jj + offset) % num_buckets
            if avail[j] and (best < 0 or rem[j] > rem[best]):
                best = j
        out[i] = best
        rem[best] -= sizes[i]
        avail[best] = False
        left -= 1
        if left == 0:
            avail[:] = True
            left = num_buckets


def worst_fit_buckets(
    keys: np.ndarray, sizes: np.ndarray, split: np.ndarray, num_buckets: int, seed: int = SPLIT_SEED, offset: int = 0
) -> np.ndarray:
    """Alg. 3 for one map task: bucket per cluster (see the module docstring); ties go to the first bucket at
    or after `offset`."""
    keys, sizes, split = check_clusters(keys, sizes, split, num_buckets)
    out = np.empty(len(keys), dtype=np.int64)
    _worst_fit(
        sizes, split, hash_bucket(keys, num_buckets, seed), int(num_buckets), int(offset) % int(num_buckets), out
    )
    return out


class PromptAllocator(ReduceAllocator):
    name = "prompt"

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
        offset = (int(task) * int(num_buckets)) // max(1, int(num_tasks))
        return worst_fit_buckets(keys, sizes, split, num_buckets, self.seed, offset)


@dataclass(frozen=True)
class PromptAllocatorConfig:
    """seed: the hash of split keys (must be the same in every map task of a job)."""

    seed: int = SPLIT_SEED

    def build(self) -> ReduceAllocator:
        return PromptAllocator(self.seed)
