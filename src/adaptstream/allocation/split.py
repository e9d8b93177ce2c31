"""``split``: reduce allocation that splits hot keys of decomposable aggregates (issue #53), run by each map task
on its own output.

Prompt's Alg. 3 keeps every key whole, so no key-atomic allocator can balance a batch in which one key holds more
than 1/R of the tuples (at Zipf z = 1.5 the largest key alone holds about 38 %). The pane mode's reduce stage
writes per-(pane, key) *partial* aggregates (sum, count) that the window's emit job adds up (spark/pane.py), so a
key's tuples may be spread over several buckets and merged when the window closes, as Flink's local-global
aggregation does for skew. This allocator, per map task:

1. capacity = tuples of this map task / R;
2. a cluster larger than ``hot`` x capacity is split into ceil(size / capacity) pieces of at most one capacity
   each, the pieces placed like clusters;
3. clusters and pieces, largest first, go to the least-loaded bucket (longest-processing-time first), ties at the
   lowest index after a per-task offset (map task i of P starts at bucket i * R // P, no shared information).

Each map task balances its own output; the buckets' totals are the sums over tasks, so they balance too. Key
statistics are this task's own row counts: no reference table and no second pass over the batch. Only for
decomposable aggregates (sum, count and what derives from them, such as avg); the pane mode computes only those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from adaptstream.allocation.base import ReduceAllocator, check_clusters
from adaptstream.errors import ConfigError

#: aggregates whose partials can be merged across buckets (the pane mode computes sum and count per pane and key)
DECOMPOSABLE = ("sum", "count", "avg", "min", "max")


@njit(cache=True)
def _lpt(sizes, order, num_buckets, offset, out, load):
    for j in range(order.shape[0]):
        i = order[j]
        best = -1
        for r in range(num_buckets):  # least loaded; ties: the first in this task's rotated order
            b = (r + offset) % num_buckets
            if best < 0 or load[b] < load[best]:
                best = b
        out[i] = best
        load[best] += sizes[i]


def lpt(sizes: np.ndarray, num_buckets: int, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Longest-processing-time-first: (bucket per item, load per bucket); ties go to the first bucket from
    ``offset`` on."""
    sizes = np.ascontiguousarray(sizes, np.int64)
    out = np.empty(len(sizes), np.int64)
    load = np.zeros(num_buckets, np.int64)
    _lpt(sizes, np.argsort(-sizes, kind="mergesort"), num_buckets, offset % num_buckets, out, load)
    return out, load


class SplitAllocator(ReduceAllocator):
    name = "split"
    splits_keys = True
    uses_reference = False

    def __init__(self, hot: float = 1.0) -> None:
        self.hot = float(hot)

    def _offset(self, num_buckets: int, task: int, num_tasks: int) -> int:
        return (int(task) * num_buckets) // max(1, int(num_tasks)) % num_buckets

    def allocate(
        self,
        keys: np.ndarray,
        sizes: np.ndarray,
        split: np.ndarray,
        num_buckets: int,
        task: int = 0,
        num_tasks: int = 1,
    ) -> np.ndarray:
        """Whole clusters only (one bucket per cluster, LPT): what the key-atomic interface can say. The pane mode
        calls :meth:`assign_rows`, which splits hot clusters over several buckets."""
        _, s, _ = check_clusters(keys, sizes, split, num_buckets)
        return lpt(s, int(num_buckets), self._offset(int(num_buckets), task, num_tasks))[0]

    def pieces(self, sizes: np.ndarray, num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
        """(cluster index, size) of every piece: hot clusters cut into pieces of at most one capacity."""
        capacity = max(1.0, float(sizes.sum()) / num_buckets)
        n = np.where(sizes > self.hot * capacity, np.ceil(sizes / capacity), 1).astype(np.int64)
        owner = np.repeat(np.arange(len(sizes)), n)
        first = np.cumsum(n) - n  # index of each cluster's first piece
        k = np.arange(len(owner)) - first[owner]  # piece number within its cluster
        base, extra = sizes[owner] // n[owner], sizes[owner] % n[owner]
        return owner, base + (k < extra)

    def assign_rows(
        self, row_keys: np.ndarray, split_keys: np.ndarray, num_buckets: int, task: int = 0, num_tasks: int = 1
    ) -> np.ndarray:
        row_keys = np.ascontiguousarray(row_keys, np.int64)
        check_clusters(row_keys[:0], row_keys[:0], np.zeros(0, np.bool_), num_buckets)  # the bucket count
        if len(row_keys) == 0:
            return np.zeros(0, np.int64)
        _, inverse, counts = np.unique(row_keys, return_inverse=True, return_counts=True)
        _, size = self.pieces(counts.astype(np.int64), int(num_buckets))
        piece_bucket, _ = lpt(size, int(num_buckets), self._offset(int(num_buckets), task, num_tasks))
        # rows of a cluster, in their order, fill its pieces one after another
        order = np.argsort(inverse, kind="stable")
        piece_of_sorted = np.repeat(np.arange(len(size)), size)  # pieces are grouped by cluster, in cluster order
        out = np.empty(len(row_keys), np.int64)
        out[order] = piece_bucket[piece_of_sorted]
        return out


@dataclass(frozen=True)
class SplitAllocatorConfig:
    hot: float = 1.0  # a cluster above hot x (tuples / R) is split

    def build(self) -> ReduceAllocator:
        if not self.hot > 0:
            msg = f"split allocator: hot must be > 0 (a share of one bucket's capacity), got {self.hot}"
            raise ConfigError(msg)
        return SplitAllocator(self.hot)
